export { crc32, tableCrc32 } from "./crc32.ts";
export { BundleFormatError, type BundleErrorCode } from "./errors.ts";
export { FRONTMATTER_LIMITS } from "./frontmatter.ts";
export { assertWithinLimits, DEFAULT_BUNDLE_LIMITS, type BundleLimits } from "./limits.ts";
export {
  MAX_SKILL_NAME_LENGTH,
  resolveSkillName,
  slugifySkillName,
  validateSkillName,
  type SkillNameSources,
} from "./names.ts";
export { assertUniquePaths, validateBundlePath } from "./paths.ts";
export { sha256Hex } from "./sha256.ts";
export { decodeSkillMd, MAX_DESCRIPTION_LENGTH, parseSkillMd, SKILL_MD_PATH, type SkillMd } from "./skill-md.ts";
export { canonicalLayout, canonicalZip, maxCanonicalArchiveBytes, type CanonicalEntry, type CanonicalLayout, type HeaderRun } from "./zip.ts";
