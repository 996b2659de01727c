/** How the core binary format encodes the types the engine writes or looks for. */

export const I32 = 0x7f;
export const I64 = 0x7e;
/** `ref null ht` and `ref ht`: the two-part reference types, whose heap type follows as an s33. */
export const REF_NULL = 0x63;
export const REF = 0x64;
/** The block type of a block that takes and leaves nothing on the stack. */
export const EMPTY_BLOCK_TYPE = 0x40;
/** The form byte of a function type (the GC proposal's struct, array, sub and rec forms are others). */
export const FUNC_TYPE_FORM = 0x60;
