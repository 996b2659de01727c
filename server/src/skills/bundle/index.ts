export { bundleLimitsFrom, defaultBundleLimits, type BundleLimits } from "./limits.ts";
export {
  asServiceError,
  inspectBundle,
  readBundle,
  type BundleFile,
  type BundleSource,
  type BundleSummary,
  type ReadBundle,
  type SkillMdParser,
} from "./read.ts";
export { SkillMdParsers } from "./skill-md-parsers.ts";
