/** The unit of a memory's size: the 64 KiB WebAssembly page. */
export const PAGE_BYTES = 65536;
/** 4 GiB of pages: the most a 32-bit memory can address. */
export const MAX_PAGES_32 = 65536;

/** Flags of a memory's or table's limits: a maximum follows the minimum. */
export const LIMITS_HAS_MAX = 1;
/** The memory is shared (threads). */
export const LIMITS_SHARED = 2;
/** The memory or table is indexed by i64 (memory64, table64). */
export const LIMITS_64 = 4;
