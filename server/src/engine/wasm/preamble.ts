/** `\0asm`: how every WebAssembly binary starts, core module or component. */
export const WASM_MAGIC = Uint8Array.of(0x00, 0x61, 0x73, 0x6d);

/**
 * The preamble is the magic and two little-endian u16, a version and a layer: 1 and 0 for a core
 * module (which the core spec reads as one u32 version, 1), COMPONENT_VERSION and COMPONENT_LAYER
 * for a component.
 */
export const PREAMBLE_BYTES = 8;
export const VERSION_AT = 4;
export const LAYER_AT = 6;

export const CORE_MODULE_PREAMBLE = Uint8Array.of(...WASM_MAGIC, 0x01, 0x00, 0x00, 0x00);
/** The pre-standard binary version that current toolchains (wasm-tools, jco, componentize-js) emit. */
export const COMPONENT_VERSION = Uint8Array.of(0x0d, 0x00);
export const COMPONENT_LAYER = Uint8Array.of(0x01, 0x00);

/** True when `bytes` holds `expected` from `offset` on. */
export function bytesAt(bytes: Uint8Array, offset: number, expected: Uint8Array): boolean {
  if (offset + expected.length > bytes.length) return false;
  for (let i = 0; i < expected.length; i++) if (bytes[offset + i] !== expected[i]) return false;
  return true;
}
