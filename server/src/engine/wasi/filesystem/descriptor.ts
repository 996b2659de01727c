// The guest's wasi:filesystem/types resources. jco's glue calls these methods directly and checks
// what they return with `instanceof` against these classes.
//
// Invariants:
// - Everything a guest can be thrown is a WASI error-code string (or, from streams, a stream
//   error): host errors are converted here, so no message, and no host path in one, gets out.
// - Nothing works once the invocation's filesystem is revoked (`not-permitted`), or on a
//   descriptor the guest dropped (`bad-descriptor`).
// - A descriptor never hands out what its target refuses: the preopen's mode and account travel
//   with every target opened through it.
import { errorCode } from "./error-code.ts";
import type { FileTable } from "./file-table.ts";
import type { FileInputStream, FileOutputStream } from "./streams.ts";
import type { DescriptorTarget, ListedEntry } from "./target.ts";
import type {
  Advice,
  DescriptorFlags,
  DescriptorStat,
  DescriptorType,
  DirectoryEntry,
  MetadataHashValue,
  NewTimestamp,
  OpenFlags,
  PathFlags,
} from "./types.ts";

export class Descriptor {
  readonly #target: DescriptorTarget;
  readonly #table: FileTable;
  /** A preopen is not counted against the open-file limit and lives until the filesystem is revoked. */
  readonly #preopen: boolean;
  #dropped = false;

  /** Not for guests (the WIT gives the resource no constructor): made by GuestFilesystem and openAt. */
  constructor(target: DescriptorTarget, table: FileTable, preopen: boolean) {
    this.#target = target;
    this.#table = table;
    this.#preopen = preopen;
  }

  readViaStream(offset: bigint): FileInputStream {
    return this.#use((target) => this.#table.admitted(() => target.readViaStream(offset, this.#table)));
  }
  writeViaStream(offset: bigint): FileOutputStream {
    return this.#use((target) => this.#table.admitted(() => target.writeViaStream(offset, this.#table)));
  }
  appendViaStream(): FileOutputStream {
    return this.#use((target) => this.#table.admitted(() => target.appendViaStream(this.#table)));
  }
  advise(offset: bigint, length: bigint, advice: Advice): void {
    this.#use((target) => target.advise(offset, length, advice));
  }
  syncData(): void {
    this.#use((target) => target.syncData());
  }
  getFlags(): DescriptorFlags {
    return this.#use((target) => target.getFlags());
  }
  getType(): DescriptorType {
    return this.#use((target) => target.getType());
  }
  setSize(size: bigint): void {
    this.#use((target) => target.setSize(size));
  }
  setTimes(access: NewTimestamp, modification: NewTimestamp): void {
    this.#use((target) => target.setTimes(access, modification));
  }
  read(length: bigint, offset: bigint): [Uint8Array, boolean] {
    return this.#use((target) => target.read(length, offset));
  }
  write(buffer: Uint8Array, offset: bigint): bigint {
    return this.#use((target) => target.write(buffer, offset));
  }
  readDirectory(): DirectoryEntryStream {
    return this.#use((target) => this.#table.admitted(() => new DirectoryEntryStream(target.readDirectory(), this.#table)));
  }
  sync(): void {
    this.#use((target) => target.sync());
  }
  createDirectoryAt(path: string): void {
    this.#use((target) => target.createDirectoryAt(path));
  }
  stat(): DescriptorStat {
    return this.#use((target) => target.stat());
  }
  statAt(pathFlags: PathFlags, path: string): DescriptorStat {
    return this.#use((target) => target.statAt(pathFlags ?? {}, path));
  }
  setTimesAt(pathFlags: PathFlags, path: string, access: NewTimestamp, modification: NewTimestamp): void {
    this.#use((target) => target.setTimesAt(pathFlags ?? {}, path, access, modification));
  }
  linkAt(oldPathFlags: PathFlags, oldPath: string, newDescriptor: Descriptor, newPath: string): void {
    this.#use((target) => target.linkAt(oldPathFlags ?? {}, oldPath, this.#other(newDescriptor), newPath));
  }
  openAt(pathFlags: PathFlags, path: string, openFlags: OpenFlags, flags: DescriptorFlags): Descriptor {
    return this.#use((target) =>
      this.#table.admitted(() => new Descriptor(target.openAt(pathFlags ?? {}, path, openFlags ?? {}, flags ?? {}), this.#table, false)),
    );
  }
  readlinkAt(path: string): string {
    return this.#use((target) => target.readlinkAt(path));
  }
  removeDirectoryAt(path: string): void {
    this.#use((target) => target.removeDirectoryAt(path));
  }
  renameAt(oldPath: string, newDescriptor: Descriptor, newPath: string): void {
    this.#use((target) => target.renameAt(oldPath, this.#other(newDescriptor), newPath));
  }
  symlinkAt(oldPath: string, newPath: string): void {
    this.#use((target) => target.symlinkAt(oldPath, newPath));
  }
  unlinkFileAt(path: string): void {
    this.#use((target) => target.unlinkFileAt(path));
  }
  /** Same file or directory (not merely the same descriptor), as wasmtime answers it. */
  isSameObject(other: Descriptor): boolean {
    try {
      return this.#use((target) => target.sameObject(this.#other(other)));
    } catch {
      return false;
    }
  }
  metadataHash(): MetadataHashValue {
    return this.#use((target) => target.metadataHash());
  }
  metadataHashAt(pathFlags: PathFlags, path: string): MetadataHashValue {
    return this.#use((target) => target.metadataHashAt(pathFlags ?? {}, path));
  }

  /** The guest dropped its handle. A preopen stays: get-directories hands the same one out again. */
  [Symbol.dispose](): void {
    if (this.#preopen || this.#dropped) return;
    this.#dropped = true;
    this.#target.release();
    this.#table.leave();
  }

  #use<T>(operation: (target: DescriptorTarget) => T): T {
    if (this.#table.revoked) throw "not-permitted";
    if (this.#dropped) throw "bad-descriptor";
    try {
      return operation(this.#target);
    } catch (error) {
      throw errorCode(error);
    }
  }

  /** The target of another descriptor of this same filesystem. */
  #other(other: unknown): DescriptorTarget {
    if (!(other instanceof Descriptor) || other.#table !== this.#table || other.#dropped) throw "bad-descriptor";
    return other.#target;
  }
}

/** A listing taken when read-directory was called (as wasmtime does): it holds no fd. */
export class DirectoryEntryStream {
  readonly #entries: ListedEntry[];
  readonly #table: FileTable;
  #next = 0;
  #dropped = false;

  /** An admitted object of `table`. */
  constructor(entries: ListedEntry[], table: FileTable) {
    this.#entries = entries;
    this.#table = table;
  }

  readDirectoryEntry(): DirectoryEntry | undefined {
    if (this.#table.revoked) throw "not-permitted";
    if (this.#dropped) throw "bad-descriptor";
    const entry = this.#entries[this.#next];
    if (entry === undefined) return undefined;
    this.#next++;
    if ("error" in entry) throw entry.error;
    return entry;
  }

  [Symbol.dispose](): void {
    if (this.#dropped) return;
    this.#dropped = true;
    this.#table.leave();
  }
}
