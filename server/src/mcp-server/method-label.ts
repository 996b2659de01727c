/**
 * The JSON-RPC methods a client sends an MCP server (MCP 2025-11-25, and the skills extension's),
 * the only ones a request's procedure names: a method is the client's text, and metrics' labels
 * and log lines take a bounded set of values.
 */
const CLIENT_METHODS: ReadonlySet<string> = new Set([
  "initialize",
  "ping",
  "tools/list",
  "tools/call",
  "resources/list",
  "resources/read",
  "resources/templates/list",
  "resources/subscribe",
  "resources/unsubscribe",
  "prompts/list",
  "prompts/get",
  "completion/complete",
  "logging/setLevel",
  "tasks/get",
  "tasks/result",
  "tasks/list",
  "tasks/cancel",
  "skills/list",
  "skills/get",
  "notifications/initialized",
  "notifications/cancelled",
  "notifications/progress",
  "notifications/roots/list_changed",
  "notifications/tasks/status",
]);

/** A request's procedure before its message is read (a refusal, or a body that is not one JSON-RPC message). */
export const MCP_UNREAD_PROCEDURE = "mcp/none";

/**
 * The procedure of a request carrying `message`: `mcp/<method>` for a method of the list,
 * `mcp/response` for a client's answer (no method), `mcp/other` for any other method.
 */
export function mcpProcedure(message: unknown): string {
  const method = typeof message === "object" && message !== null ? (message as { method?: unknown }).method : undefined;
  if (method === undefined) return "mcp/response";
  return typeof method === "string" && CLIENT_METHODS.has(method) ? `mcp/${method}` : "mcp/other";
}
