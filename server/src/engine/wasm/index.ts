// The WebAssembly binary format's primitives, one of each for the engine: the byte reader with
// LEB128 decoding, the writer, the preambles.
export { CORE_MODULE_PREAMBLE } from "./preamble.ts";
export { plainBytes, Reader } from "./reader.ts";
export { Writer } from "./writer.ts";
