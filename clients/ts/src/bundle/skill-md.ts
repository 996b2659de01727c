import { BundleFormatError } from "./errors.ts";
import { FRONTMATTER_LIMITS, parseFrontmatter } from "./frontmatter.ts";

export const SKILL_MD_PATH = "SKILL.md";
export const MAX_DESCRIPTION_LENGTH = 2048;

/** SKILL.md split into its frontmatter fields and its Markdown body. */
export interface SkillMd {
  /** `name:` from the frontmatter, when present. Not validated here: an explicit name may override it. */
  readonly name?: string;
  /** Trimmed; 1 to 2048 Unicode code points. */
  readonly description: string;
  /** The whole frontmatter mapping, unknown keys included. */
  readonly frontmatter: Readonly<Record<string, unknown>>;
  /** Everything after the closing "---" line. */
  readonly body: string;
}

/** Lines end at "\n"; a "\r" before it is ignored, so CRLF files read the same. */
const OPENING_LINE = /^\uFEFF?---[ \t]*\r?\n/;
const DELIMITER_LINE = /^---[ \t]*\r?$/;

const utf8 = new TextDecoder("utf-8", { fatal: true });

/** SKILL.md's bytes as text, a leading byte-order mark dropped; frontmatter_invalid when they are not UTF-8. */
export function decodeSkillMd(bytes: Uint8Array): string {
  try {
    return utf8.decode(bytes);
  } catch {
    throw new BundleFormatError("frontmatter_invalid", `${SKILL_MD_PATH} is not valid UTF-8`);
  }
}

/** Parses SKILL.md; throws BundleFormatError (frontmatter_*, description_*) when it breaks the rules. */
export function parseSkillMd(text: string): SkillMd {
  const { yamlText, body } = splitFrontmatter(text);
  const frontmatter = parseFrontmatter(yamlText);
  const name = optionalString(frontmatter, "name");
  const description = readDescription(frontmatter);
  return name === undefined ? { description, frontmatter, body } : { name, description, frontmatter, body };
}

/**
 * Finds the closing line. The search gives up once the block is longer than the frontmatter may
 * be (a UTF-16 unit is at least one UTF-8 byte), so a SKILL.md that never closes is not scanned whole.
 */
function splitFrontmatter(text: string): { yamlText: string; body: string } {
  const opening = OPENING_LINE.exec(text);
  if (opening === null) {
    throw new BundleFormatError("frontmatter_missing", `${SKILL_MD_PATH} must start with a "---" line opening a YAML frontmatter block`);
  }
  const yamlStart = opening[0].length;
  for (let start = yamlStart; start - yamlStart <= FRONTMATTER_LIMITS.maxBytes; ) {
    const newline = text.indexOf("\n", start);
    const end = newline === -1 ? text.length : newline;
    if (DELIMITER_LINE.test(text.slice(start, end))) {
      return { yamlText: text.slice(yamlStart, start), body: newline === -1 ? "" : text.slice(newline + 1) };
    }
    if (newline === -1) throw new BundleFormatError("frontmatter_invalid", `the ${SKILL_MD_PATH} frontmatter is never closed by a "---" line`);
    start = newline + 1;
  }
  throw new BundleFormatError("frontmatter_too_large", `the ${SKILL_MD_PATH} frontmatter is not closed within ${FRONTMATTER_LIMITS.maxBytes} bytes`);
}

/** A key whose value is null counts as absent, the way YAML writes "name:" with nothing after it. */
function optionalString(frontmatter: Record<string, unknown>, key: string): string | undefined {
  const value = frontmatter[key];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "string") throw new BundleFormatError("frontmatter_invalid", `frontmatter "${key}" must be a string`);
  return value;
}

function readDescription(frontmatter: Record<string, unknown>): string {
  const description = optionalString(frontmatter, "description")?.trim();
  if (description === undefined || description === "") {
    throw new BundleFormatError("description_missing", `the ${SKILL_MD_PATH} frontmatter needs a non-empty description`);
  }
  const length = [...description].length;
  if (length > MAX_DESCRIPTION_LENGTH) {
    throw new BundleFormatError("description_too_long", `the description has ${length} characters; at most ${MAX_DESCRIPTION_LENGTH} are allowed`);
  }
  return description;
}
