/**
 * The stable codes a bundle can be refused with. They are the same strings as the server's
 * error catalogue, so a client can report a refusal before uploading and the server can pass
 * the code through unchanged.
 */
export type BundleErrorCode =
  | "bundle_not_zip"
  | "bundle_not_canonical"
  | "bundle_missing_skill_md"
  | "frontmatter_missing"
  | "frontmatter_invalid"
  | "frontmatter_too_large"
  | "description_missing"
  | "description_too_long"
  | "bundle_path_invalid"
  | "bundle_duplicate_entry"
  | "bundle_special_entry"
  | "bundle_encrypted"
  | "bundle_too_many_entries"
  | "bundle_entry_too_large"
  | "bundle_too_large"
  | "bundle_compression_ratio"
  | "invalid_skill_name";

/** A bundle, SKILL.md or skill name breaks the format; `code` says which rule. */
export class BundleFormatError extends Error {
  readonly code: BundleErrorCode;

  constructor(code: BundleErrorCode, message: string) {
    super(message);
    this.name = "BundleFormatError";
    this.code = code;
  }
}
