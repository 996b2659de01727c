export { CAPPED_EXPORT_PREFIX, cappedMaximum } from "./capped-export.ts";
export { TABLE_ENTRY_BYTES, TABLE_GROWTH_SHARE } from "./footprint.ts";
export { FUEL_IMPORT, RECYCLED_MEMORY } from "./import.ts";
export { instrumentFuel, type InstrumentResult } from "./instrument.ts";
export { capMemory, definedMemoryPages } from "./memory.ts";
export { importDefinedMemory, recycledMemoryLimits, type MemoryLimits } from "./memory-import.ts";
