export { FUEL_IMPORT, instrumentFuel, type InstrumentResult } from "./instrument.ts";
export { capMemory, definedMemoryPages } from "./memory.ts";
