import { BundleFormatError } from "./errors.ts";

/** Bounds on what one bundle may hold; the server's are configurable (SERVICE_SKILL_*). */
export interface BundleLimits {
  readonly maxEntries: number;
  /** Uncompressed bytes of one entry. */
  readonly maxEntryBytes: number;
  /** Uncompressed bytes of all entries together. */
  readonly maxTotalBytes: number;
  /** Uncompressed / compressed bytes of one entry (zip bomb guard; canonical entries are stored, ratio 1). */
  readonly maxCompressionRatio: number;
}

const MiB = 1024 * 1024;

/** The documented defaults (docs/bundle-format.md §5): the server's unless configured otherwise. */
export const DEFAULT_BUNDLE_LIMITS: BundleLimits = {
  maxEntries: 1000,
  maxEntryBytes: 10 * MiB,
  maxTotalBytes: 50 * MiB,
  maxCompressionRatio: 100,
};

/**
 * Refuses files (path -> size) that break `limits`, with the code the server would answer, so a
 * client can refuse a bundle before sending anything.
 */
export function assertWithinLimits(fileSizes: ReadonlyMap<string, number>, limits: BundleLimits): void {
  if (fileSizes.size > limits.maxEntries) {
    throw new BundleFormatError("bundle_too_many_entries", `the bundle has ${fileSizes.size} files; the limit is ${limits.maxEntries}`);
  }
  let total = 0;
  for (const [path, size] of fileSizes) {
    if (size > limits.maxEntryBytes) {
      throw new BundleFormatError("bundle_entry_too_large", `${JSON.stringify(path)} has ${size} bytes; the limit is ${limits.maxEntryBytes}`);
    }
    total += size;
  }
  if (total > limits.maxTotalBytes) {
    throw new BundleFormatError("bundle_too_large", `the files have ${total} bytes together; the limit is ${limits.maxTotalBytes}`);
  }
}
