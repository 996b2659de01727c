export { FUEL_IMPORT } from "./import.ts";
export { instrumentFuel, type InstrumentResult } from "./instrument.ts";
export { capMemory, definedMemoryPages } from "./memory.ts";
