import type { JsonObject, MessageInitShape } from "@bufbuild/protobuf";
import type { RunInputSchema } from "../../gen/skillenv/sessions/v1/runs_pb.js";
import type { UploadResult } from "../assets.ts";
import { mapBounded } from "../map-bounded.ts";
import { Skill, type UploadedSkill } from "../skills/index.ts";
import { agentLoopMessage, type AgentLoop, type AgentLoopImplementation, type ResolvedAgentLoopImplementation } from "./agent-loop.ts";

/** Uploads at once per pass (skills, files), as for skill uploads and tool admission. */
const UPLOAD_CONCURRENCY = 4;

export interface RunModel {
  /** "anthropic" or "openai". */
  provider: string;
  /** The provider's model name, e.g. "claude-sonnet-4-6". */
  name: string;
  /** Largest reply, in tokens; the server's default is 4096. */
  maxTokens?: number;
  /** Passed to the provider as is, e.g. { temperature: 0.2 }. */
  parameters?: Record<string, unknown>;
}

/**
 * A skill for a run: a draft (upserted before the run is submitted, once per instance and
 * client), the name of a workspace skill, the result of an explicit `client.skills.upload`, or a
 * workspace skill pinned to one of its versions (`{ name, version }`; beyond the spec, whose
 * reference has no version: the server's docs/runs.md).
 */
export type RunSkill = Skill | string | UploadedSkill | PinnedSkill;

/** A workspace skill at one of its versions. */
export interface PinnedSkill {
  name: string;
  version: number;
}

/** A file staged under /workspace of the session's environments before the first turn. */
export type RunFile =
  /** Bytes, uploaded as a workspace asset before the run is submitted. */
  | { path: string; bytes: Uint8Array }
  /** An asset this workspace has already finalized. */
  | { path: string; assetSha256: string };

export interface RunOptions {
  /** The user's message. */
  message: string;
  model: RunModel;
  skills?: readonly RunSkill[];
  /** The API key per model provider, e.g. { anthropic: "sk-ant-..." }; for this run only, never returned (sealed at rest while the run runs, so that it can resume after a restart). */
  providerKeys: Readonly<Record<string, string>>;
  /**
   * Makes a resubmission return the existing run instead of starting another. Generated when
   * omitted, so that a submission whose answer was lost can be retried safely.
   */
  idempotencyKey?: string;
  /** Standing instructions for the model, part of its system prompt. */
  agentsMd?: string;
  /** Paths relative to /workspace, e.g. "data/report.csv". */
  files?: readonly RunFile[];
  /** Model calls at most; the server's default and upper bound is SERVICE_RUN_MAX_ROUNDS. */
  maxRounds?: number;
  /**
   * A custom agent loop in a service environment of the session, in place of the service's
   * default loop; its component or program is admitted first when the workspace lacks it.
   */
  agentLoop?: AgentLoop;
}

/** A run as submitted: always with an idempotency key. */
export type RunSubmission = MessageInitShape<typeof RunInputSchema> & { idempotencyKey: string };

/** What preparing a run uploads and admits through: the client's skills, assets and implementation flows. */
export interface RunUploads {
  uploadSkill(skill: Skill): Promise<UploadedSkill>;
  uploadAsset(bytes: Uint8Array): Promise<UploadResult>;
  /** Admits what an agent loop's implementation needs, as for a tool placement's, and returns it by id. */
  admitAgentLoop(implementation: AgentLoopImplementation): Promise<ResolvedAgentLoopImplementation>;
}

/**
 * Turns run options into a submission (spec §4.1): draft skills are upserted, file bytes
 * uploaded and the agent loop's component or program admitted first, each pass with bounded
 * concurrency and all at once (rule 4), so the submission carries only `{ kind: "skill", name }`
 * references, asset hashes and ids. The agent loop is checked (checkAgentLoop and its
 * environment) by the caller, which knows the session.
 */
export async function prepareRunInput(options: RunOptions, uploads: RunUploads): Promise<RunSubmission> {
  const loop = options.agentLoop;
  const [skillReferences, files, agentloop] = await Promise.all([
    mapBounded(options.skills ?? [], UPLOAD_CONCURRENCY, (skill) => skillReference(skill, uploads)),
    mapBounded(options.files ?? [], UPLOAD_CONCURRENCY, (file) => stagedFile(file, uploads)),
    loop && uploads.admitAgentLoop(loop.implementation).then((implementation) => agentLoopMessage(loop, implementation)),
  ]);
  const { provider, name, maxTokens, parameters } = options.model;
  // Zero and empty fields take the server's defaults (4096 tokens, SERVICE_RUN_MAX_ROUNDS, no instructions).
  return {
    model: { provider, name, maxTokens: maxTokens ?? 0, parameters: parameters as JsonObject | undefined },
    skills: skillReferences.map((reference) => ({ kind: "skill", ...reference })),
    message: options.message,
    agentsMd: options.agentsMd ?? "",
    files,
    providerKeys: { ...options.providerKeys },
    idempotencyKey: options.idempotencyKey || crypto.randomUUID(),
    maxRounds: options.maxRounds ?? 0,
    agentloop,
  };
}

async function skillReference(skill: RunSkill, uploads: RunUploads): Promise<{ name: string; version?: number }> {
  if (typeof skill === "string") return { name: skill };
  if (skill instanceof Skill) return { name: (await uploads.uploadSkill(skill)).name };
  if ("version" in skill && typeof skill.version === "number") return { name: skill.name, version: skill.version };
  return { name: skill.name };
}

async function stagedFile(file: RunFile, uploads: RunUploads): Promise<{ path: string; assetSha256: string }> {
  if ("bytes" in file) return { path: file.path, assetSha256: (await uploads.uploadAsset(file.bytes)).sha256 };
  return { path: file.path, assetSha256: file.assetSha256 };
}
