// The WebAssembly binary format's primitives, one of each for the engine: the byte reader with
// LEB128 decoding, the writer, the preambles. The fuel rewriter (fuel/) and admission's component
// reader (component/) both read with them.
export { bytesAt, COMPONENT_LAYER, COMPONENT_VERSION, CORE_MODULE_PREAMBLE, LAYER_AT, PREAMBLE_BYTES, VERSION_AT, WASM_MAGIC } from "./preamble.ts";
export { lebEnd, plainBytes, Reader, type BinaryFault, type FaultError } from "./reader.ts";
export { Writer } from "./writer.ts";
