// Granted secrets as a read-only directory that exists only in memory: one flat directory of
// files, one per secret. Nothing of it is on disk where a guest could reach it, and nothing in it
// changes: every write or change is `read-only`.
import type { FileTable } from "./file-table.ts";
import { readLength, safeNumber } from "./file-io.ts";
import { parsePath } from "./path.ts";
import { datetime } from "./stat.ts";
import { FileInputStream } from "./streams.ts";
import { checkOpenFlags, DescriptorTarget, type ListedEntry } from "./target.ts";
import type { DescriptorFlags, DescriptorStat, DescriptorType, MetadataHashValue, OpenFlags, PathFlags } from "./types.ts";

/** One secret's value, and when the directory was made (every timestamp of it). */
interface Secret {
  bytes: Uint8Array;
  id: bigint;
  madeNs: bigint;
}

export class SecretDirectory extends DescriptorTarget {
  readonly #secrets: ReadonlyMap<string, Secret>;
  readonly #madeNs: bigint;

  constructor(secrets: ReadonlyMap<string, Secret>, madeNs: bigint) {
    super();
    this.#secrets = secrets;
    this.#madeNs = madeNs;
  }

  /** The directory of `values` (name to value), made now. */
  static of(values: ReadonlyMap<string, string>): SecretDirectory {
    const madeNs = BigInt(Date.now()) * 1_000_000n;
    const encoder = new TextEncoder();
    return new SecretDirectory(
      new Map([...values].map(([name, value], index) => [name, { bytes: encoder.encode(value), id: BigInt(index + 1), madeNs }])),
      madeNs,
    );
  }

  getType(): DescriptorType {
    return "directory";
  }
  getFlags(): DescriptorFlags {
    return { read: true };
  }
  stat(): DescriptorStat {
    return memoryStat("directory", 0, this.#madeNs);
  }
  metadataHash(): MetadataHashValue {
    return { upper: this.#madeNs, lower: 0n };
  }
  sameObject(other: DescriptorTarget): boolean {
    return other instanceof SecretDirectory && other.#secrets === this.#secrets;
  }
  setTimes(): void {
    throw "read-only";
  }
  sync(): void {}
  syncData(): void {}
  release(): void {}

  override openAt(_pathFlags: PathFlags, path: string, openFlags: OpenFlags, flags: DescriptorFlags): DescriptorTarget {
    checkOpenFlags(true, openFlags, flags);
    const secret = this.#find(path);
    if (secret === undefined) return new SecretDirectory(this.#secrets, this.#madeNs);
    if (openFlags.directory) throw "not-directory";
    return new SecretFile(secret);
  }
  override readDirectory(): ListedEntry[] {
    return [...this.#secrets.keys()].map((name) => ({ name, type: "regular-file" }));
  }
  override statAt(_pathFlags: PathFlags, path: string): DescriptorStat {
    const secret = this.#find(path);
    return secret ? memoryStat("regular-file", secret.bytes.length, secret.madeNs) : this.stat();
  }
  override metadataHashAt(_pathFlags: PathFlags, path: string): MetadataHashValue {
    const secret = this.#find(path);
    return secret ? { upper: secret.madeNs, lower: secret.id } : this.metadataHash();
  }
  override readlinkAt(path: string): string {
    this.#find(path);
    throw "invalid";
  }
  override createDirectoryAt(): void {
    throw "read-only";
  }
  override setTimesAt(): void {
    throw "read-only";
  }
  override linkAt(): void {
    throw "read-only";
  }
  override removeDirectoryAt(): void {
    throw "read-only";
  }
  override renameAt(): void {
    throw "read-only";
  }
  override symlinkAt(): void {
    throw "read-only";
  }
  override unlinkFileAt(): void {
    throw "read-only";
  }

  /**
   * The secret `path` names, or undefined when it names the directory itself. Resolved like any
   * path (`..` above the directory is `not-permitted`), but there is only one level.
   */
  #find(path: string): Secret | undefined {
    const { names, directory } = parsePath(path);
    let found: Secret | undefined;
    for (const name of names) {
      if (found) throw "not-directory";
      if (name === "..") throw "not-permitted";
      found = this.#secrets.get(name);
      if (!found) throw "no-entry";
    }
    if (found && directory) throw "not-directory";
    return found;
  }
}

class SecretFile extends DescriptorTarget {
  readonly #secret: Secret;

  constructor(secret: Secret) {
    super();
    this.#secret = secret;
  }

  getType(): DescriptorType {
    return "regular-file";
  }
  getFlags(): DescriptorFlags {
    return { read: true, write: false };
  }
  stat(): DescriptorStat {
    return memoryStat("regular-file", this.#secret.bytes.length, this.#secret.madeNs);
  }
  metadataHash(): MetadataHashValue {
    return { upper: this.#secret.madeNs, lower: this.#secret.id };
  }
  sameObject(other: DescriptorTarget): boolean {
    return other instanceof SecretFile && other.#secret === this.#secret;
  }
  setTimes(): void {
    throw "read-only";
  }
  sync(): void {}
  syncData(): void {}
  release(): void {}

  override read(length: bigint, offset: bigint): [Uint8Array, boolean] {
    const bytes = slice(this.#secret.bytes, readLength(length), safeNumber(offset));
    return [bytes, bytes.length === 0];
  }
  override write(): bigint {
    throw "read-only";
  }
  override advise(): void {}
  override setSize(): void {
    throw "read-only";
  }
  override readViaStream(offset: bigint, table: FileTable): FileInputStream {
    const bytes = this.#secret.bytes;
    return new FileInputStream({ readAt: (length, position) => slice(bytes, length, position), release: () => undefined }, safeNumber(offset), table);
  }
  override writeViaStream(): never {
    throw "read-only";
  }
  override appendViaStream(): never {
    throw "read-only";
  }
}

function slice(bytes: Uint8Array, length: number, position: number): Uint8Array {
  return bytes.slice(Math.min(position, bytes.length), Math.min(position + length, bytes.length));
}

function memoryStat(type: DescriptorType, size: number, madeNs: bigint): DescriptorStat {
  const time = datetime(madeNs);
  return { type, linkCount: 1n, size: BigInt(size), dataAccessTimestamp: time, dataModificationTimestamp: time, statusChangeTimestamp: time };
}
