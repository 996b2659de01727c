import { BundleFormatError } from "./errors.ts";

export const MAX_SKILL_NAME_LENGTH = 128;

const NAME_PATTERN = /^[a-z0-9][a-z0-9_-]{0,127}$/;
const RESERVED_NAMES: ReadonlySet<string> = new Set(["skills", "skill"]);

/** Returns why `name` is not a valid skill name, or undefined when it is. */
export function validateSkillName(name: string): string | undefined {
  if (!NAME_PATTERN.test(name)) {
    return `${JSON.stringify(name)} must match ^[a-z0-9][a-z0-9_-]{0,127}$ (lowercase letters, digits, "_" and "-", at most ${MAX_SKILL_NAME_LENGTH})`;
  }
  // MCP tool names join the skill name and the tool with "__", so it must stay unambiguous.
  if (name.includes("__")) return `${JSON.stringify(name)} must not contain "__"`;
  if (RESERVED_NAMES.has(name)) return `${JSON.stringify(name)} is reserved`;
  return undefined;
}

/**
 * Best-effort skill name from a directory basename: lowercased, accents dropped, every run of
 * other characters turned into "-", "__" collapsed, separators trimmed, cut to 128. The result
 * may still be empty or reserved, so callers validate it like any other name.
 */
export function slugifySkillName(basename: string): string {
  const slug = basename
    .toLowerCase()
    .normalize("NFKD")
    .replace(/\p{M}/gu, "")
    .replace(/[^a-z0-9_-]+/g, "-")
    .replace(/_{2,}/g, "_");
  return trimSeparators(trimSeparators(slug).slice(0, MAX_SKILL_NAME_LENGTH));
}

function trimSeparators(slug: string): string {
  return slug.replace(/^[-_]+|[-_]+$/g, "");
}

export interface SkillNameSources {
  /** The caller's explicit `{ name }` option. */
  readonly name?: string | undefined;
  /** `name:` from the SKILL.md frontmatter. */
  readonly frontmatterName?: string | undefined;
  /** Basename of the local directory the skill was read from (Skill.fromDir only). */
  readonly directoryBasename?: string | undefined;
}

/**
 * Applies the name resolution order (explicit option, frontmatter, slugified directory
 * basename) and validates the winner; throws invalid_skill_name when there is none or it is
 * invalid. A lower-priority source is never used to rescue an invalid higher-priority one.
 */
export function resolveSkillName(sources: SkillNameSources): string {
  const name = sources.name ?? sources.frontmatterName ?? (sources.directoryBasename === undefined ? undefined : slugifySkillName(sources.directoryBasename));
  if (name === undefined) {
    throw new BundleFormatError("invalid_skill_name", "no skill name: pass a name option or set name: in the SKILL.md frontmatter");
  }
  const reason = validateSkillName(name);
  if (reason !== undefined) throw new BundleFormatError("invalid_skill_name", reason);
  return name;
}
