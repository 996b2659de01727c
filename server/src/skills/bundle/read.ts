import { Readable } from "node:stream";
import { crc32 } from "node:zlib";
import { fromRandomAccessReader, RandomAccessReader, type Entry, type ZipFile } from "yauzl";
import {
  assertUniquePaths,
  BundleFormatError,
  canonicalLayout,
  decodeSkillMd,
  parseSkillMd,
  SKILL_MD_PATH,
  type CanonicalEntry,
  type CanonicalLayout,
} from "@skillenv/client/bundle";
import { serviceError } from "../../errors/index.ts";
import { checkCentralEntry, checkInflatedSoFar, DEFLATED, STORED } from "./entries.ts";
import { defaultBundleLimits, type BundleLimits } from "./limits.ts";
import { skillMdFields } from "./skill-md-fields.ts";

/** Random access to a bundle's bytes: the reader asks for ranges and never needs the archive whole. */
export interface BundleSource {
  readonly size: number;
  /** Bytes [start, end); fewer only where the source ends. */
  read(start: number, end: number): Promise<Uint8Array>;
  /** Bytes [start, end) as a stream, so an entry is inflated and checked chunk by chunk. */
  stream(start: number, end: number): Readable;
}

/** What SKILL.md contributes to a skill's record. */
export interface SkillMdFields {
  /** `name:` from the frontmatter, unvalidated: an explicit name may still override it. */
  name?: string;
  description: string;
  /**
   * The whole frontmatter mapping as JSON holds it (a YAML date becomes its ISO text), for the
   * MCP skills extension's entries; absent from parsers that do not give it.
   */
  frontmatter?: Record<string, unknown>;
}

/** Parses SKILL.md's bytes; the service passes its worker threads (skill-md-parsers.ts). */
export type SkillMdParser = (bytes: Uint8Array) => Promise<SkillMdFields>;

/** A bundle that passed every check. */
export interface BundleSummary {
  frontmatterName?: string;
  description: string;
  /** SKILL.md's frontmatter (SkillMdFields.frontmatter). */
  frontmatter?: Record<string, unknown>;
  fileCount: number;
  totalBytes: number;
  /** Every file's path and uncompressed size, in canonical order. */
  listing: BundleFile[];
}

export interface BundleFile {
  path: string;
  sizeBytes: number;
  /** CRC-32 of the bytes (the zip's own); absent in listings stored before it was kept. */
  crc32?: number;
}

/** A bundle that passed every check, with its files in canonical (UTF-8 path) order. */
export interface ReadBundle extends BundleSummary {
  files: Map<string, Uint8Array>;
}

interface CentralEntry {
  readonly entry: Entry;
  readonly path: string;
}

/** An entry read and checked: what the canonical layout needs, and its bytes when kept. */
interface ReadEntry extends CanonicalEntry {
  readonly path: string;
  readonly data?: Uint8Array;
}

const encoder = new TextEncoder();

/**
 * Reads and validates a bundle. Safety checks come first, from the central directory before
 * anything is inflated and again while inflating; the SKILL.md rules next; the canonical
 * comparison last, so a hostile archive gets the code of what makes it hostile rather than
 * bundle_not_canonical. Every refusal is a service error with a stable code. Parsing on the
 * calling thread is the default; the service passes its parser threads.
 */
export async function readBundle(
  zip: BundleSource | Uint8Array,
  limits: BundleLimits = defaultBundleLimits,
  parse: SkillMdParser = parseHere,
): Promise<ReadBundle> {
  const { summary, entries } = await readChecked(sourceOf(zip), limits, parse, () => true);
  return { ...summary, files: new Map(entries.map(({ path, data }) => [path, data!])) };
}

/** readBundle without keeping the files: only SKILL.md is held, while it is parsed. */
export async function inspectBundle(zip: BundleSource | Uint8Array, limits: BundleLimits, parse: SkillMdParser): Promise<BundleSummary> {
  return (await readChecked(sourceOf(zip), limits, parse, (path) => path === SKILL_MD_PATH)).summary;
}

/** Client-side format errors (paths, SKILL.md, names) become service errors with the same stable code. */
export function asServiceError(error: unknown): unknown {
  return error instanceof BundleFormatError ? serviceError(error.code, error.message) : error;
}

/** A bundle held in memory, as a source. */
function bytesSource(zip: Uint8Array): BundleSource {
  const buffer = Buffer.from(zip.buffer, zip.byteOffset, zip.byteLength);
  return {
    size: buffer.length,
    read: async (start, end) => buffer.subarray(start, end),
    stream: (start, end) => Readable.from([buffer.subarray(start, end)], { objectMode: false }),
  };
}

async function parseHere(bytes: Uint8Array): Promise<SkillMdFields> {
  return skillMdFields(parseSkillMd(decodeSkillMd(bytes)));
}

function sourceOf(zip: BundleSource | Uint8Array): BundleSource {
  return zip instanceof Uint8Array ? bytesSource(zip) : zip;
}

async function readChecked(
  source: BundleSource,
  limits: BundleLimits,
  parse: SkillMdParser,
  keep: (path: string) => boolean,
): Promise<{ summary: BundleSummary; entries: ReadEntry[] }> {
  try {
    const entries = await readEntries(source, limits, keep);
    const skillMd = entries.find(({ path }) => path === SKILL_MD_PATH)!;
    const { name, description, frontmatter } = await parse(skillMd.data!);
    const layout = canonicalLayout(entries);
    await assertCanonical(source, layout);
    let totalBytes = 0;
    for (const { size } of entries) totalBytes += size;
    const ordered = layout.localHeaders.map(({ entry }) => entry);
    const listing = ordered.map(({ path, size, crc }) => ({ path, sizeBytes: size, crc32: crc }));
    const summary = {
      ...(name === undefined ? {} : { frontmatterName: name }),
      description,
      ...(frontmatter ? { frontmatter } : {}),
      fileCount: entries.length,
      totalBytes,
      listing,
    };
    return { summary, entries: ordered };
  } catch (error) {
    throw asServiceError(error);
  }
}

async function readEntries(source: BundleSource, limits: BundleLimits, keep: (path: string) => boolean): Promise<ReadEntry[]> {
  const zipfile = await yauzlStep(openZip(source));
  try {
    const entries = await readCentralDirectory(zipfile, limits);
    assertUniquePaths(entries.map(({ path }) => path));
    if (!entries.some(({ path }) => path === SKILL_MD_PATH)) {
      throw serviceError("bundle_missing_skill_md", `${SKILL_MD_PATH} is not at the archive root`);
    }
    assertDecodableMethods(entries);
    return await inflateAll(zipfile, entries, limits, keep);
  } finally {
    zipfile.close();
  }
}

/** yauzl reads through this: small reads in one piece, entry data as a stream of ranges. */
class SourceReader extends RandomAccessReader {
  readonly #source: BundleSource;

  constructor(source: BundleSource) {
    super();
    this.#source = source;
  }

  override _readStreamForRange(start: number, end: number): Readable {
    return this.#source.stream(start, end);
  }

  override read(buffer: Buffer, offset: number, length: number, position: number, callback: (error: Error | null, bytesRead?: number) => void): void {
    this.#source.read(position, position + length).then((bytes) => {
      buffer.set(bytes, offset);
      callback(null, bytes.length);
    }, callback);
  }
}

function openZip(source: BundleSource): Promise<ZipFile> {
  // Sizes and names are checked here, with codes of our own, instead of by yauzl. The entries
  // are read after the whole central directory, so yauzl must not close the reader on its own.
  const options = { lazyEntries: true, autoClose: false, decodeStrings: false, validateEntrySizes: false };
  return new Promise((resolve, reject) =>
    fromRandomAccessReader(new SourceReader(source), source.size, options, (error, zipfile) => (error ? reject(error) : resolve(zipfile))),
  );
}

async function readCentralDirectory(zipfile: ZipFile, limits: BundleLimits): Promise<CentralEntry[]> {
  // The end-of-central-directory count bounds the work before a single record is parsed.
  if (zipfile.entryCount > limits.maxEntries) {
    throw serviceError("bundle_too_many_entries", `the bundle has ${zipfile.entryCount} entries; the limit is ${limits.maxEntries}`);
  }
  const entries: CentralEntry[] = [];
  let declaredTotal = 0;
  for await (const entry of yauzlEntries(zipfile)) {
    entries.push({ entry, path: checkCentralEntry(entry, limits) });
    declaredTotal += entry.uncompressedSize;
    if (declaredTotal > limits.maxTotalBytes) {
      throw serviceError("bundle_too_large", `the bundle declares more than ${limits.maxTotalBytes} uncompressed bytes`);
    }
  }
  return entries;
}

async function* yauzlEntries(zipfile: ZipFile): AsyncGenerator<Entry> {
  const iterator = zipfile.eachEntry();
  try {
    for (;;) {
      const next = await yauzlStep(iterator.next());
      if (next.done === true) return;
      yield next.value;
    }
  } finally {
    await iterator.return?.();
  }
}

/** Methods other than STORED and DEFLATE cannot be checked by inflating, and are never canonical. */
function assertDecodableMethods(entries: readonly CentralEntry[]): void {
  const other = entries.find(({ entry }) => entry.compressionMethod !== STORED && entry.compressionMethod !== DEFLATED);
  if (other !== undefined) {
    throw serviceError(
      "bundle_not_canonical",
      `${JSON.stringify(other.path)} uses compression method ${other.entry.compressionMethod}; canonical bundles are STORED`,
    );
  }
}

async function inflateAll(zipfile: ZipFile, entries: readonly CentralEntry[], limits: BundleLimits, keep: (path: string) => boolean): Promise<ReadEntry[]> {
  const read: ReadEntry[] = [];
  let totalBytes = 0;
  for (const { entry, path } of entries) {
    const inflated = await inflateEntry(zipfile, entry, path, totalBytes, limits, keep(path));
    totalBytes += inflated.size;
    read.push(inflated);
  }
  return read;
}

/** Streams one entry through the limits and its CRC-32; its bytes are collected only when kept. */
async function inflateEntry(zipfile: ZipFile, entry: Entry, path: string, totalBefore: number, limits: BundleLimits, keep: boolean): Promise<ReadEntry> {
  const stream = await yauzlStep(zipfile.openReadStreamPromise(entry));
  const chunks: Uint8Array[] = [];
  let size = 0;
  let crc = 0;
  // Leaving the loop early (a limit tripped) destroys the stream, so inflation stops there.
  for await (const chunk of yauzlStream<Uint8Array>(stream)) {
    size += chunk.length;
    checkInflatedSoFar(entry, path, size, totalBefore + size, limits);
    crc = crc32(chunk, crc);
    if (keep) chunks.push(chunk);
  }
  if (size !== entry.uncompressedSize) {
    throw serviceError("bundle_not_zip", `${JSON.stringify(path)} holds ${size} bytes but declares ${entry.uncompressedSize}`);
  }
  if (crc !== entry.crc32) throw serviceError("bundle_not_zip", `${JSON.stringify(path)} fails its CRC-32 check`);
  const read = { path, name: encoder.encode(path), size, crc };
  return keep ? { ...read, data: concat(chunks, size) } : read;
}

async function* yauzlStream<T>(stream: AsyncIterable<unknown>): AsyncGenerator<T> {
  const iterator = stream[Symbol.asyncIterator]();
  try {
    for (;;) {
      const next = await yauzlStep(iterator.next());
      if (next.done === true) return;
      yield next.value as T;
    }
  } finally {
    await iterator.return?.();
  }
}

function concat(chunks: readonly Uint8Array[], size: number): Uint8Array {
  const data = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    data.set(chunk, offset);
    offset += chunk.length;
  }
  return data;
}

/**
 * Compares the archive with the canonical form of the entries read. Only the header runs and
 * the size need comparing: every entry passed the checks above, so its data was read, stored,
 * from where its (compared) headers put it.
 */
async function assertCanonical(source: BundleSource, layout: CanonicalLayout<ReadEntry>): Promise<void> {
  for (const run of [...layout.localHeaders, layout.trailer]) {
    const actual = await source.read(run.offset, run.offset + run.bytes.length);
    const at = firstDifference(actual, run.bytes);
    if (at !== undefined) notCanonical(run.offset + at);
  }
  if (source.size !== layout.size) notCanonical(Math.min(source.size, layout.size));
}

function notCanonical(at: number): never {
  throw serviceError(
    "bundle_not_canonical",
    `the archive differs from the canonical form of its contents at byte ${at}; re-zip it with a conforming client (docs/bundle-format.md)`,
  );
}

function firstDifference(a: Uint8Array, b: Uint8Array): number | undefined {
  const length = Math.min(a.length, b.length);
  for (let i = 0; i < length; i++) if (a[i] !== b[i]) return i;
  return a.length === b.length ? undefined : length;
}

/** Anything yauzl or zlib reports (bad signatures, truncation, corrupt deflate data) means the bytes are not a readable zip. */
async function yauzlStep<T>(step: Promise<T>): Promise<T> {
  try {
    return await step;
  } catch (error) {
    throw yauzlRefusal(error);
  }
}

function yauzlRefusal(error: unknown): Error {
  const message = error instanceof Error ? error.message : String(error);
  // yauzl refuses the strong-encryption flag while parsing the record, before we see the entry.
  if (message.startsWith("strong encryption")) return serviceError("bundle_encrypted", `an entry uses strong encryption`);
  return serviceError("bundle_not_zip", `not a readable zip archive: ${message}`);
}
