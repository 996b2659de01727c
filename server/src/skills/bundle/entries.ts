import type { Entry } from "yauzl";
import { validateBundlePath } from "@skillenv/client/bundle";
import { serviceError } from "../../errors/index.ts";
import type { BundleLimits } from "./limits.ts";

export const STORED = 0;
export const DEFLATED = 8;
const AES_ENCRYPTED = 99;

/** Bit 0: encrypted; bit 6: strong encryption; bit 13: central directory encrypted. */
const ENCRYPTION_FLAGS = 0x0001 | 0x0040 | 0x2000;

const S_IFMT = 0o170000;
const S_IFREG = 0o100000;
const S_IFDIR = 0o040000;
const S_IFLNK = 0o120000;
const DOS_DIRECTORY_ATTRIBUTE = 0x10;

const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/**
 * Checks one central directory record without touching its data and returns its path.
 * The order (path, kind, encryption, sizes) decides which code a record breaking several
 * rules gets; all of them run before anything is inflated.
 */
export function checkCentralEntry(entry: Entry, limits: BundleLimits): string {
  const name = decodeName(entry);
  const reason = validateBundlePath(name.endsWith("/") ? name.slice(0, -1) : name);
  if (reason !== undefined) throw serviceError("bundle_path_invalid", `${JSON.stringify(name)}: ${reason}`);
  const special = specialKind(entry, name);
  if (special !== undefined) throw serviceError("bundle_special_entry", `${JSON.stringify(name)} is ${special}; a bundle holds regular files only`);
  if ((entry.generalPurposeBitFlag & ENCRYPTION_FLAGS) !== 0 || entry.compressionMethod === AES_ENCRYPTED) {
    throw serviceError("bundle_encrypted", `${JSON.stringify(name)} is encrypted`);
  }
  checkDeclaredSizes(entry, name, limits);
  return name;
}

/** yauzl's decodeStrings is off so that a non-UTF-8 name is refused rather than read as CP437. */
function decodeName(entry: Entry): string {
  try {
    return utf8.decode(entry.fileNameRaw);
  } catch {
    throw serviceError("bundle_path_invalid", `entry name 0x${entry.fileNameRaw.toString("hex")} is not UTF-8`);
  }
}

/**
 * Directories are refused along with links and devices: the canonical format has none, and
 * a link would let a later extraction write outside its directory.
 */
function specialKind(entry: Entry, name: string): string | undefined {
  const type = (entry.externalFileAttributes >>> 16) & S_IFMT;
  if (type === S_IFLNK) return "a symbolic link";
  if (name.endsWith("/") || type === S_IFDIR || (entry.externalFileAttributes & DOS_DIRECTORY_ATTRIBUTE) !== 0) return "a directory";
  if (type !== 0 && type !== S_IFREG) return "a device, FIFO or socket";
  return undefined;
}

function checkDeclaredSizes(entry: Entry, name: string, limits: BundleLimits): void {
  if (entry.compressionMethod === STORED && entry.compressedSize !== entry.uncompressedSize) {
    throw serviceError(
      "bundle_not_zip",
      `${JSON.stringify(name)} is stored but declares ${entry.compressedSize} compressed and ${entry.uncompressedSize} uncompressed bytes`,
    );
  }
  if (entry.uncompressedSize > limits.maxCompressionRatio * entry.compressedSize) {
    throw serviceError(
      "bundle_compression_ratio",
      `${JSON.stringify(name)} declares ${entry.uncompressedSize} bytes from ${entry.compressedSize}; the ratio limit is ${limits.maxCompressionRatio}`,
    );
  }
  if (entry.uncompressedSize > limits.maxEntryBytes) {
    throw serviceError("bundle_entry_too_large", `${JSON.stringify(name)} declares ${entry.uncompressedSize} bytes; the limit is ${limits.maxEntryBytes}`);
  }
}

/**
 * The same limits, applied to the bytes actually produced so far: declared sizes are only a
 * hint, and a lying entry is stopped here before it can inflate past the limits.
 */
export function checkInflatedSoFar(entry: Entry, name: string, entryBytes: number, totalBytes: number, limits: BundleLimits): void {
  if (entryBytes > limits.maxCompressionRatio * entry.compressedSize) {
    throw serviceError(
      "bundle_compression_ratio",
      `${JSON.stringify(name)} inflates to more than ${limits.maxCompressionRatio} times its ${entry.compressedSize} compressed bytes`,
    );
  }
  if (entryBytes > limits.maxEntryBytes) {
    throw serviceError("bundle_entry_too_large", `${JSON.stringify(name)} inflates to more than ${limits.maxEntryBytes} bytes`);
  }
  if (totalBytes > limits.maxTotalBytes) {
    throw serviceError("bundle_too_large", `the bundle inflates to more than ${limits.maxTotalBytes} bytes`);
  }
}
