/** The first eight bytes of a core module: the magic `\0asm`, then version 1. */
export const CORE_MODULE_PREAMBLE = Uint8Array.of(0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00);
