import { DEFAULT_BUNDLE_LIMITS, type BundleLimits } from "@skillenv/client/bundle";
import type { Limits } from "../../config/index.ts";

export type { BundleLimits };

/** The bundle limits of the SERVICE_SKILL_* settings. */
export function bundleLimitsFrom(limits: Limits): BundleLimits {
  return {
    maxEntries: limits.skillMaxEntries,
    maxEntryBytes: limits.skillMaxEntryBytes,
    maxTotalBytes: limits.skillMaxTotalBytes,
    maxCompressionRatio: limits.skillMaxCompressionRatio,
  };
}

/** The format's documented defaults, which are also the settings' defaults. */
export const defaultBundleLimits: BundleLimits = DEFAULT_BUNDLE_LIMITS;
