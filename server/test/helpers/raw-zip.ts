import { crc32 as zlibCrc32, deflateRawSync } from "node:zlib";

/**
 * A deliberately permissive zip writer for tests: every header field can be set to anything,
 * so it can build archives no well-behaved tool would (lying sizes, symlinks, zip slips,
 * duplicate names). Its defaults are the canonical values, written independently of the
 * client's canonicalZip so the two can be checked against each other.
 */
export interface RawEntry {
  /** A string is written as UTF-8; bytes are written as they are (e.g. invalid UTF-8). */
  name: string | Uint8Array;
  /** The bytes stored in the archive (already compressed when method is 8). */
  data: Uint8Array;
  /** The uncompressed bytes, used for the default CRC and uncompressed size. Defaults to data. */
  content?: Uint8Array;
  method?: number;
  flags?: number;
  crc32?: number;
  compressedSize?: number;
  uncompressedSize?: number;
  externalAttributes?: number;
  versionMadeBy?: number;
  versionNeeded?: number;
  dosTime?: number;
  dosDate?: number;
  /** Written in both headers. */
  extra?: Uint8Array;
  comment?: string;
}

export interface RawZipOptions {
  /** Archive comment in the end-of-central-directory record. */
  comment?: string;
  /** Overrides the entry count written in the end-of-central-directory record. */
  entryCount?: number;
}

const encoder = new TextEncoder();

export function storedEntry(name: string, content: Uint8Array | string, overrides: Partial<RawEntry> = {}): RawEntry {
  return { name, data: bytesOf(content), ...overrides };
}

/** A DEFLATE (method 8) entry with honest sizes and CRC unless overridden. */
export function deflatedEntry(name: string, content: Uint8Array | string, overrides: Partial<RawEntry> = {}): RawEntry {
  const raw = bytesOf(content);
  return { name, data: new Uint8Array(deflateRawSync(raw, { level: 9 })), content: raw, method: 8, ...overrides };
}

export function bytesOf(content: Uint8Array | string): Uint8Array {
  return typeof content === "string" ? encoder.encode(content) : content;
}

export function rawZip(entries: readonly RawEntry[], options: RawZipOptions = {}): Uint8Array {
  const parts: Uint8Array[] = [];
  const offsets: number[] = [];
  let offset = 0;
  for (const entry of entries) {
    offsets.push(offset);
    const local = localHeader(entry);
    parts.push(local, entry.data);
    offset += local.length + entry.data.length;
  }
  const centralStart = offset;
  entries.forEach((entry, i) => {
    const central = centralHeader(entry, offsets[i]!);
    parts.push(central);
    offset += central.length;
  });
  parts.push(endOfCentralDirectory(options.entryCount ?? entries.length, offset - centralStart, centralStart, options.comment ?? ""));
  return Buffer.concat(parts);
}

interface Resolved {
  name: Uint8Array;
  extra: Uint8Array;
  comment: Uint8Array;
  flags: number;
  method: number;
  crc: number;
  compressedSize: number;
  uncompressedSize: number;
}

function resolve(entry: RawEntry): Resolved {
  const content = entry.content ?? entry.data;
  return {
    name: bytesOf(entry.name),
    extra: entry.extra ?? new Uint8Array(0),
    comment: bytesOf(entry.comment ?? ""),
    flags: entry.flags ?? 0x0800,
    method: entry.method ?? 0,
    crc: entry.crc32 ?? zlibCrc32(content),
    compressedSize: entry.compressedSize ?? entry.data.length,
    uncompressedSize: entry.uncompressedSize ?? content.length,
  };
}

function localHeader(entry: RawEntry): Uint8Array {
  const r = resolve(entry);
  const header = Buffer.alloc(30);
  header.writeUInt32LE(0x04034b50, 0);
  header.writeUInt16LE(entry.versionNeeded ?? 20, 4);
  writeShared(header, 6, entry, r);
  header.writeUInt16LE(r.name.length, 26);
  header.writeUInt16LE(r.extra.length, 28);
  return Buffer.concat([header, r.name, r.extra]);
}

function centralHeader(entry: RawEntry, localOffset: number): Uint8Array {
  const r = resolve(entry);
  const header = Buffer.alloc(46);
  header.writeUInt32LE(0x02014b50, 0);
  header.writeUInt16LE(entry.versionMadeBy ?? 0x0314, 4);
  header.writeUInt16LE(entry.versionNeeded ?? 20, 6);
  writeShared(header, 8, entry, r);
  header.writeUInt16LE(r.name.length, 28);
  header.writeUInt16LE(r.extra.length, 30);
  header.writeUInt16LE(r.comment.length, 32);
  // disk number start (34) and internal attributes (36) stay 0
  header.writeUInt32LE((entry.externalAttributes ?? 0o100644 << 16) >>> 0, 38);
  header.writeUInt32LE(localOffset, 42);
  return Buffer.concat([header, r.name, r.extra, r.comment]);
}

/** flags, method, time, date, CRC and both sizes: the run of fields both headers share. */
function writeShared(header: Buffer, at: number, entry: RawEntry, r: Resolved): void {
  header.writeUInt16LE(r.flags, at);
  header.writeUInt16LE(r.method, at + 2);
  header.writeUInt16LE(entry.dosTime ?? 0, at + 4);
  header.writeUInt16LE(entry.dosDate ?? 0x0021, at + 6);
  header.writeUInt32LE(r.crc >>> 0, at + 8);
  header.writeUInt32LE(r.compressedSize, at + 12);
  header.writeUInt32LE(r.uncompressedSize, at + 16);
}

function endOfCentralDirectory(count: number, size: number, offset: number, comment: string): Uint8Array {
  const record = Buffer.alloc(22);
  record.writeUInt32LE(0x06054b50, 0);
  record.writeUInt16LE(count, 8);
  record.writeUInt16LE(count, 10);
  record.writeUInt32LE(size, 12);
  record.writeUInt32LE(offset, 16);
  const commentBytes = bytesOf(comment);
  record.writeUInt16LE(commentBytes.length, 20);
  return Buffer.concat([record, commentBytes]);
}
