import { BundleFormatError } from "./errors.ts";

/** The zip name-length field is 16 bits wide. */
export const MAX_PATH_BYTES = 0xffff;

const encoder = new TextEncoder();

/**
 * Checks one archive path: relative, "/"-separated, every segment a plain name. Returns the
 * reason it is refused, or undefined when it is acceptable. These rules make extraction safe on
 * any OS (no zip slip, no drive letters, no Windows separators) and keep UTF-8 encoding lossless.
 */
export function validateBundlePath(path: string): string | undefined {
  if (path === "") return "path is empty";
  if (!path.isWellFormed()) return "path is not valid Unicode (lone surrogate)";
  if (path.includes("\\")) return "path contains a backslash";
  // C0 controls (NUL included) and DEL break terminals, C strings and some file systems.
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it looks for
  if (/[\u0000-\u001f\u007f]/.test(path)) return "path contains a NUL or control character";
  if (path.startsWith("/")) return "path is absolute";
  if (/^[A-Za-z]:/.test(path)) return "path starts with a drive letter";
  for (const segment of path.split("/")) {
    if (segment === "") return "path has an empty segment (leading, trailing or doubled /)";
    if (segment === "." || segment === "..") return `path has a "${segment}" segment`;
  }
  if (encoder.encode(path).length > MAX_PATH_BYTES) return `path is longer than ${MAX_PATH_BYTES} UTF-8 bytes`;
  return undefined;
}

/** Throws bundle_path_invalid naming the path when validateBundlePath refuses it. */
export function assertBundlePath(path: string): void {
  const reason = validateBundlePath(path);
  if (reason !== undefined) throw new BundleFormatError("bundle_path_invalid", `${JSON.stringify(path)}: ${reason}`);
}

/**
 * Refuses a path seen twice, or a path that is also a directory of another ("a" and "a/b"):
 * such a bundle cannot be extracted onto a file system.
 */
export function assertUniquePaths(paths: Iterable<string>): void {
  const seen = new Set<string>();
  for (const path of paths) {
    if (seen.has(path)) throw new BundleFormatError("bundle_duplicate_entry", `${JSON.stringify(path)} appears twice`);
    seen.add(path);
  }
  for (const path of seen) {
    for (let slash = path.indexOf("/"); slash !== -1; slash = path.indexOf("/", slash + 1)) {
      const parent = path.slice(0, slash);
      if (seen.has(parent)) {
        throw new BundleFormatError("bundle_duplicate_entry", `${JSON.stringify(parent)} is both a file and the directory of ${JSON.stringify(path)}`);
      }
    }
  }
}

/** Orders byte strings the way memcmp does, i.e. UTF-8 paths by code point. */
export function compareBytes(a: Uint8Array, b: Uint8Array): number {
  const length = Math.min(a.length, b.length);
  for (let i = 0; i < length; i++) {
    if (a[i] !== b[i]) return a[i]! - b[i]!;
  }
  return a.length - b.length;
}
