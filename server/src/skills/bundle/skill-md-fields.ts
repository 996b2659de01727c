import type { SkillMd } from "@skillenv/client/bundle";
import type { SkillMdFields } from "./read.ts";

/**
 * What a parsed SKILL.md contributes to a skill, as plain JSON: a worker thread posts it, and the
 * MCP endpoint answers the frontmatter as JSON (a YAML date becomes its ISO text).
 */
export function skillMdFields({ name, description, frontmatter }: SkillMd): SkillMdFields {
  const json = JSON.parse(JSON.stringify(frontmatter)) as Record<string, unknown>;
  return name === undefined ? { description, frontmatter: json } : { name, description, frontmatter: json };
}
