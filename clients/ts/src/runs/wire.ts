import { toJson, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import type { Approval as ApprovalMessage, Run as RunMessage } from "../../gen/skillenv/sessions/v1/runs_pb.js";
import { required } from "../sessions/wire.ts";

// The client's own shape of a run as the server reports it, and its conversion from the message.

export type RunStatus = "running" | "completed" | "failed" | "cancelled";

/** A skill as the run snapshotted it at submit (spec §3 rule 8). */
export interface RunSkillSnapshot {
  name: string;
  /** The bundle's SHA-256 at submit. */
  contentHash: string;
  description: string;
  /** The skill version the run used (0 for a skill bound before the server kept versions). */
  version: number;
  /** Whether the submission pinned that version. */
  pinned: boolean;
}

export interface RunUsage {
  inputTokens: number;
  outputTokens: number;
}

/** A run as the server last reported it. */
export interface RunRecord {
  id: string;
  sessionId: string;
  status: RunStatus;
  model: { provider: string; name: string; maxTokens: number; parameters: JsonObject };
  skills: RunSkillSnapshot[];
  createdAt: Date;
  /** Unset while the run is running. */
  finishedAt: Date | undefined;
  /** Tokens used by all the run's model calls. */
  usage: RunUsage;
  /** Why the model ended the turn ("end_turn", "max_tokens", ...); unset unless completed. */
  stopReason: string | undefined;
  /** Model calls made. */
  rounds: number;
  /** Tool calls dispatched, the skills tool included. */
  toolCalls: number;
  /** The model's final text; empty unless completed. */
  outputText: string;
  /** Why a failed or cancelled run ended (e.g. model_auth_failed, max_rounds_exceeded, cancelled). */
  error: { code: string; message: string } | undefined;
  /** The key the run was submitted with; the client generates one when none is given. */
  idempotencyKey: string;
  /** Equal for equal submissions, skills counted by name (and pinned version). */
  idempotencyHash: string;
}

/** The event types that end a run: exactly one of them is a run's last event. */
const RUN_END_TYPES: ReadonlySet<string> = new Set(["turn.completed", "turn.failed", "run.cancelled"]);

export function endsRun(type: string): boolean {
  return RUN_END_TYPES.has(type);
}

export function runRecordFrom(message: RunMessage): RunRecord {
  const model = required(message.model, "the run's model");
  return {
    id: message.id,
    sessionId: message.sessionId,
    status: message.status as RunStatus,
    model: { provider: model.provider, name: model.name, maxTokens: model.maxTokens, parameters: model.parameters ?? {} },
    skills: message.skills.map(({ name, contentHash, description, version, pinned }) => ({ name, contentHash, description, version, pinned })),
    createdAt: timestampDate(required(message.createdAt, "the run's creation time")),
    finishedAt: message.finishedAt && timestampDate(message.finishedAt),
    // Token counts are 64-bit on the wire; a run's fit a JavaScript number exactly.
    usage: { inputTokens: Number(message.usage?.inputTokens ?? 0n), outputTokens: Number(message.usage?.outputTokens ?? 0n) },
    stopReason: message.stopReason || undefined,
    rounds: message.rounds,
    toolCalls: message.toolCalls,
    outputText: message.outputText,
    error: message.error && { code: message.error.code, message: message.error.message },
    idempotencyKey: message.idempotencyKey,
    idempotencyHash: message.idempotencyHash,
  };
}

export type ApprovalStatus = "pending" | "approved" | "denied" | "expired";

/**
 * A run's call of a tool placed with `approval: "always"`: waiting for a person's decision
 * (`pending`), decided once (`approved`, `denied`), or `expired` (the run ended first; the tool
 * was not called).
 */
export interface ApprovalRecord {
  id: string;
  runId: string;
  /** The model call whose reply asked for the tool. */
  round: number;
  /** The model's id of the tool call. */
  callId: string;
  tool: string;
  /** The input the model gave the tool. */
  input: JsonValue;
  status: ApprovalStatus;
  requestedAt: Date;
  /** Unset while pending or expired. */
  decidedAt: Date | undefined;
  /** Who decided: the deciding key's workspace and the label the caller gave. */
  decidedBy: { workspace: string; label: string } | undefined;
  /** A denial's message, as the model received it. */
  message: string;
}

export function approvalRecordFrom(message: ApprovalMessage): ApprovalRecord {
  return {
    id: message.id,
    runId: message.runId,
    round: message.round,
    callId: message.callId,
    tool: message.tool,
    input: message.input === undefined ? null : toJson(ValueSchema, message.input),
    status: message.status as ApprovalStatus,
    requestedAt: timestampDate(required(message.requestedAt, "the approval's request time")),
    decidedAt: message.decidedAt && timestampDate(message.decidedAt),
    decidedBy: message.decidedBy && { workspace: message.decidedBy.workspace, label: message.decidedBy.label },
    message: message.message,
  };
}
