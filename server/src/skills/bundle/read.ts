import { fromBuffer, type Entry, type ZipFile } from "yauzl";
import {
  assertUniquePaths,
  BundleFormatError,
  canonicalZip,
  crc32,
  parseSkillMd,
  SKILL_MD_PATH,
} from "../../../../clients/ts/src/bundle/index.ts";
import { serviceError } from "../../errors/index.ts";
import { checkCentralEntry, checkInflatedSoFar, DEFLATED, STORED } from "./entries.ts";
import { defaultBundleLimits, type BundleLimits } from "./limits.ts";

/** A bundle that passed every check, with its files in canonical (UTF-8 path) order. */
export interface ReadBundle {
  files: Map<string, Uint8Array>;
  skillMd: string;
  /** `name:` from the frontmatter, unvalidated: an explicit name may still override it. */
  frontmatterName?: string;
  description: string;
  fileCount: number;
  totalBytes: number;
}

interface CentralEntry {
  readonly entry: Entry;
  readonly path: string;
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * Reads and validates an uploaded bundle. Safety checks come first, from the central
 * directory before anything is inflated and again while inflating; the SKILL.md rules next;
 * the canonical byte comparison last, so a hostile archive gets the code of what makes it
 * hostile rather than bundle_not_canonical. Every refusal is a service error with a stable code.
 */
export async function readBundle(zip: Uint8Array, limits: BundleLimits = defaultBundleLimits): Promise<ReadBundle> {
  try {
    return await readChecked(zip, limits);
  } catch (error) {
    throw asServiceError(error);
  }
}

/** Client-side format errors (paths, SKILL.md, names) become service errors with the same stable code. */
export function asServiceError(error: unknown): unknown {
  return error instanceof BundleFormatError ? serviceError(error.code, error.message) : error;
}

async function readChecked(zip: Uint8Array, limits: BundleLimits): Promise<ReadBundle> {
  const files = await readFiles(zip, limits);
  const skillMd = decodeSkillMd(files.get(SKILL_MD_PATH)!);
  const { name, description } = parseSkillMd(skillMd);
  assertCanonical(zip, files);
  let totalBytes = 0;
  for (const data of files.values()) totalBytes += data.length;
  return { files, skillMd, frontmatterName: name, description, fileCount: files.size, totalBytes };
}

async function readFiles(zip: Uint8Array, limits: BundleLimits): Promise<Map<string, Uint8Array>> {
  const zipfile = await yauzlStep(openZip(zip));
  try {
    const entries = await readCentralDirectory(zipfile, limits);
    assertUniquePaths(entries.map(({ path }) => path));
    if (!entries.some(({ path }) => path === SKILL_MD_PATH)) {
      throw serviceError("bundle_missing_skill_md", `${SKILL_MD_PATH} is not at the archive root`);
    }
    assertDecodableMethods(entries);
    return await inflateAll(zipfile, entries, limits);
  } finally {
    zipfile.close();
  }
}

function openZip(zip: Uint8Array): Promise<ZipFile> {
  const buffer = Buffer.from(zip.buffer, zip.byteOffset, zip.byteLength);
  // Sizes and names are checked here, with codes of our own, instead of by yauzl.
  const options = { lazyEntries: true, decodeStrings: false, validateEntrySizes: false };
  return new Promise((resolve, reject) => fromBuffer(buffer, options, (error, zipfile) => (error ? reject(error) : resolve(zipfile))));
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
    throw serviceError("bundle_not_canonical", `${JSON.stringify(other.path)} uses compression method ${other.entry.compressionMethod}; canonical bundles are STORED`);
  }
}

async function inflateAll(zipfile: ZipFile, entries: readonly CentralEntry[], limits: BundleLimits): Promise<Map<string, Uint8Array>> {
  const files = new Map<string, Uint8Array>();
  let totalBytes = 0;
  for (const { entry, path } of entries) {
    const data = await inflateEntry(zipfile, entry, path, totalBytes, limits);
    totalBytes += data.length;
    files.set(path, data);
  }
  return files;
}

async function inflateEntry(zipfile: ZipFile, entry: Entry, path: string, totalBefore: number, limits: BundleLimits): Promise<Uint8Array> {
  const stream = await yauzlStep(zipfile.openReadStreamPromise(entry));
  const chunks: Uint8Array[] = [];
  let size = 0;
  // Leaving the loop early (a limit tripped) destroys the stream, so inflation stops there.
  for await (const chunk of yauzlStream<Uint8Array>(stream)) {
    size += chunk.length;
    checkInflatedSoFar(entry, path, size, totalBefore + size, limits);
    chunks.push(chunk);
  }
  const data = concat(chunks, size);
  if (size !== entry.uncompressedSize) {
    throw serviceError("bundle_not_zip", `${JSON.stringify(path)} holds ${size} bytes but declares ${entry.uncompressedSize}`);
  }
  if (crc32(data) !== entry.crc32) throw serviceError("bundle_not_zip", `${JSON.stringify(path)} fails its CRC-32 check`);
  return data;
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

function decodeSkillMd(bytes: Uint8Array): string {
  try {
    return utf8.decode(bytes);
  } catch {
    throw serviceError("frontmatter_invalid", `${SKILL_MD_PATH} is not valid UTF-8`);
  }
}

function assertCanonical(zip: Uint8Array, files: ReadonlyMap<string, Uint8Array>): void {
  const expected = canonicalZip(files);
  const at = firstDifference(zip, expected);
  if (at !== undefined) {
    throw serviceError("bundle_not_canonical", `the archive differs from the canonical form of its contents at byte ${at}; re-zip it with a conforming client (docs/bundle-format.md)`);
  }
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
