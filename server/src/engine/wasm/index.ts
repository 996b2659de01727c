// The WebAssembly binary format's primitives, one of each for the engine: the byte reader with
// LEB128 decoding, the writer, the preambles, the page and limits of memories and tables, and the
// encodings of the instructions and types the engine writes or looks for. The fuel rewriter (fuel/) and admission's component reader
// (component/) both read with them.
export {
  BLOCK,
  CALL,
  END,
  GLOBAL_GET,
  GLOBAL_SET,
  I64_CONST,
  I64_EXTEND_I32_U,
  I64_LT_S,
  I64_SHL,
  I64_SHR_U,
  I64_SUB,
  IF,
  LOCAL_GET,
  LOCAL_SET,
  LOCAL_TEE,
  REF_FUNC,
  RETURN_CALL,
  UNREACHABLE,
} from "./instructions.ts";
export { LIMITS_64, LIMITS_HAS_MAX, LIMITS_SHARED, MAX_PAGES_32, PAGE_BYTES } from "./limits.ts";
export { bytesAt, COMPONENT_LAYER, COMPONENT_VERSION, CORE_MODULE_PREAMBLE, LAYER_AT, PREAMBLE_BYTES, VERSION_AT, WASM_MAGIC } from "./preamble.ts";
export { lebEnd, plainBytes, Reader, type BinaryFault, type FaultError } from "./reader.ts";
export { EMPTY_BLOCK_TYPE, FUNC_TYPE_FORM, I32, I64, REF, REF_NULL } from "./type-encodings.ts";
export { Writer } from "./writer.ts";
