import { ConnectError } from "@connectrpc/connect";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { CallToolRequestSchema, CancelledNotificationSchema, ListToolsRequestSchema, type CallToolResult, type Tool } from "@modelcontextprotocol/sdk/types.js";
import type { TerminalReceipt } from "../environments/index.ts";
import { describeError, stableCodeOf, type ErrorCode } from "../errors/index.ts";
import type { Sessions, ToolRecord } from "../sessions/index.ts";
import type { CallsInFlight } from "./calls-in-flight.ts";
import { asMcpError } from "./mcp-errors.ts";
import { SERVER_INFO } from "./server-info.ts";

/** The `_meta` keys of a tool result: the journal's operation, how it ended, the stable code. */
export const META = { operationId: "skillenv/operationId", outcome: "skillenv/outcome", code: "skillenv/code", retryable: "skillenv/retryable" } as const;

/**
 * Refusals of CallTool that a model can act on, answered as a tool result with isError (MCP's
 * "tool execution error") rather than a protocol error. They come before the journal: nothing ran.
 */
const REFUSED_AS_RESULT: ReadonlySet<ErrorCode> = new Set(["session_ended", "environment_not_ready", "input_too_large", "input_too_deep"]);

export interface SessionToolsServerOptions {
  workspace: string;
  sessionId: string;
  sessions: Sessions;
  /** The calls in flight on this process's session endpoints, which a notifications/cancelled names. */
  calls: CallsInFlight;
  /** Aborts when the client leaves before the answer is complete (it closed its response stream). */
  clientLeft: AbortSignal;
}

/**
 * A session's placed tools over MCP. `tools/list` answers the placements as the session holds
 * them; `tools/call` is the session's CallTool (Sessions.callTool): journaled before it is sent,
 * sent once, ended by one terminal receipt that the session's events show like any call's. The
 * receipt becomes the result: returned as content (and structuredContent for an object), a
 * failure as isError with its code, unknown as isError saying the outcome is unknown.
 *
 * A call is withdrawn when its client sends notifications/cancelled naming it or leaves before
 * the answer: the session then sends its environment a journaled cancel (as for a cancelled run),
 * and the call ends by its own receipt, which the session's events keep.
 */
export function sessionToolsServer({ workspace, sessionId, sessions, calls, clientLeft }: SessionToolsServerOptions): Server {
  const server = new Server(SERVER_INFO, {
    capabilities: { tools: {} },
    instructions: `This server serves the tools of session ${sessionId} of the skillenv service: each call runs sandboxed in the session's environments and is journaled in its events.`,
  });

  server.setRequestHandler(ListToolsRequestSchema, async () => {
    try {
      const { tools } = await sessions.get(workspace, sessionId);
      return { tools: tools.map(mcpTool) };
    } catch (error) {
      throw asMcpError(error);
    }
  });

  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    const input = JSON.stringify(request.params.arguments ?? {});
    const progressToken = request.params._meta?.progressToken;
    const onProgress =
      progressToken === undefined
        ? undefined
        : progressNotifier((params) => {
            // Best effort, as progress is: a client that left misses it, the journal keeps it.
            extra.sendNotification({ method: "notifications/progress", params: { progressToken, ...params } }).catch(() => undefined);
          });
    const withdrawn = new AbortController();
    const untrack = calls.track(workspace, sessionId, extra.requestId, withdrawn);
    const signal = AbortSignal.any([withdrawn.signal, extra.signal, clientLeft]);
    try {
      const { operationId, receipt } = await sessions.callTool(workspace, sessionId, request.params.name, {
        input,
        signal,
        ...(onProgress ? { onProgress } : {}),
      });
      return toolResult(operationId, receipt);
    } catch (error) {
      if (error instanceof ConnectError && REFUSED_AS_RESULT.has(stableCodeOf(error))) return refusal(error);
      throw asMcpError(error);
    } finally {
      untrack();
    }
  });

  // The call it names is in flight under another request, answered by another server instance.
  server.setNotificationHandler(CancelledNotificationSchema, (notification) => {
    const { requestId, reason } = notification.params;
    if (requestId !== undefined) calls.cancel(workspace, sessionId, requestId, reason ?? "the MCP client cancelled the call");
  });

  return server;
}

/** The longest message a progress notification carries, in characters. */
const MAX_PROGRESS_MESSAGE = 4096;

interface ProgressParams {
  progress: number;
  total?: number;
  message?: string;
}

/**
 * A call's progress reports (JSON text) as MCP progress, whose `progress` must grow with every
 * notification: a report with a numeric `progress` (an MCP environment's, `{"progress", "total",
 * "message"}`) keeps its numbers when they grow, and is dropped when they do not; any other report
 * counts one step on from the last and is its message.
 */
export function progressNotifier(notify: (params: ProgressParams) => void): (data: string) => void {
  let last = 0;
  return (data) => {
    let value: unknown;
    try {
      value = JSON.parse(data);
    } catch {
      value = data;
    }
    const report = typeof value === "object" && value !== null ? (value as Record<string, unknown>) : undefined;
    if (typeof report?.progress === "number") {
      if (!(report.progress > last)) return;
      last = report.progress;
      const total = typeof report.total === "number" ? { total: report.total } : {};
      const message = typeof report.message === "string" ? { message: report.message.slice(0, MAX_PROGRESS_MESSAGE) } : {};
      notify({ progress: last, ...total, ...message });
      return;
    }
    last = Math.floor(last) + 1;
    notify({ progress: last, message: (typeof value === "string" ? value : data).slice(0, MAX_PROGRESS_MESSAGE) });
  };
}

/**
 * A placement as an MCP tool. MCP's arguments are always an object, so a placement whose schema
 * is not an object schema (or has none) is offered as `{"type": "object"}` and gets the
 * arguments object as its input.
 */
function mcpTool(tool: ToolRecord): Tool {
  const schema = parseSchema(tool.inputSchema);
  const inputSchema = schema && (schema.type === "object" || schema.type === undefined) ? { ...schema, type: "object" as const } : { type: "object" as const };
  return { name: tool.name, ...(tool.description ? { description: tool.description } : {}), inputSchema };
}

function parseSchema(text: string): Record<string, unknown> | undefined {
  if (!text) return undefined;
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

export function toolResult(operationId: string, receipt: TerminalReceipt): CallToolResult {
  switch (receipt.outcome) {
    case "returned": {
      const output: unknown = JSON.parse(receipt.output);
      const text = typeof output === "string" ? output : receipt.output;
      const structured =
        typeof output === "object" && output !== null && !Array.isArray(output) ? { structuredContent: output as Record<string, unknown> } : {};
      return { content: [{ type: "text", text }], ...structured, _meta: { [META.operationId]: operationId, [META.outcome]: "returned" } };
    }
    case "failure":
      return {
        content: [{ type: "text", text: `${receipt.code}: ${receipt.message}` }],
        isError: true,
        _meta: { [META.operationId]: operationId, [META.outcome]: "failure", [META.code]: receipt.code, [META.retryable]: receipt.retryable },
      };
    case "unknown":
      return {
        content: [
          {
            type: "text",
            text: `outcome unknown: the call was sent and may or may not have taken effect; it was not retried (${receipt.message})`,
          },
        ],
        isError: true,
        _meta: { [META.operationId]: operationId, [META.outcome]: "unknown" },
      };
  }
}

function refusal(error: ConnectError): CallToolResult {
  const { body } = describeError(error);
  return {
    content: [{ type: "text", text: `${body.code}: ${body.message} (refused before it was journaled: nothing ran)` }],
    isError: true,
    _meta: { [META.outcome]: "refused", [META.code]: body.code, [META.retryable]: false },
  };
}
