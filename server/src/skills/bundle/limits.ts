/** Bounds on what reading one bundle may cost; all are checked before and while inflating. */
export interface BundleLimits {
  readonly maxEntries: number;
  /** Uncompressed bytes of one entry. */
  readonly maxEntryBytes: number;
  /** Uncompressed bytes of all entries together. */
  readonly maxTotalBytes: number;
  /** Uncompressed / compressed bytes of one entry (zip bomb guard). */
  readonly maxCompressionRatio: number;
}

const MiB = 1024 * 1024;

export const defaultBundleLimits: BundleLimits = {
  maxEntries: 1000,
  maxEntryBytes: 10 * MiB,
  maxTotalBytes: 50 * MiB,
  maxCompressionRatio: 100,
};
