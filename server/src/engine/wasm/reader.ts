import { REF, REF_NULL } from "./type-encodings.ts";

/** A view without subclass (Buffer would make every byte access in the hot loops polymorphic). */
export function plainBytes(bytes: Uint8Array): Uint8Array {
  return new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/**
 * The offset just past the LEB128 (any width, signed or not) at `pos`, unchecked: for loops that
 * keep their position in a local and compare it with their end themselves. Past the array's end
 * it stops (an absent byte has no continuation bit).
 */
export function lebEnd(bytes: Uint8Array, pos: number): number {
  while (bytes[pos++]! & 0x80);
  return pos;
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

  /**
   * Unsigned LEB128 up to 32 bits (indices, counts, sizes); longer or wider is refused. The
   * position stays in a local: the instrumenter decodes every branch label and call with this.
   */
  u32(): number {
    const bytes = this.bytes;
    const end = this.end;
    const start = this.pos;
    let pos = start;
    let result = 0;
    for (let shift = 0; shift < 28; shift += 7) {
      if (pos >= end) throw this.#fault("truncated", pos);
      const b = bytes[pos++]!;
      result |= (b & 0x7f) << shift;
      if (b < 0x80) {
        this.pos = pos;
        return result;
      }
    }
    if (pos >= end) throw this.#fault("truncated", pos);
    // The fifth byte holds bits 28-31: any higher bit, or a continuation, is malformed.
    const last = bytes[pos++]!;
    if (last > 0x0f) throw this.#fault("u32 too long", start);
    this.pos = pos;
    return (result | (last << 28)) >>> 0;
  }

  /** Skips any LEB128 (signed or unsigned, any width) without decoding it. */
  skipLeb(): void {
    const next = lebEnd(this.bytes, this.pos);
    if (next > this.end) throw this.#fault("truncated", this.end);
    this.pos = next;
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
    if (b === REF_NULL || b === REF) this.skipLeb();
  }

  /** Skips a block type: 0x40, a value type or an s33 type index (the single-byte ones are one-byte LEBs). */
  skipBlockType(): void {
    const b = this.peek();
    if (b === REF_NULL || b === REF) this.pos++;
    this.skipLeb();
  }
}
