import { BundleFormatError } from "../bundle/index.ts";

const EOCD_SIGNATURE = 0x06054b50;
const CENTRAL_SIGNATURE = 0x02014b50;
const LOCAL_SIGNATURE = 0x04034b50;
const EOCD_MIN_LENGTH = 22;
const MAX_COMMENT_LENGTH = 0xffff;

/** Ceiling on what one archive may inflate to on the client, so a hostile URL cannot exhaust memory. */
const MAX_INFLATED_BYTES = 256 * 1024 * 1024;

/**
 * Reads any ordinary zip (stored or deflated entries, e.g. from `zip -r` or a browser) into
 * files, so that fromBytes and fromUrl can re-emit it in canonical form. Runs in browsers and
 * Node alike. Directory entries are skipped; the canonical writer validates the paths.
 */
export async function unzip(zip: Uint8Array): Promise<Map<string, Uint8Array>> {
  const view = new DataView(zip.buffer, zip.byteOffset, zip.byteLength);
  const eocd = findEndOfCentralDirectory(view);
  const count = view.getUint16(eocd + 10, true);
  let offset = view.getUint32(eocd + 16, true);
  const files = new Map<string, Uint8Array>();
  let inflated = 0;
  for (let i = 0; i < count; i++) {
    if (offset + 46 > zip.byteLength || view.getUint32(offset, true) !== CENTRAL_SIGNATURE) notZip("broken central directory");
    const entry = centralEntry(zip, view, offset);
    offset = entry.next;
    if (entry.name.endsWith("/")) continue;
    const data = await entryData(zip, view, entry);
    inflated += data.byteLength;
    if (inflated > MAX_INFLATED_BYTES) throw new BundleFormatError("bundle_too_large", "the archive inflates to more than 256 MiB");
    if (files.has(entry.name)) throw new BundleFormatError("bundle_duplicate_entry", `${entry.name} appears twice`);
    files.set(entry.name, data);
  }
  return files;
}

interface CentralEntry {
  name: string;
  flags: number;
  method: number;
  compressedSize: number;
  localOffset: number;
  next: number;
}

function centralEntry(zip: Uint8Array, view: DataView, offset: number): CentralEntry {
  const nameLength = view.getUint16(offset + 28, true);
  const extraLength = view.getUint16(offset + 30, true);
  const commentLength = view.getUint16(offset + 32, true);
  return {
    name: new TextDecoder().decode(zip.subarray(offset + 46, offset + 46 + nameLength)),
    flags: view.getUint16(offset + 8, true),
    method: view.getUint16(offset + 10, true),
    compressedSize: view.getUint32(offset + 20, true),
    localOffset: view.getUint32(offset + 42, true),
    next: offset + 46 + nameLength + extraLength + commentLength,
  };
}

async function entryData(zip: Uint8Array, view: DataView, entry: CentralEntry): Promise<Uint8Array> {
  if (entry.flags & 0x1) throw new BundleFormatError("bundle_encrypted", `${entry.name} is encrypted`);
  const local = entry.localOffset;
  if (local + 30 > zip.byteLength || view.getUint32(local, true) !== LOCAL_SIGNATURE) notZip(`no local header for ${entry.name}`);
  const start = local + 30 + view.getUint16(local + 26, true) + view.getUint16(local + 28, true);
  const end = start + entry.compressedSize;
  if (end > zip.byteLength) notZip(`${entry.name} runs past the end of the archive`);
  const raw = zip.subarray(start, end);
  if (entry.method === 0) return raw.slice();
  if (entry.method === 8) return inflateRaw(raw);
  return notZip(`${entry.name} uses compression method ${entry.method}; only stored and deflate are supported`);
}

async function inflateRaw(data: Uint8Array): Promise<Uint8Array> {
  const stream = new Blob([data as Uint8Array<ArrayBuffer>]).stream().pipeThrough(new DecompressionStream("deflate-raw"));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

function findEndOfCentralDirectory(view: DataView): number {
  const last = view.byteLength - EOCD_MIN_LENGTH;
  for (let offset = last; offset >= 0 && offset >= last - MAX_COMMENT_LENGTH; offset--) {
    if (view.getUint32(offset, true) === EOCD_SIGNATURE) return offset;
  }
  return notZip("no end-of-central-directory record");
}

function notZip(reason: string): never {
  throw new BundleFormatError("bundle_not_zip", `not a zip archive: ${reason}`);
}
