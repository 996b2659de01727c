import { BundleFormatError, crc32 } from "../bundle/index.ts";

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
  crc: number;
  compressedSize: number;
  localOffset: number;
  next: number;
}

const UNIX = 3;
const FILE_TYPE_MASK = 0o170000;
const REGULAR_FILE = 0o100000;
const DIRECTORY = 0o040000;
const names = new TextDecoder("utf-8", { fatal: true });

function centralEntry(zip: Uint8Array, view: DataView, offset: number): CentralEntry {
  const nameLength = view.getUint16(offset + 28, true);
  const extraLength = view.getUint16(offset + 30, true);
  const commentLength = view.getUint16(offset + 32, true);
  const name = decodeName(zip.subarray(offset + 46, offset + 46 + nameLength));
  checkFileType(name, view.getUint8(offset + 5), view.getUint32(offset + 38, true));
  return {
    name,
    flags: view.getUint16(offset + 8, true),
    method: view.getUint16(offset + 10, true),
    crc: view.getUint32(offset + 16, true),
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
  if (entry.method !== 0 && entry.method !== 8) {
    notZip(`${entry.name} uses compression method ${entry.method}; only stored and deflate are supported`);
  }
  const data = entry.method === 0 ? raw.slice() : await inflateRaw(raw);
  if (crc32(data) !== entry.crc) notZip(`${entry.name} fails its CRC-32 check`);
  return data;
}

function decodeName(bytes: Uint8Array): string {
  try {
    return names.decode(bytes);
  } catch {
    throw new BundleFormatError("bundle_path_invalid", "an entry name is not valid UTF-8");
  }
}

/** Unix-made entries carry a file type; anything but a regular file or directory (symlinks above all) is refused. */
function checkFileType(name: string, madeBy: number, externalAttributes: number): void {
  const type = (externalAttributes >>> 16) & FILE_TYPE_MASK;
  if (madeBy !== UNIX || type === 0 || type === REGULAR_FILE || type === DIRECTORY) return;
  throw new BundleFormatError("bundle_special_entry", `${name} is a symbolic link or special file`);
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
