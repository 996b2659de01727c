export { FUEL_IMPORT, instrumentFuel, type InstrumentResult } from "./instrument.ts";
export { capMemory } from "./memory.ts";
