import { create, fromJson, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { ApprovalSchema, RunSchema, type Approval, type Run } from "../../../gen/skillenv/sessions/v1/runs_pb.js";
import type { ApprovalRecord } from "./approvals.ts";
import type { RunRecord } from "./records.ts";

export function runMessage(record: RunRecord): Run {
  return create(RunSchema, {
    id: record.id,
    sessionId: record.sessionId,
    status: record.status,
    model: {
      provider: record.model.provider,
      name: record.model.name,
      maxTokens: record.model.maxTokens,
      parameters: record.model.parameters as JsonObject,
      disablePromptCache: record.model.disablePromptCache ?? false,
    },
    skills: record.skills,
    createdAt: timestampFromMs(Date.parse(record.createdAt)),
    ...(record.finishedAt ? { finishedAt: timestampFromMs(Date.parse(record.finishedAt)) } : {}),
    usage: {
      inputTokens: BigInt(record.usage.inputTokens),
      outputTokens: BigInt(record.usage.outputTokens),
      cacheCreationInputTokens: BigInt(record.usage.cacheCreationInputTokens ?? 0),
      cacheReadInputTokens: BigInt(record.usage.cacheReadInputTokens ?? 0),
      reasoningTokens: BigInt(record.usage.reasoningTokens ?? 0),
    },
    stopReason: record.stopReason ?? "",
    rounds: record.rounds,
    toolCalls: record.toolCalls,
    outputText: record.outputText,
    ...(record.error
      ? {
          error: {
            code: record.error.code,
            message: record.error.message,
            retryable: record.error.retryable ?? false,
            details: record.error.details ?? {},
          },
        }
      : {}),
    idempotencyHash: record.idempotencyHash,
    idempotencyKey: record.idempotencyKey ?? "",
  });
}

export function approvalMessage(record: ApprovalRecord): Approval {
  return create(ApprovalSchema, {
    id: record.id,
    runId: record.runId,
    round: record.round,
    callId: record.callId,
    tool: record.tool,
    input: fromJson(ValueSchema, (record.input ?? null) as JsonValue),
    status: record.status,
    requestedAt: timestampFromMs(Date.parse(record.requestedAt)),
    ...(record.decidedAt ? { decidedAt: timestampFromMs(Date.parse(record.decidedAt)) } : {}),
    ...(record.decidedBy ? { decidedBy: record.decidedBy } : {}),
    message: record.message ?? "",
  });
}
