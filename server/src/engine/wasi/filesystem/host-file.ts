// A descriptor's host file (or other non-directory) held open by fd: every operation works on the
// fd, never on a path.
import { fdatasyncSync, fstatSync, futimesSync, fsyncSync } from "node:fs";
import { errnoOf } from "./error-code.ts";
import { readAt, readLength, resize, safeNumber, writeAt } from "./file-io.ts";
import type { FdHandle, FileTable } from "./file-table.ts";
import { mutable, type Grant } from "./grant.ts";
import { descriptorStat, descriptorType, metadataHash, utimes } from "./stat.ts";
import { FileInputStream, FileOutputStream } from "./streams.ts";
import { DescriptorTarget } from "./target.ts";
import type { Advice, DescriptorFlags, DescriptorStat, DescriptorType, MetadataHashValue, NewTimestamp } from "./types.ts";

const ADVICE: ReadonlySet<string> = new Set(["normal", "sequential", "random", "will-need", "dont-need", "no-reuse"]);

export class HostFile extends DescriptorTarget {
  readonly #handle: FdHandle;
  readonly #grant: Grant;
  readonly #readable: boolean;
  readonly #writable: boolean;

  /** Takes over `handle`'s reference. `flags`: what it was opened for. */
  constructor(handle: FdHandle, grant: Grant, flags: DescriptorFlags) {
    super();
    this.#handle = handle;
    this.#grant = grant;
    this.#readable = flags.read === true;
    this.#writable = flags.write === true && !grant.readOnly;
  }

  get #fd(): number {
    return this.#handle.fd;
  }

  getType(): DescriptorType {
    return descriptorType(fstatSync(this.#fd));
  }

  getFlags(): DescriptorFlags {
    return { read: this.#readable, write: this.#writable };
  }

  stat(): DescriptorStat {
    return descriptorStat(fstatSync(this.#fd, { bigint: true }));
  }

  metadataHash(): MetadataHashValue {
    return metadataHash(fstatSync(this.#fd, { bigint: true }));
  }

  sameObject(other: DescriptorTarget): boolean {
    return other instanceof HostFile && sameInode(this.#fd, other.#fd);
  }

  setTimes(access: NewTimestamp, modification: NewTimestamp): void {
    mutable(this.#grant);
    const [atime, mtime] = utimes(access, modification, () => fstatSync(this.#fd, { bigint: true }));
    futimesSync(this.#fd, atime, mtime);
  }

  sync(): void {
    ignorePermission(() => fsyncSync(this.#fd));
  }

  syncData(): void {
    ignorePermission(() => fdatasyncSync(this.#fd));
  }

  release(): void {
    this.#handle.release();
  }

  override read(length: bigint, offset: bigint): [Uint8Array, boolean] {
    const bytes = readAt(this.#fd, readLength(length), safeNumber(offset));
    return [bytes, bytes.length === 0];
  }

  override write(buffer: Uint8Array, offset: bigint): bigint {
    mutable(this.#grant);
    return BigInt(writeAt(this.#fd, this.#grant.account, buffer, safeNumber(offset)));
  }

  /** Advice is only advice (Node has no posix_fadvise): checked, then nothing. */
  override advise(offset: bigint, length: bigint, advice: Advice): void {
    safeNumber(offset);
    safeNumber(length);
    if (!ADVICE.has(advice)) throw "invalid";
  }

  override setSize(size: bigint): void {
    mutable(this.#grant);
    resize(this.#fd, this.#grant.account, safeNumber(size));
  }

  override readViaStream(offset: bigint, table: FileTable): FileInputStream {
    const position = safeNumber(offset);
    const handle = this.#handle.retain();
    const source = { readAt: (length: number, at: number) => readAt(handle.fd, length, at), release: () => handle.release() };
    return new FileInputStream(source, position, table);
  }

  override writeViaStream(offset: bigint, table: FileTable): FileOutputStream {
    return this.#outputStream(safeNumber(offset), table);
  }

  override appendViaStream(table: FileTable): FileOutputStream {
    return this.#outputStream("append", table);
  }

  /** As wasmtime: a file not opened for writing gives no output stream (`bad-descriptor`). */
  #outputStream(position: number | "append", table: FileTable): FileOutputStream {
    mutable(this.#grant);
    if (!this.#writable) throw "bad-descriptor";
    return new FileOutputStream({ handle: this.#handle.retain(), account: this.#grant.account }, position, table);
  }
}

export function sameInode(a: number, b: number): boolean {
  const [first, second] = [fstatSync(a, { bigint: true }), fstatSync(b, { bigint: true })];
  return first.dev === second.dev && first.ino === second.ino;
}

/** Syncing what the OS will not sync (EPERM, EINVAL on some file types) is not an error, as in preview2-shim. */
function ignorePermission(sync: () => void): void {
  try {
    sync();
  } catch (error) {
    const errno = errnoOf(error);
    if (errno !== "EPERM" && errno !== "EINVAL") throw error;
  }
}
