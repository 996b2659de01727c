// wasi:io classes that stand for both kinds of stream a guest holds: this filesystem's file
// streams, and preview2-shim's (stdio, wasi:http bodies). jco's glue checks every stream and
// pollable an import returns with `instanceof` against the class in its import object, so that
// class must accept both. Each extends preview2-shim's, whose methods the glue (and the pool's
// import check) find on its prototype, and answers `instanceof` for ours too.
import { FileInputStream, FileOutputStream } from "./streams.ts";
import { ReadyPollable } from "./pollable.ts";
import { ShimInputStream, ShimOutputStream, ShimPollable } from "./shim.ts";

export class InputStream extends ShimInputStream {
  static override [Symbol.hasInstance](value: unknown): boolean {
    return value instanceof FileInputStream || value instanceof ShimInputStream;
  }
}

export class OutputStream extends ShimOutputStream {
  static override [Symbol.hasInstance](value: unknown): boolean {
    return value instanceof FileOutputStream || value instanceof ShimOutputStream;
  }
}

export class Pollable extends ShimPollable {
  static override [Symbol.hasInstance](value: unknown): boolean {
    return value instanceof ReadyPollable || value instanceof ShimPollable;
  }
}

interface Readable {
  read(length: bigint): Uint8Array;
  blockingRead(length: bigint): Uint8Array;
}

interface Writable {
  checkWrite(): bigint;
  write(contents: Uint8Array): void;
  blockingWriteAndFlush(contents: Uint8Array): void;
  splice(source: unknown, length: bigint): bigint;
  blockingSplice(source: unknown, length: bigint): bigint;
}

/** What blocking-write-and-flush takes at most (wasi:io/streams). */
const BLOCKING_WRITE_BYTES = 4096n;

// preview2-shim's splice reads its source through the shim's io worker, which knows nothing of our
// streams: splicing one of ours into one of its (a file to stdout, to an HTTP body) reads here and
// writes there instead, within what the destination accepts.
const prototype = ShimOutputStream.prototype as Writable;
const shimSplice = prototype.splice;
const shimBlockingSplice = prototype.blockingSplice;
prototype.splice = function splice(this: Writable, source: unknown, length: bigint): bigint {
  if (!(source instanceof FileInputStream)) return shimSplice.call(this, source, length);
  const room = this.checkWrite();
  const bytes = (source as Readable).read(length < room ? length : room);
  this.write(bytes);
  return BigInt(bytes.length);
};
prototype.blockingSplice = function blockingSplice(this: Writable, source: unknown, length: bigint): bigint {
  if (!(source instanceof FileInputStream)) return shimBlockingSplice.call(this, source, length);
  const bytes = (source as Readable).blockingRead(length < BLOCKING_WRITE_BYTES ? length : BLOCKING_WRITE_BYTES);
  this.blockingWriteAndFlush(bytes);
  return BigInt(bytes.length);
};
