import type { SentOperation } from "../journal/index.ts";
import type { Attributes } from "../tracing/index.ts";

/**
 * A tool call is named as the GenAI conventions name one, `execute_tool <tool>`; a run's agent
 * loop `execute agent_loop`; any other operation by its kind (`setup`, `stage`, ...).
 */
export function operationSpanName(operation: SentOperation): string {
  if (operation.kind !== "execute") return operation.kind;
  return operation.tool !== undefined ? `execute_tool ${operation.tool}` : "execute agent_loop";
}

/** What a session operation's span says of it: ids, names and kinds, never its input. */
export function operationAttributes(sessionId: string, environmentKind: string, operation: SentOperation): Attributes {
  return {
    "skillenv.session.id": sessionId,
    "skillenv.operation.id": operation.operationId,
    "skillenv.operation.kind": operation.kind,
    "skillenv.environment.name": operation.environment,
    "skillenv.environment.kind": environmentKind,
    ...(operation.runId !== undefined ? { "skillenv.run.id": operation.runId } : {}),
    ...(operation.tool !== undefined ? { "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": operation.tool } : {}),
  };
}
