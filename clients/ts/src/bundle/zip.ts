import { crc32 } from "./crc32.ts";
import { BundleFormatError } from "./errors.ts";
import type { BundleLimits } from "./limits.ts";
import { assertBundlePath, assertUniquePaths, compareBytes, MAX_PATH_BYTES } from "./paths.ts";

/**
 * The fixed field values of a canonical bundle (docs/bundle-format.md). Every value that a
 * zip writer would normally take from the environment (clock, umask, OS, compressor) is pinned,
 * so the archive is a pure function of its paths and contents.
 */
const CANONICAL_ZIP = {
  versionMadeBy: 0x0314, // Unix (3), spec version 2.0 (20)
  versionNeeded: 20, // 2.0: plain files, no zip64
  flags: 0x0800, // bit 11: file names are UTF-8
  method: 0, // STORED
  dosTime: 0x0000, // 00:00:00
  dosDate: 0x0021, // 1980-01-01, the earliest DOS date
  externalAttributes: (0o100644 << 16) >>> 0, // regular file, rw-r--r--
} as const;

const LOCAL_HEADER_SIGNATURE = 0x04034b50;
const CENTRAL_HEADER_SIGNATURE = 0x02014b50;
const END_OF_CENTRAL_DIRECTORY_SIGNATURE = 0x06054b50;
const LOCAL_HEADER_BYTES = 30;
const CENTRAL_HEADER_BYTES = 46;
const END_OF_CENTRAL_DIRECTORY_BYTES = 22;

/** 0xFFFF and 0xFFFFFFFF are zip64 markers, so a zip64-free archive stays strictly below them. */
const MAX_CANONICAL_ENTRIES = 0xfffe;
const MAX_CANONICAL_ARCHIVE_BYTES = 0xfffffffe;

/** What a canonical archive records of one file besides its bytes. */
export interface CanonicalEntry {
  /** The path's UTF-8 bytes. */
  readonly name: Uint8Array;
  readonly size: number;
  readonly crc: number;
}

/** Header bytes of a canonical archive and where they start. */
export interface HeaderRun {
  readonly offset: number;
  readonly bytes: Uint8Array;
}

/**
 * A canonical archive without its file bytes: each entry's local header, which its data follows
 * directly, then the trailer (central directory and end record). Comparing these runs and the
 * size with an archive whose stored entries were read from those places is comparing the whole
 * archive, so a reader need not hold the files to check that an archive is canonical.
 */
export interface CanonicalLayout<E extends CanonicalEntry> {
  /** In canonical order. */
  readonly localHeaders: readonly (HeaderRun & { readonly entry: E })[];
  readonly trailer: HeaderRun;
  readonly size: number;
}

interface DataEntry extends CanonicalEntry {
  readonly data: Uint8Array;
}

const encoder = new TextEncoder();

/**
 * Writes the canonical archive of `files` (path -> contents). Paths are validated and sorted by
 * their UTF-8 bytes; SKILL.md is not required here, the format is independent of the skill rules.
 */
export function canonicalZip(files: ReadonlyMap<string, Uint8Array>): Uint8Array {
  const layout = canonicalLayout(prepareEntries(files));
  const zip = new Uint8Array(layout.size);
  for (const { offset, bytes, entry } of layout.localHeaders) {
    zip.set(bytes, offset);
    zip.set(entry.data, offset + bytes.length);
  }
  zip.set(layout.trailer.bytes, layout.trailer.offset);
  return zip;
}

function prepareEntries(files: ReadonlyMap<string, Uint8Array>): DataEntry[] {
  if (files.size > MAX_CANONICAL_ENTRIES) {
    throw new BundleFormatError("bundle_too_many_entries", `${files.size} files; a bundle holds at most ${MAX_CANONICAL_ENTRIES}`);
  }
  for (const path of files.keys()) assertBundlePath(path);
  assertUniquePaths(files.keys());
  return Array.from(files, ([path, data]) => ({ name: encoder.encode(path), size: data.length, crc: crc32(data), data }));
}

/** Lays out entries with valid, distinct paths in canonical order; the size is checked before any header is built. */
export function canonicalLayout<E extends CanonicalEntry>(unsorted: readonly E[]): CanonicalLayout<E> {
  const entries = [...unsorted].sort((a, b) => compareBytes(a.name, b.name));
  checkArchiveSize(entries);
  let offset = 0;
  const localHeaders = entries.map((entry) => {
    const run = { entry, offset, bytes: localHeader(entry) };
    offset += run.bytes.length + entry.size;
    return run;
  });
  const trailer = { offset, bytes: trailerBytes(localHeaders, offset) };
  return { localHeaders, trailer, size: offset + trailer.bytes.length };
}

/**
 * The largest canonical archive within `limits`: all the content they allow, every entry at the
 * longest path. A stored bundle larger than this is refused before a byte of it is read.
 */
export function maxCanonicalArchiveBytes(limits: BundleLimits): number {
  const perEntry = LOCAL_HEADER_BYTES + CENTRAL_HEADER_BYTES + 2 * MAX_PATH_BYTES;
  return limits.maxTotalBytes + limits.maxEntries * perEntry + END_OF_CENTRAL_DIRECTORY_BYTES;
}

function checkArchiveSize(entries: readonly CanonicalEntry[]): void {
  let size = END_OF_CENTRAL_DIRECTORY_BYTES;
  for (const { name, size: dataSize } of entries) size += LOCAL_HEADER_BYTES + CENTRAL_HEADER_BYTES + 2 * name.length + dataSize;
  if (size > MAX_CANONICAL_ARCHIVE_BYTES) {
    throw new BundleFormatError("bundle_too_large", `the archive would be ${size} bytes; zip64 is not used, so the limit is ${MAX_CANONICAL_ARCHIVE_BYTES}`);
  }
}

function localHeader(entry: CanonicalEntry): Uint8Array {
  const writer = new ByteWriter(LOCAL_HEADER_BYTES + entry.name.length);
  writer.u32(LOCAL_HEADER_SIGNATURE);
  writer.u16(CANONICAL_ZIP.versionNeeded);
  writeCommonFields(writer, entry);
  writer.u16(0); // extra field length
  writer.bytes.set(entry.name, writer.advance(entry.name.length));
  return writer.bytes;
}

/** The central directory, one header per local header, then the end record. */
function trailerBytes(localHeaders: readonly (HeaderRun & { entry: CanonicalEntry })[], centralDirectoryOffset: number): Uint8Array {
  let centralDirectorySize = 0;
  for (const { entry } of localHeaders) centralDirectorySize += CENTRAL_HEADER_BYTES + entry.name.length;
  const writer = new ByteWriter(centralDirectorySize + END_OF_CENTRAL_DIRECTORY_BYTES);
  for (const { entry, offset } of localHeaders) writeCentralHeader(writer, entry, offset);
  writeEndOfCentralDirectory(writer, localHeaders.length, centralDirectorySize, centralDirectoryOffset);
  return writer.bytes;
}

function writeCentralHeader(writer: ByteWriter, entry: CanonicalEntry, localHeaderOffset: number): void {
  writer.u32(CENTRAL_HEADER_SIGNATURE);
  writer.u16(CANONICAL_ZIP.versionMadeBy);
  writer.u16(CANONICAL_ZIP.versionNeeded);
  writeCommonFields(writer, entry);
  writer.u16(0); // extra field length
  writer.u16(0); // file comment length
  writer.u16(0); // disk number start
  writer.u16(0); // internal file attributes
  writer.u32(CANONICAL_ZIP.externalAttributes);
  writer.u32(localHeaderOffset);
  writer.bytes.set(entry.name, writer.advance(entry.name.length));
}

/** Flags through file-name length: identical in the local and the central header. */
function writeCommonFields(writer: ByteWriter, entry: CanonicalEntry): void {
  writer.u16(CANONICAL_ZIP.flags);
  writer.u16(CANONICAL_ZIP.method);
  writer.u16(CANONICAL_ZIP.dosTime);
  writer.u16(CANONICAL_ZIP.dosDate);
  writer.u32(entry.crc);
  writer.u32(entry.size); // compressed size: STORED, so equal to the size
  writer.u32(entry.size);
  writer.u16(entry.name.length);
}

function writeEndOfCentralDirectory(writer: ByteWriter, count: number, size: number, offset: number): void {
  writer.u32(END_OF_CENTRAL_DIRECTORY_SIGNATURE);
  writer.u16(0); // number of this disk
  writer.u16(0); // disk where the central directory starts
  writer.u16(count); // entries on this disk
  writer.u16(count); // entries in total
  writer.u32(size);
  writer.u32(offset);
  writer.u16(0); // comment length
}

/** Little-endian writer over a buffer sized up front. */
class ByteWriter {
  readonly bytes: Uint8Array;
  readonly #view: DataView;
  #position = 0;

  constructor(size: number) {
    this.bytes = new Uint8Array(size);
    this.#view = new DataView(this.bytes.buffer);
  }

  /** Reserves `length` bytes and returns where they start. */
  advance(length: number): number {
    const start = this.#position;
    this.#position += length;
    return start;
  }

  u16(value: number): void {
    this.#view.setUint16(this.advance(2), value, true);
  }

  u32(value: number): void {
    this.#view.setUint32(this.advance(4), value, true);
  }
}
