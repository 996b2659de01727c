import type { ToolDefinition } from "../models/index.ts";
import { SKILLS_TOOL_NAME } from "../sessions/index.ts";

/**
 * The workspace directory a run's skills' files are staged in, `skills/<name>/` (SPEC 4.2): each
 * run's staging replaces it, so that it holds exactly that run's skills. A run's own files may not
 * go there (submission.ts).
 */
export const SKILLS_DIRECTORY = "skills";

/** Where a skill's files are, as the model is told: only when they were staged somewhere. */
export const STAGED_SKILL_FILES = `/workspace/${SKILLS_DIRECTORY}/<name>/`;

/** A skill as a run sees it: its snapshot, with SKILL.md read out for `load`. */
export interface RunSkill {
  name: string;
  description: string;
  contentHash: string;
  skillMd: string;
  /** Every file of the bundle, SKILL.md included, for staging under /workspace/skills/<name>/ (SKILLS_DIRECTORY). */
  files: Map<string, Uint8Array>;
}

/**
 * The `skills` meta-tool (SPEC 4.2), offered exactly when a run references at least one skill.
 * Its description says where a skill's other files are only when `filesStaged`: when the run's
 * skills were staged into a workspace of the session (none has one: nothing to point at).
 */
export function skillsTool(filesStaged: boolean): ToolDefinition {
  return {
    name: SKILLS_TOOL_NAME,
    description:
      'Lists and loads the skills available in this run. {"action":"list"} returns each skill\'s name and description; ' +
      '{"action":"load","name":"<skill>"} returns that skill\'s SKILL.md instructions.' +
      (filesStaged ? ` A skill's other files are under ${STAGED_SKILL_FILES}.` : ""),
    inputSchema: {
      type: "object",
      properties: { action: { type: "string", enum: ["list", "load"] }, name: { type: "string" } },
      required: ["action"],
      additionalProperties: false,
    },
  };
}

export type SkillsToolResult = { ok: true; output: string } | { ok: false; code: string; message: string };

/** Answers one call of the meta-tool from the run's snapshot; anything else is a clear tool error. */
export function callSkillsTool(input: unknown, skills: readonly RunSkill[]): SkillsToolResult {
  const request = input as { action?: unknown; name?: unknown } | null;
  if (typeof request !== "object" || request === null) return invalidInput();
  if (request.action === "list") return { ok: true, output: JSON.stringify({ skills: skills.map(({ name, description }) => ({ name, description })) }) };
  if (request.action !== "load" || typeof request.name !== "string") return invalidInput();
  const skill = skills.find((candidate) => candidate.name === request.name);
  if (!skill)
    return {
      ok: false,
      code: "skill_not_found",
      message: `no skill named ${JSON.stringify(request.name)} is available in this run; list them with {"action":"list"}`,
    };
  return { ok: true, output: skill.skillMd };
}

function invalidInput(): SkillsToolResult {
  return { ok: false, code: "invalid_input", message: 'expected {"action":"list"} or {"action":"load","name":"<skill>"}' };
}
