import { createHash } from "node:crypto";
import { toJson, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import { validateBundlePath, validateSkillName } from "@skillenv/client/bundle";
import { ImplementationSchema } from "../../../gen/skillenv/sessions/v1/common_pb.js";
import type { RunInput } from "../../../gen/skillenv/sessions/v1/runs_pb.js";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { serviceError } from "../errors/index.ts";
import { checkJsonSize, checkTextSize, FIELD_SETTING } from "../sessions/index.ts";
import { SKILLS_DIRECTORY } from "./skills-tool.ts";

/** Limits of a submission that are facts of the format, not deployment settings. */
export const MAX_RUN_SKILLS = 64;
export const MAX_RUN_FILES = 256;
export const MAX_IDEMPOTENCY_KEY_CHARS = 128;
export const DEFAULT_MAX_TOKENS = 4096;
const PAYLOAD_SETTING = "SERVICE_JOURNAL_MAX_PAYLOAD_BYTES";
/** The model parameters the service sets itself; runs.proto (Model.parameters) and docs/runs.md list them too (tested). */
export const RESERVED_PARAMETERS: ReadonlySet<string> = new Set([
  "model",
  "messages",
  "system",
  "tools",
  "tool_choice",
  "stream",
  "stream_options",
  "max_tokens",
  "max_completion_tokens",
  "n",
  // The Responses API's: the conversation, system prompt and token bound are the run's, and
  // nothing of it is kept at the provider (store: false, no server-side conversation to continue).
  "input",
  "instructions",
  "max_output_tokens",
  "store",
  "previous_response_id",
  "conversation",
]);

export interface SubmissionRules {
  /** Providers this server can call. */
  providers: ReadonlySet<string>;
  /** SERVICE_RUN_MAX_ROUNDS: default and upper bound of max_rounds. */
  maxRounds: number;
  /**
   * Largest message and agentsMd, as UTF-8 (SERVICE_JOURNAL_MAX_PAYLOAD_BYTES): the message is
   * journaled, and agentsMd is held for the run and sent with every model request.
   */
  maxMessageBytes: number;
  /**
   * SERVICE_MAX_FIELD_BYTES: largest model name, model parameters and agent loop configuration
   * and implementation, as JSON text (the run's record keeps the model; every request sends it).
   */
  maxFieldBytes: number;
}

/** A run's model, as submitted and recorded. `disablePromptCache` is there only when true, so that older hashes stay what they were. */
export interface RunModel {
  provider: string;
  name: string;
  maxTokens: number;
  parameters: Record<string, unknown>;
  disablePromptCache?: true;
}

/** A checked submission; the provider keys stay apart and are never stored. */
export interface Submission {
  model: RunModel;
  agentloop: { environment: string; implementation: JsonValue; configuration: string } | undefined;
  skills: string[];
  /** Versions the submission pins, by skill name (beyond SPEC 2.2); empty when none is pinned. */
  pins: Record<string, number>;
  message: string;
  agentsMd: string;
  files: Array<{ path: string; assetSha256: string }>;
  maxRounds: number;
  idempotencyKey: string | undefined;
  idempotencyHash: string;
  apiKey: string;
}

/**
 * Validates a run's input (invalid_argument naming the field, field_too_large for one above its
 * limit, provider_key_missing) and computes its idempotency hash. Nothing here reads storage: skills and files are resolved by
 * the caller.
 */
export function checkSubmission(input: RunInput | undefined, rules: SubmissionRules): Submission {
  if (!input) invalid("the request needs a run");
  const model = checkModel(input, rules);
  const apiKey = input.providerKeys[model.provider];
  if (!apiKey) throw serviceError("provider_key_missing", `provider_keys has no key for the model's provider ${JSON.stringify(model.provider)}`);
  if (input.message === "") invalid("message must not be empty");
  checkTextSize("message", input.message, rules.maxMessageBytes, PAYLOAD_SETTING);
  checkTextSize("agentsMd", input.agentsMd, rules.maxMessageBytes, PAYLOAD_SETTING);
  const submission = {
    model,
    agentloop: checkAgentLoop(input, rules),
    ...checkSkills(input),
    message: input.message,
    agentsMd: input.agentsMd,
    files: checkFiles(input),
    maxRounds: checkMaxRounds(input.maxRounds, rules.maxRounds),
    idempotencyKey: checkIdempotencyKey(input.idempotencyKey),
  };
  return { ...submission, idempotencyHash: idempotencyHash(submission), apiKey };
}

/**
 * The idempotency hash: SHA-256 of the canonical JSON (keys sorted at every level, no
 * whitespace) of `{v: 1, model, agentloop, skills, pins, message, agentsMd, files, maxRounds}`,
 * skills by name (SPEC 4.1.5), and `pins` (name to pinned version) only when a version is
 * pinned, so that unpinned submissions hash as they always did. Provider keys and the
 * idempotency key are not part of it (docs/runs.md).
 */
export function idempotencyHash(submission: Omit<Submission, "idempotencyHash" | "apiKey" | "idempotencyKey">): string {
  const { model, agentloop, skills, message, agentsMd, files, maxRounds } = submission;
  const pins = Object.keys(submission.pins).length > 0 ? submission.pins : undefined;
  const canonical = canonicalJson({ v: 1, model, agentloop: agentloop ?? null, skills, pins, message, agentsMd, files, maxRounds } as unknown as JsonValue);
  return createHash("sha256").update(canonical).digest("hex");
}

export function canonicalJson(value: JsonValue): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const keys = Object.keys(value)
      .filter((key) => value[key] !== undefined)
      .sort();
    return `{${keys.map((key) => `${JSON.stringify(key)}:${canonicalJson(value[key] as JsonValue)}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

function checkModel(input: RunInput, rules: SubmissionRules): Submission["model"] {
  const model = input.model;
  if (!model || model.name === "") invalid("model needs a provider and a name");
  if (!rules.providers.has(model.provider)) invalid(`model.provider must be one of ${[...rules.providers].join(", ")}`);
  if (model.maxTokens < 0) invalid("model.max_tokens must be positive");
  checkTextSize("model.name", model.name, rules.maxFieldBytes, FIELD_SETTING);
  const parameters = (model.parameters ?? {}) as JsonObject;
  checkJsonSize("model.parameters", parameters, rules.maxFieldBytes, FIELD_SETTING);
  const reserved = Object.keys(parameters).find((key) => RESERVED_PARAMETERS.has(key));
  if (reserved !== undefined) invalid(`model.parameters may not set ${reserved}; the service sets it`);
  return {
    provider: model.provider,
    name: model.name,
    maxTokens: model.maxTokens || DEFAULT_MAX_TOKENS,
    parameters,
    ...(model.disablePromptCache ? { disablePromptCache: true as const } : {}),
  };
}

function checkAgentLoop(input: RunInput, rules: SubmissionRules): Submission["agentloop"] {
  const loop = input.agentloop;
  if (!loop) return undefined;
  if (!loop.implementation) invalid("agentloop needs an implementation");
  const implementation = toJson(ImplementationSchema, loop.implementation);
  checkJsonSize("agentloop.implementation", implementation, rules.maxFieldBytes, FIELD_SETTING);
  const configuration = loop.configuration ? JSON.stringify(toJson(ValueSchema, loop.configuration)) : "{}";
  checkTextSize("agentloop.configuration", configuration, rules.maxFieldBytes, FIELD_SETTING);
  return { environment: loop.environment, implementation, configuration };
}

function checkSkills(input: RunInput): Pick<Submission, "skills" | "pins"> {
  if (input.skills.length > MAX_RUN_SKILLS) invalid(`a run references at most ${MAX_RUN_SKILLS} skills`);
  const names: string[] = [];
  const pins: Record<string, number> = {};
  for (const reference of input.skills) {
    if (reference.kind !== "skill") invalid(`skills[].kind must be "skill", got ${JSON.stringify(reference.kind)}`);
    const problem = validateSkillName(reference.name);
    if (problem) throw serviceError("invalid_skill_name", problem);
    if (names.includes(reference.name)) invalid(`skill ${reference.name} is referenced twice`);
    if (reference.version < 0) invalid(`skills[].version of ${reference.name} must be a version number (1 or more), or unset for the current one`);
    names.push(reference.name);
    if (reference.version > 0) pins[reference.name] = reference.version;
  }
  return { skills: names, pins };
}

function checkFiles(input: RunInput): Submission["files"] {
  if (input.files.length > MAX_RUN_FILES) invalid(`a run stages at most ${MAX_RUN_FILES} files`);
  const files: Submission["files"] = [];
  for (const { path, assetSha256 } of input.files) {
    const problem = validateBundlePath(path);
    if (problem !== undefined) invalid(`files[].path ${JSON.stringify(path)}: ${problem}`);
    if (path === SKILLS_DIRECTORY || path.startsWith(`${SKILLS_DIRECTORY}/`))
      invalid(`files[].path ${JSON.stringify(path)}: ${SKILLS_DIRECTORY}/ is where skills are staged`);
    if (files.some((file) => file.path === path)) invalid(`files[].path ${JSON.stringify(path)} is given twice`);
    files.push({ path, assetSha256 });
  }
  return files;
}

function checkMaxRounds(requested: number, limit: number): number {
  if (requested < 0 || requested > limit) invalid(`max_rounds must be between 1 and ${limit}`);
  return requested || limit;
}

function checkIdempotencyKey(key: string): string | undefined {
  if (key === "") return undefined;
  if (key.length > MAX_IDEMPOTENCY_KEY_CHARS || !/^[\x21-\x7e]+$/.test(key)) {
    invalid(`idempotency_key must be 1-${MAX_IDEMPOTENCY_KEY_CHARS} printable ASCII characters without spaces`);
  }
  return key;
}

function invalid(message: string): never {
  throw serviceError("invalid_argument", message);
}
