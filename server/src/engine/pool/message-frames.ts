// The framing of the pool's messages to and from a worker process (protocol.ts `ToWorker`,
// `FromWorker`) on their stream socket: each message a frame of a 4-byte big-endian length and
// that many bytes of UTF-8 JSON. Both ends use this file. It replaced Node's IPC channel with
// advanced serialization, whose serializer cost a WAT echo's worker about an eighth of its time
// (docs/performance.md).

/** Bytes of a frame's length prefix. */
const HEADER = 4;
/** No frame is longer: V8's longest string is about 2^29 characters, and JSON.parse takes one string. */
export const MAX_FRAME_BYTES = 2 ** 30;
/** Below this, a frame is written into a buffer three times its JSON's UTF-16 length, unmeasured. */
const SMALL = 64 * 1024;

/** One message as a frame. */
export function encodeFrame(message: unknown): Buffer {
  const json = JSON.stringify(message);
  // Three bytes per UTF-16 unit bound its UTF-8 size: small frames skip the measuring pass.
  const frame = Buffer.allocUnsafe(HEADER + (json.length < SMALL ? json.length * 3 : Buffer.byteLength(json)));
  const length = frame.write(json, HEADER, "utf8");
  frame.writeUInt32BE(length, 0);
  return frame.subarray(0, HEADER + length);
}

/**
 * Reassembles frames from a stream's chunks, in order, and hands each decoded message on.
 * A frame longer than `maxBytes` or that is not JSON is a broken peer: `onBroken` is called
 * once and nothing more is decoded.
 */
export class FrameReader {
  readonly #maxBytes: number;
  readonly #onMessage: (message: unknown) => void;
  readonly #onBroken: (reason: string) => void;
  /** Chunks of the frame being read, and their total size. */
  #chunks: Buffer[] = [];
  #buffered = 0;
  #broken = false;

  constructor(maxBytes: number, onMessage: (message: unknown) => void, onBroken: (reason: string) => void) {
    this.#maxBytes = maxBytes;
    this.#onMessage = onMessage;
    this.#onBroken = onBroken;
  }

  push(chunk: Buffer): void {
    if (this.#broken) return;
    this.#chunks.push(chunk);
    this.#buffered += chunk.length;
    while (this.#buffered >= HEADER) {
      // Joined only when a frame spans chunks: a small message usually arrives in one.
      let head = this.#chunks[0]!;
      if (head.length < HEADER) head = this.#join();
      const length = head.readUInt32BE(0);
      if (length > this.#maxBytes) {
        this.#break(`a frame of ${length} bytes, more than ${this.#maxBytes}`);
        return;
      }
      if (this.#buffered < HEADER + length) return;
      if (head.length < HEADER + length) head = this.#join();
      const rest = head.subarray(HEADER + length);
      let message: unknown;
      try {
        message = JSON.parse(head.toString("utf8", HEADER, HEADER + length));
      } catch {
        this.#break("a frame that is not JSON");
        return;
      }
      if (rest.length > 0) this.#chunks[0] = rest;
      else this.#chunks.shift();
      this.#buffered -= HEADER + length;
      this.#onMessage(message);
      if (this.#broken) return;
    }
  }

  #join(): Buffer {
    const joined = Buffer.concat(this.#chunks, this.#buffered);
    this.#chunks = [joined];
    return joined;
  }

  #break(reason: string): void {
    this.#broken = true;
    this.#chunks = [];
    this.#buffered = 0;
    this.#onBroken(reason);
  }
}
