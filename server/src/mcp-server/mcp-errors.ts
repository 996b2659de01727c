import { ConnectError } from "@connectrpc/connect";
import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";
import { describeError, stableCodeOf, type ErrorCode as StableCode } from "../errors/index.ts";

/** Codes by which the caller named something this workspace does not have, or named it wrongly. */
const INVALID_PARAMS: ReadonlySet<StableCode> = new Set(["invalid_argument", "invalid_skill_name", "skill_not_found", "tool_not_found"]);

/**
 * A service error as the JSON-RPC error MCP answers with: what the caller named wrongly is
 * -32602 (Invalid params, as the skills extension and the base protocol ask for unknown skills,
 * resources and tools), anything else -32603 (Internal error). Either way `data.code` is the
 * catalogue's stable code and the message is what the JSON API would say (never internals).
 */
export function asMcpError(error: unknown): McpError {
  if (error instanceof McpError) return error;
  const { body } = describeError(error);
  const code = error instanceof ConnectError && INVALID_PARAMS.has(stableCodeOf(error)) ? ErrorCode.InvalidParams : ErrorCode.InternalError;
  return new McpError(code, body.message, { code: body.code });
}

export function invalidParams(message: string): McpError {
  return new McpError(ErrorCode.InvalidParams, message, { code: "invalid_argument" });
}
