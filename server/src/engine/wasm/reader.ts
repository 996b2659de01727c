/** A view without subclass (Buffer would make every byte access in the hot loops polymorphic). */
export function plainBytes(bytes: Uint8Array): Uint8Array {
  return new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/**
 * What is wrong with the bytes at `offset`: a read past the reader's end, or a u32 LEB128 longer
 * than 5 bytes or wider than 32 bits (both invalid in the binary format).
 */
export type BinaryFault = "truncated" | "u32 too long";

/** Makes the error a reader throws, so that each owner keeps its own error type and wording. */
export type FaultError = (fault: BinaryFault, offset: number) => Error;

/** The fuel rewriter's errors: plain, with the module-absolute offset. */
export const faultWithOffset: FaultError = (fault, offset) =>
  new Error(fault === "truncated" ? `unexpected end of data at offset ${offset}` : `LEB128 longer than 5 bytes or wider than 32 bits at offset ${offset}`);

/**
 * Byte cursor over a wasm binary with LEB128 decoding, the engine's one: the fuel rewriter and the
 * component reader both read with it. Offsets stay absolute for errors. `bytes` should be a plain
 * Uint8Array (plainBytes): one reader class seeing Buffers too would make its byte access polymorphic.
 */
export class Reader {
  readonly bytes: Uint8Array;
  pos: number;
  readonly end: number;
  readonly #fault: FaultError;

  constructor(bytes: Uint8Array, pos: number, end: number, fault: FaultError = faultWithOffset) {
    this.bytes = bytes;
    this.pos = pos;
    this.end = end;
    this.#fault = fault;
  }

  u8(): number {
    if (this.pos >= this.end) throw this.#fault("truncated", this.pos);
    return this.bytes[this.pos++]!;
  }

  peek(): number {
    if (this.pos >= this.end) throw this.#fault("truncated", this.pos);
    return this.bytes[this.pos]!;
  }

  /** Unsigned LEB128 up to 32 bits (indices, counts, sizes); longer or wider is refused. */
  u32(): number {
    const start = this.pos;
    let result = 0;
    for (let shift = 0; shift < 28; shift += 7) {
      const b = this.u8();
      result |= (b & 0x7f) << shift;
      if ((b & 0x80) === 0) return result;
    }
    // The fifth byte holds bits 28-31: any higher bit, or a continuation, is malformed.
    const last = this.u8();
    if (last > 0x0f) throw this.#fault("u32 too long", start);
    return (result | (last << 28)) >>> 0;
  }

  /** Skips any LEB128 (signed or unsigned, any width) without decoding it. */
  skipLeb(): void {
    while (this.u8() & 0x80);
  }

  skip(n: number): void {
    if (this.pos + n > this.end) throw this.#fault("truncated", this.pos);
    this.pos += n;
  }

  /** Skips a length-prefixed byte string (names, data payloads). */
  skipVec(): void {
    this.skip(this.u32());
  }

  /** Skips a value type, including the two-part (ref null? heaptype) form. */
  skipValType(): void {
    const b = this.u8();
    if (b === 0x63 || b === 0x64) this.skipLeb();
  }
}
