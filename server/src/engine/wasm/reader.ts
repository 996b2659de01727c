/** A view without subclass (Buffer would make every byte access in the hot loops polymorphic). */
export function plainBytes(bytes: Uint8Array): Uint8Array {
  return new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** Byte cursor over a wasm binary with LEB128 decoding. Offsets stay module-absolute for errors. */
export class Reader {
  readonly bytes: Uint8Array;
  pos: number;
  readonly end: number;

  constructor(bytes: Uint8Array, pos: number, end: number) {
    this.bytes = bytes;
    this.pos = pos;
    this.end = end;
  }

  u8(): number {
    if (this.pos >= this.end) throw new Error(`unexpected end of data at offset ${this.pos}`);
    return this.bytes[this.pos++]!;
  }

  /** Unsigned LEB128 up to 32 bits (indices, counts, sizes). */
  u32(): number {
    const start = this.pos;
    let result = 0;
    for (let shift = 0; shift < 35; shift += 7) {
      const b = this.u8();
      result |= (b & 0x7f) << shift;
      if ((b & 0x80) === 0) return result >>> 0;
    }
    throw new Error(`LEB128 longer than 5 bytes at offset ${start}`);
  }

  /** Skips any LEB128 (signed or unsigned, any width) without decoding it. */
  skipLeb(): void {
    while (this.u8() & 0x80);
  }

  skip(n: number): void {
    if (this.pos + n > this.end) throw new Error(`unexpected end of data at offset ${this.pos}`);
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
