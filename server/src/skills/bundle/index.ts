export { bundleLimitsFrom, defaultBundleLimits, type BundleLimits } from "./limits.ts";
export { asServiceError, readBundle, type ReadBundle } from "./read.ts";
