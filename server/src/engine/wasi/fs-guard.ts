// The guest's wasi:filesystem/types Descriptor: a wrapper around preview2-shim's Node descriptor
// (which resolves every path inside its preopen and refuses `..`, absolute paths and escaping
// symlinks) that adds read-only preopens. Every descriptor a guest holds is one of these, so the
// mode of a preopen follows every descriptor opened through it.
import * as shimFilesystem from "@bytecodealliance/preview2-shim/filesystem";

/* eslint-disable @typescript-eslint/no-explicit-any */
type Args = any[];
interface ShimDescriptor {
  [method: string]: (...args: Args) => any;
}

interface ShimFilesystemModule {
  _createPreopenDescriptor(hostPath: string): ShimDescriptor;
  types: {
    Descriptor: unknown;
    DirectoryEntryStream: unknown;
    filesystemErrorCode(error: unknown): unknown;
  };
}

// Typed from the package's browser build; on Node the module exports the host-path helpers.
const shim = shimFilesystem as unknown as ShimFilesystemModule;

interface DescriptorFlags {
  read?: boolean;
  write?: boolean;
  fileIntegritySync?: boolean;
  dataIntegritySync?: boolean;
  requestedWriteSync?: boolean;
  mutateDirectory?: boolean;
}

interface OpenFlags {
  create?: boolean;
  directory?: boolean;
  exclusive?: boolean;
  truncate?: boolean;
}

/** wasi:filesystem error-code for a write through a read-only preopen. */
const READ_ONLY = "read-only";

/** Shared by every descriptor of one invocation; revoked when the invocation has its receipt. */
export interface Grant {
  revoked: boolean;
}

export class Descriptor {
  readonly #innerDescriptor: ShimDescriptor;
  readonly #readOnly: boolean;
  readonly #preopen: boolean;
  readonly #grant: Grant;

  /** Not for guests: the constructor is only reachable through `preopen`. */
  private constructor(inner: ShimDescriptor, readOnly: boolean, preopen: boolean, grant: Grant) {
    this.#innerDescriptor = inner;
    this.#readOnly = readOnly;
    this.#preopen = preopen;
    this.#grant = grant;
  }

  /** A preopened directory mapping a guest path to `hostPath`, usable until `grant` is revoked. */
  static preopen(hostPath: string, readOnly: boolean, grant: Grant): Descriptor {
    return new Descriptor(shim._createPreopenDescriptor(hostPath), readOnly, true, grant);
  }

  /** The shim's descriptor, once the grant is checked: nothing works after the receipt. */
  get #inner(): ShimDescriptor {
    if (this.#grant.revoked) throw "not-permitted";
    return this.#innerDescriptor;
  }

  #deny(): void {
    if (this.#readOnly) throw READ_ONLY;
  }

  #child(inner: ShimDescriptor): Descriptor {
    return new Descriptor(inner, this.#readOnly, false, this.#grant);
  }

  static #unwrap(other: unknown): Descriptor {
    if (!(other instanceof Descriptor)) throw "bad-descriptor";
    return other;
  }

  readViaStream(offset: bigint) {
    return this.#inner.readViaStream!(offset);
  }
  writeViaStream(offset: bigint) {
    this.#deny();
    return this.#inner.writeViaStream!(offset);
  }
  appendViaStream() {
    this.#deny();
    return this.#inner.appendViaStream!();
  }
  advise(offset: bigint, length: bigint, advice: unknown) {
    return this.#inner.advise!(offset, length, advice);
  }
  syncData() {
    return this.#inner.syncData!();
  }
  getFlags(): DescriptorFlags {
    // The shim keeps no flags for a preopen; a directory preopen is read (+ mutate unless read-only).
    const flags: DescriptorFlags = this.#preopen ? { read: true, mutateDirectory: true } : { ...(this.#inner.getFlags!() as DescriptorFlags) };
    if (this.#readOnly) {
      flags.write = false;
      flags.mutateDirectory = false;
    }
    return flags;
  }
  getType() {
    return this.#inner.getType!();
  }
  setSize(size: bigint) {
    this.#deny();
    return this.#inner.setSize!(size);
  }
  setTimes(access: unknown, modification: unknown) {
    this.#deny();
    return this.#inner.setTimes!(access, modification);
  }
  read(length: bigint, offset: bigint) {
    return this.#inner.read!(length, offset);
  }
  write(buffer: Uint8Array, offset: bigint) {
    this.#deny();
    return this.#inner.write!(buffer, offset);
  }
  readDirectory() {
    return this.#inner.readDirectory!();
  }
  sync() {
    return this.#inner.sync!();
  }
  createDirectoryAt(path: string) {
    this.#deny();
    return this.#inner.createDirectoryAt!(path);
  }
  stat() {
    return this.#inner.stat!();
  }
  statAt(pathFlags: unknown, path: string) {
    return this.#inner.statAt!(pathFlags, path);
  }
  setTimesAt(pathFlags: unknown, path: string, access: unknown, modification: unknown) {
    this.#deny();
    return this.#inner.setTimesAt!(pathFlags, path, access, modification);
  }
  linkAt(oldPathFlags: unknown, oldPath: string, newDescriptor: unknown, newPath: string) {
    const target = Descriptor.#unwrap(newDescriptor);
    this.#deny();
    target.#deny();
    return this.#inner.linkAt!(oldPathFlags, oldPath, target.#inner, newPath);
  }
  openAt(pathFlags: unknown, path: string, openFlags: OpenFlags, descriptorFlags: DescriptorFlags) {
    if (this.#readOnly && (openFlags.create || openFlags.truncate || openFlags.exclusive || descriptorFlags.write || descriptorFlags.mutateDirectory)) {
      throw READ_ONLY;
    }
    return this.#child(this.#inner.openAt!(pathFlags, path, openFlags, descriptorFlags));
  }
  readlinkAt(path: string) {
    return this.#inner.readlinkAt!(path);
  }
  removeDirectoryAt(path: string) {
    this.#deny();
    return this.#inner.removeDirectoryAt!(path);
  }
  renameAt(oldPath: string, newDescriptor: unknown, newPath: string) {
    const target = Descriptor.#unwrap(newDescriptor);
    this.#deny();
    target.#deny();
    return this.#inner.renameAt!(oldPath, target.#inner, newPath);
  }
  symlinkAt(oldPath: string, newPath: string) {
    this.#deny();
    return this.#inner.symlinkAt!(oldPath, newPath);
  }
  unlinkFileAt(path: string) {
    this.#deny();
    return this.#inner.unlinkFileAt!(path);
  }
  isSameObject(other: unknown) {
    return other instanceof Descriptor && (other === this || other.#innerDescriptor === this.#innerDescriptor);
  }
  metadataHash() {
    return this.#inner.metadataHash!();
  }
  metadataHashAt(pathFlags: unknown, path: string) {
    return this.#inner.metadataHashAt!(pathFlags, path);
  }
  [Symbol.dispose]() {
    this.#innerDescriptor[Symbol.dispose as unknown as string]?.();
  }
}

/** The `wasi:filesystem/types` namespace every guest gets. */
export const filesystemTypes = {
  Descriptor,
  DirectoryEntryStream: shim.types.DirectoryEntryStream,
  filesystemErrorCode: (error: unknown) => shim.types.filesystemErrorCode(error),
};
