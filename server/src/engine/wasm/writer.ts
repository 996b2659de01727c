import type { Reader } from "./reader.ts";

const MAX_U32_LEB = 5;
const encoder = new TextEncoder();

/** Encoded length of an unsigned LEB128. */
function u32Size(v: number): number {
  let size = 1;
  for (let x = v >>> 7; x > 0; x >>>= 7) size++;
  return size;
}

/** Growable output buffer; one instance is reused for many writes to avoid reallocation. */
export class Writer {
  buf: Uint8Array<ArrayBuffer>;
  len = 0;

  constructor(capacity: number) {
    this.buf = new Uint8Array(Math.max(16, capacity));
  }

  reserve(n: number): void {
    const need = this.len + n;
    if (need <= this.buf.length) return;
    const next = new Uint8Array(Math.max(need, this.buf.length * 2));
    next.set(this.buf.subarray(0, this.len));
    this.buf = next;
  }

  u8(b: number): void {
    this.reserve(1);
    this.buf[this.len++] = b;
  }

  u32(v: number): void {
    this.reserve(5);
    let x = v >>> 0;
    while (x >= 0x80) {
      this.buf[this.len++] = (x & 0x7f) | 0x80;
      x >>>= 7;
    }
    this.buf[this.len++] = x;
  }

  /** Reserves room for a size that is known only after the sized content is written; see `endSized`. */
  beginSized(): number {
    this.reserve(MAX_U32_LEB);
    const at = this.len;
    this.len += MAX_U32_LEB;
    return at;
  }

  /** Writes the size of everything after the reserved room at `at`, then closes the unused gap. */
  endSized(at: number): void {
    const size = this.len - at - MAX_U32_LEB;
    const sizeLen = u32Size(size);
    this.buf.copyWithin(at + sizeLen, at + MAX_U32_LEB, this.len);
    const end = this.len - (MAX_U32_LEB - sizeLen);
    this.len = at;
    this.u32(size);
    this.len = end;
  }

  /** Signed LEB128 of a non-negative safe integer (fuel costs in i64.const). */
  sleb(v: number): void {
    this.reserve(10);
    let x = v;
    while (x >= 0x40) {
      this.buf[this.len++] = (x % 0x80) | 0x80;
      x = Math.floor(x / 0x80);
    }
    this.buf[this.len++] = x;
  }

  /** Copies src[start, end). Short runs dominate, and a loop beats allocating a subarray for them. */
  copy(src: Uint8Array, start: number, end: number): void {
    const n = end - start;
    this.reserve(n);
    if (n < 32) {
      const buf = this.buf;
      let o = this.len;
      for (let i = start; i < end; i++) buf[o++] = src[i]!;
    } else {
      this.buf.set(src.subarray(start, end), this.len);
    }
    this.len += n;
  }

  /** Copies one LEB128 verbatim from the reader. */
  copyLeb(r: Reader): void {
    const start = r.pos;
    r.skipLeb();
    this.copy(r.bytes, start, r.pos);
  }

  /** Copies a vector's element count and returns it. */
  copyCount(r: Reader): number {
    const n = r.u32();
    this.u32(n);
    return n;
  }

  /** Writes a name: its UTF-8 length, then its bytes. */
  name(text: string): void {
    const bytes = encoder.encode(text);
    this.u32(bytes.length);
    this.copy(bytes, 0, bytes.length);
  }

  /** Writes a length-prefixed section or subsection: id, size, content. */
  section(id: number, content: Writer): void {
    this.u8(id);
    this.u32(content.len);
    this.copy(content.buf, 0, content.len);
  }

  result(): Uint8Array<ArrayBuffer> {
    return this.buf.slice(0, this.len);
  }
}
