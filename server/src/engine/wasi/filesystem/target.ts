// What a guest's descriptor stands for: a host directory or file, or a secret (in memory). The
// guest-facing Descriptor (descriptor.ts) checks the invocation and converts errors; a target does
// the work. The defaults here are the refusals: a file operation on a directory, or a directory
// operation on a file, as wasmtime answers them.
import type { FileTable } from "./file-table.ts";
import type { FileInputStream, FileOutputStream } from "./streams.ts";
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

/** A directory entry as listed, or the error its name gave (names that are not UTF-8). */
export type ListedEntry = DirectoryEntry | { error: "illegal-byte-sequence" };

export abstract class DescriptorTarget {
  abstract getType(): DescriptorType;
  abstract getFlags(): DescriptorFlags;
  abstract stat(): DescriptorStat;
  abstract metadataHash(): MetadataHashValue;
  abstract setTimes(access: NewTimestamp, modification: NewTimestamp): void;
  abstract sync(): void;
  abstract syncData(): void;
  /** Whether `other` is the same filesystem object (not merely the same descriptor). */
  abstract sameObject(other: DescriptorTarget): boolean;
  /** The descriptor is dropped: let go of the fd (or nothing). */
  abstract release(): void;

  // File operations, as a directory answers them.
  read(_length: bigint, _offset: bigint): [Uint8Array, boolean] {
    throw "bad-descriptor";
  }
  write(_buffer: Uint8Array, _offset: bigint): bigint {
    throw "bad-descriptor";
  }
  advise(_offset: bigint, _length: bigint, _advice: Advice): void {
    throw "bad-descriptor";
  }
  setSize(_size: bigint): void {
    throw "is-directory";
  }
  /** A stream admitted to `table` by the caller. */
  readViaStream(_offset: bigint, _table: FileTable): FileInputStream {
    throw "is-directory";
  }
  writeViaStream(_offset: bigint, _table: FileTable): FileOutputStream {
    throw "is-directory";
  }
  appendViaStream(_table: FileTable): FileOutputStream {
    throw "is-directory";
  }

  // Directory operations, as a file answers them.
  openAt(_pathFlags: PathFlags, _path: string, _openFlags: OpenFlags, _flags: DescriptorFlags): DescriptorTarget {
    throw "not-directory";
  }
  readDirectory(): ListedEntry[] {
    throw "not-directory";
  }
  createDirectoryAt(_path: string): void {
    throw "not-directory";
  }
  statAt(_pathFlags: PathFlags, _path: string): DescriptorStat {
    throw "not-directory";
  }
  setTimesAt(_pathFlags: PathFlags, _path: string, _access: NewTimestamp, _modification: NewTimestamp): void {
    throw "not-directory";
  }
  linkAt(_oldPathFlags: PathFlags, _oldPath: string, _newDirectory: DescriptorTarget, _newPath: string): void {
    throw "not-directory";
  }
  readlinkAt(_path: string): string {
    throw "not-directory";
  }
  removeDirectoryAt(_path: string): void {
    throw "not-directory";
  }
  renameAt(_oldPath: string, _newDirectory: DescriptorTarget, _newPath: string): void {
    throw "not-directory";
  }
  symlinkAt(_target: string, _path: string): void {
    throw "not-directory";
  }
  unlinkFileAt(_path: string): void {
    throw "not-directory";
  }
  metadataHashAt(_pathFlags: PathFlags, _path: string): MetadataHashValue {
    throw "not-directory";
  }
}

/**
 * Open flags a preopen's mode refuses before anything is resolved (as the read-only wrapper did):
 * on a read-only one, anything that could write is `read-only`. The sync flags are `unsupported`
 * (as in preview2-shim and wasmtime); create with directory is `invalid`.
 */
export function checkOpenFlags(readOnly: boolean, openFlags: OpenFlags, flags: DescriptorFlags): void {
  if (readOnly && (openFlags.create || openFlags.truncate || openFlags.exclusive || flags.write || flags.mutateDirectory)) throw "read-only";
  if (flags.requestedWriteSync || flags.fileIntegritySync || flags.dataIntegritySync) throw "unsupported";
  if (openFlags.create && openFlags.directory) throw "invalid";
}
