// A descriptor's host directory, held open by fd. Every path given to it is resolved by walk.ts
// below this fd, and the operation acts on the last name through its directory's fd: no host path
// is kept, and nothing is checked first and used later by name.
import {
  fstatSync,
  fsyncSync,
  futimesSync,
  linkSync,
  lstatSync,
  lutimesSync,
  mkdirSync,
  readdirSync,
  readlinkSync,
  renameSync,
  rmdirSync,
  symlinkSync,
  unlinkSync,
  type BigIntStats,
} from "node:fs";
import type { FdHandle } from "./file-table.ts";
import { mutable, type Grant } from "./grant.ts";
import { HostFile, sameInode } from "./host-file.ts";
import { openEntry, reopenDirectory } from "./open-entry.ts";
import { itself, lstatOrNothing, under } from "./path.ts";
import { charged, chargedEntry } from "./quota.ts";
import { descriptorStat, descriptorType, metadataHash, utimes } from "./stat.ts";
import { checkOpenFlags, DescriptorTarget, type ListedEntry } from "./target.ts";
import type { DescriptorFlags, DescriptorStat, DescriptorType, MetadataHashValue, NewTimestamp, OpenFlags, PathFlags } from "./types.ts";
import { ENTRY_BYTES, movedUsage, removedUsage } from "./usage.ts";
import { decodeName, readSymlink, Redirect, resolveAt, type Walk } from "./walk.ts";

export class HostDirectory extends DescriptorTarget {
  readonly #handle: FdHandle;
  readonly #grant: Grant;

  /** Takes over `handle`'s reference. */
  constructor(handle: FdHandle, grant: Grant) {
    super();
    this.#handle = handle;
    this.#grant = grant;
  }

  get #fd(): number {
    return this.#handle.fd;
  }

  getType(): DescriptorType {
    return "directory";
  }

  getFlags(): DescriptorFlags {
    return { read: true, mutateDirectory: !this.#grant.readOnly };
  }

  stat(): DescriptorStat {
    return descriptorStat(fstatSync(this.#fd, { bigint: true }));
  }

  metadataHash(): MetadataHashValue {
    return metadataHash(fstatSync(this.#fd, { bigint: true }));
  }

  sameObject(other: DescriptorTarget): boolean {
    return other instanceof HostDirectory && sameInode(this.#fd, other.#fd);
  }

  setTimes(access: NewTimestamp, modification: NewTimestamp): void {
    mutable(this.#grant);
    const [atime, mtime] = utimes(access, modification, () => fstatSync(this.#fd, { bigint: true }));
    futimesSync(this.#fd, atime, mtime);
  }

  sync(): void {
    fsyncSync(this.#fd);
  }

  syncData(): void {
    fsyncSync(this.#fd);
  }

  release(): void {
    this.#handle.release();
  }

  override openAt(pathFlags: PathFlags, path: string, openFlags: OpenFlags, flags: DescriptorFlags): DescriptorTarget {
    checkOpenFlags(this.#grant.readOnly, openFlags, flags);
    const fd = resolveAt(this.#fd, path, (dir, name, walk) => {
      if (name === undefined) {
        // The path names a directory already held (".", "a/.."): a descriptor of its own for it.
        if (openFlags.create && openFlags.exclusive) throw "exist";
        if (flags.write || openFlags.truncate) throw "is-directory";
        return reopenDirectory(dir);
      }
      if (walk.mustBeDirectory && openFlags.create) throw "is-directory";
      const request = {
        read: flags.read === true,
        write: flags.write === true,
        create: openFlags.create === true,
        exclusive: openFlags.exclusive === true,
        truncate: openFlags.truncate === true,
        directory: openFlags.directory === true || walk.mustBeDirectory,
        follow: pathFlags.symlinkFollow === true || walk.mustBeDirectory,
      };
      return openEntry(dir, name, request, this.#grant.account);
    });
    const handle = this.#grant.table.hold(fd);
    try {
      if (fstatSync(fd).isDirectory()) return new HostDirectory(handle, this.#grant);
    } catch (error) {
      handle.release();
      throw error;
    }
    return new HostFile(handle, this.#grant, flags);
  }

  override readDirectory(): ListedEntry[] {
    return readdirSync(itself(this.#fd), { withFileTypes: true, encoding: "buffer" }).map((entry): ListedEntry => {
      try {
        return { name: decodeName(entry.name), type: descriptorType(entry) };
      } catch {
        return { error: "illegal-byte-sequence" };
      }
    });
  }

  override createDirectoryAt(path: string): void {
    mutable(this.#grant);
    resolveAt(this.#fd, path, (dir, name) => {
      if (name === undefined) throw "exist";
      chargedEntry(this.#grant.account, under(dir, name), () => mkdirSync(under(dir, name)));
    });
  }

  override statAt(pathFlags: PathFlags, path: string): DescriptorStat {
    return this.#statAt(pathFlags, path, descriptorStat);
  }

  override metadataHashAt(pathFlags: PathFlags, path: string): MetadataHashValue {
    return this.#statAt(pathFlags, path, metadataHash);
  }

  override setTimesAt(pathFlags: PathFlags, path: string, access: NewTimestamp, modification: NewTimestamp): void {
    mutable(this.#grant);
    this.#statAt(pathFlags, path, (stats, dir, name) => {
      const [atime, mtime] = utimes(access, modification, () => stats);
      // lutimes: were the name swapped for a symlink since the lstat, the link's own times change, nothing it points to.
      if (name === undefined) futimesSync(dir, atime, mtime);
      else lutimesSync(under(dir, name), atime, mtime);
    });
  }

  override linkAt(oldPathFlags: PathFlags, oldPath: string, newDirectory: DescriptorTarget, newPath: string): void {
    const destination = this.#peer(newDirectory);
    // A link in another account would count the file there too: like another filesystem.
    if (destination.#grant.account !== this.#grant.account) throw "cross-device";
    this.#statAt(oldPathFlags, oldPath, (stats, oldDir, oldName) => {
      if (oldName === undefined || stats.isDirectory()) throw "not-permitted";
      resolveAt(destination.#fd, newPath, (newDir, newName) => {
        if (newName === undefined) throw "exist";
        // link(2) does not follow a symlink at the old name: at worst the link's own text is linked.
        chargedEntry(this.#grant.account, under(newDir, newName), () => linkSync(under(oldDir, oldName), under(newDir, newName)));
      });
    });
  }

  override readlinkAt(path: string): string {
    return resolveAt(this.#fd, path, (dir, name) => {
      if (name === undefined) throw "invalid";
      return decodeName(readlinkSync(under(dir, name), { encoding: "buffer" }));
    });
  }

  override removeDirectoryAt(path: string): void {
    mutable(this.#grant);
    resolveAt(this.#fd, path, (dir, name) => {
      if (name === undefined) throw "invalid";
      rmdirSync(under(dir, name));
      this.#grant.account.release(ENTRY_BYTES);
    });
  }

  override renameAt(oldPath: string, newDirectory: DescriptorTarget, newPath: string): void {
    const destination = this.#peer(newDirectory);
    const [from, to] = [this.#grant.account, destination.#grant.account];
    resolveAt(this.#fd, oldPath, (oldDir, oldName, oldWalk) => {
      if (oldName === undefined) throw "busy";
      resolveAt(destination.#fd, newPath, (newDir, newName, newWalk) => {
        if (newName === undefined) throw "busy";
        const source = lstatSync(under(oldDir, oldName), { bigint: true });
        if ((oldWalk.mustBeDirectory || newWalk.mustBeDirectory) && !source.isDirectory()) throw "not-directory";
        const replaced = lstatOrNothing(under(newDir, newName));
        // rename(2) of two links to one file changes nothing.
        if (replaced && replaced.dev === source.dev && replaced.ino === source.ino) return;
        if (from === to) {
          renameSync(under(oldDir, oldName), under(newDir, newName));
        } else {
          // Between accounts a file's usage moves with it; a directory's would need measuring: like another filesystem.
          if (source.isDirectory()) throw "cross-device";
          charged(to, movedUsage(source), () => renameSync(under(oldDir, oldName), under(newDir, newName)));
          from.release(removedUsage(source));
        }
        if (replaced) to.release(removedUsage(replaced));
      });
    });
  }

  override symlinkAt(target: string, path: string): void {
    mutable(this.#grant);
    // Any text may be a link's target: nothing here ever follows one out of the tree.
    if (typeof target !== "string" || target.includes("\0") || !target.isWellFormed()) throw "invalid";
    if (target === "") throw "no-entry";
    resolveAt(this.#fd, path, (dir, name, walk) => {
      if (name === undefined) throw "exist";
      if (walk.mustBeDirectory) throw lstatOrNothing(under(dir, name)) ? "exist" : "not-directory";
      chargedEntry(this.#grant.account, under(dir, name), () => symlinkSync(target, under(dir, name)));
    });
  }

  override unlinkFileAt(path: string): void {
    mutable(this.#grant);
    resolveAt(this.#fd, path, (dir, name, walk) => {
      if (name === undefined) throw "is-directory";
      const stats = lstatSync(under(dir, name), { bigint: true });
      if (stats.isDirectory()) throw "is-directory";
      if (walk.mustBeDirectory) throw "not-directory";
      unlinkSync(under(dir, name));
      this.#grant.account.release(removedUsage(stats));
    });
  }

  /** lstat of the last name (fstat of `dir` when the path names it), following a last symlink when asked. */
  #statAt<T>(pathFlags: PathFlags, path: string, use: (stats: BigIntStats, dir: number, name: string | undefined) => T): T {
    return resolveAt(this.#fd, path, (dir, name, walk: Walk) => {
      const stats = name === undefined ? fstatSync(dir, { bigint: true }) : lstatSync(under(dir, name), { bigint: true });
      if (name !== undefined && stats.isSymbolicLink() && (pathFlags.symlinkFollow === true || walk.mustBeDirectory))
        return new Redirect(readSymlink(dir, name));
      if (walk.mustBeDirectory && !stats.isDirectory()) throw "not-directory";
      return use(stats, dir, name);
    });
  }

  /** The other directory of a two-path operation, both writable. */
  #peer(other: DescriptorTarget): HostDirectory {
    mutable(this.#grant);
    if (other instanceof HostDirectory) {
      mutable(other.#grant);
      return other;
    }
    // A secret directory is read-only; a file is no directory.
    throw other.getType() === "directory" ? "read-only" : "not-directory";
  }
}
