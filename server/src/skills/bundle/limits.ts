import { loadSettings, type Limits } from "../../config/index.ts";

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

/** The bundle limits of the SERVICE_SKILL_* settings. */
export function bundleLimitsFrom(limits: Limits): BundleLimits {
  return {
    maxEntries: limits.skillMaxEntries,
    maxEntryBytes: limits.skillMaxEntryBytes,
    maxTotalBytes: limits.skillMaxTotalBytes,
    maxCompressionRatio: limits.skillMaxCompressionRatio,
  };
}

/** The defaults come from the settings module, the one place limits are defined. */
export const defaultBundleLimits: BundleLimits = bundleLimitsFrom(loadSettings({}).limits);
