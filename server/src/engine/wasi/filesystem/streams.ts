// wasi:io/streams over files: what read-via-stream, write-via-stream and append-via-stream return.
// All I/O is synchronous on the file (no io worker), so the streams are always ready and every
// "blocking" variant is its plain one. End of file is `closed`; a failure is
// `last-operation-failed` with a wasi:io/error whose filesystem-error-code says why.
import { errorCode } from "./error-code.ts";
import { readLength, safeNumber, sizeOf, writeAt } from "./file-io.ts";
import type { FdHandle, FileTable } from "./file-table.ts";
import { ReadyPollable } from "./pollable.ts";
import type { QuotaAccount } from "./quota.ts";
import { CLOSED, failed } from "./stream-error.ts";

/** Bytes an output stream accepts per write (check-write's answer). */
const WRITE_CAPACITY = 1024 * 1024;

/** Where an input stream reads from: a host file or bytes in memory. */
export interface ByteSource {
  /** Up to `length` bytes at `position`; empty at the end. */
  readAt(length: number, position: number): Uint8Array;
  /** Called once, when the stream is dropped. */
  release(): void;
}

/** Any wasi:io/streams input stream (ours or preview2-shim's): what splice reads from. */
interface Readable {
  read(length: bigint): Uint8Array;
  blockingRead(length: bigint): Uint8Array;
}

export class FileInputStream {
  #source: ByteSource | undefined;
  #position: number;
  readonly #table: FileTable;

  /** An admitted object of `table` (see FileTable.admitted); it owns `source`. */
  constructor(source: ByteSource, position: number, table: FileTable) {
    this.#source = source;
    this.#position = position;
    this.#table = table;
  }

  read(length: bigint): Uint8Array {
    const source = this.#live();
    let bytes: Uint8Array;
    try {
      const wanted = readLength(length);
      if (wanted === 0) return new Uint8Array(0);
      bytes = source.readAt(wanted, this.#position);
    } catch (error) {
      throw failed(errorCode(error));
    }
    if (bytes.length === 0) throw CLOSED;
    this.#position += bytes.length;
    return bytes;
  }

  blockingRead(length: bigint): Uint8Array {
    return this.read(length);
  }

  skip(length: bigint): bigint {
    return BigInt(this.read(length).length);
  }

  blockingSkip(length: bigint): bigint {
    return this.skip(length);
  }

  subscribe(): ReadyPollable {
    return new ReadyPollable();
  }

  [Symbol.dispose](): void {
    const source = this.#source;
    if (!source) return;
    this.#source = undefined;
    source.release();
    this.#table.leave();
  }

  #live(): ByteSource {
    if (this.#table.revoked) throw failed("not-permitted");
    if (!this.#source) throw failed("bad-descriptor");
    return this.#source;
  }
}

/** Where an output stream writes: a host file open for writing, and the account its growth goes to. */
export interface FileSink {
  handle: FdHandle;
  account: QuotaAccount;
}

export class FileOutputStream {
  #sink: FileSink | undefined;
  /** Where the next write goes; "append": at the end of the file as it is then. */
  #position: number | "append";
  readonly #table: FileTable;

  /** An admitted object of `table`; it holds a reference on `sink.handle`. */
  constructor(sink: FileSink, position: number | "append", table: FileTable) {
    this.#sink = sink;
    this.#position = position;
    this.#table = table;
  }

  checkWrite(): bigint {
    this.#live();
    return BigInt(WRITE_CAPACITY);
  }

  write(contents: Uint8Array): void {
    const { handle, account } = this.#live();
    try {
      const fd = handle.fd;
      const position = this.#position === "append" ? sizeOf(fd) : this.#position;
      const written = writeAt(fd, account, contents, position);
      if (this.#position !== "append") this.#position += written;
    } catch (error) {
      throw failed(errorCode(error));
    }
  }

  blockingWriteAndFlush(contents: Uint8Array): void {
    this.write(contents);
  }

  flush(): void {
    this.#live();
  }

  blockingFlush(): void {
    this.#live();
  }

  writeZeroes(length: bigint): void {
    let left: number;
    try {
      left = safeNumber(length);
    } catch (error) {
      throw failed(errorCode(error));
    }
    // One write when it fits the capacity (as the caller should have checked), chunks otherwise.
    do {
      const chunk = Math.min(left, WRITE_CAPACITY);
      this.write(new Uint8Array(chunk));
      left -= chunk;
    } while (left > 0);
  }

  blockingWriteZeroesAndFlush(length: bigint): void {
    this.writeZeroes(length);
  }

  splice(source: Readable, length: bigint): bigint {
    this.#live();
    const bytes = source.read(length < BigInt(WRITE_CAPACITY) ? length : BigInt(WRITE_CAPACITY));
    this.write(bytes);
    return BigInt(bytes.length);
  }

  blockingSplice(source: Readable, length: bigint): bigint {
    this.#live();
    const bytes = source.blockingRead(length < BigInt(WRITE_CAPACITY) ? length : BigInt(WRITE_CAPACITY));
    this.write(bytes);
    return BigInt(bytes.length);
  }

  subscribe(): ReadyPollable {
    return new ReadyPollable();
  }

  [Symbol.dispose](): void {
    const sink = this.#sink;
    if (!sink) return;
    this.#sink = undefined;
    sink.handle.release();
    this.#table.leave();
  }

  #live(): FileSink {
    if (this.#table.revoked) throw failed("not-permitted");
    if (!this.#sink) throw failed("bad-descriptor");
    return this.#sink;
  }
}
