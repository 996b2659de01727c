/** Sizes the rewriter counts guest memory in: what bulk operators are charged by (opcodes.ts). */

export const PAGE_BYTES = 65536;
/** The unit fuel is charged in for bulk operators (opcodes.ts): a machine word. */
export const WORD_BYTES = 8;
/**
 * What V8 holds per table entry: an 8-byte pointer in the table's entry array, plus, for a
 * funcref table, a 24-byte entry of its dispatch table (what call_indirect reads: target,
 * signature, instance). Measured on Node 24: 32 bytes of heap per funcref entry, 8 per externref
 * entry. One figure for every table, the larger: the cap must hold for the worst case.
 */
export const TABLE_ENTRY_BYTES = 32;
