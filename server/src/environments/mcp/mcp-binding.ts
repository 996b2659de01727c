import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CallToolResultSchema, ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";
import { CredentialUnreadable } from "../extension/sealer.ts";
import type { BindingContext } from "../kinds.ts";
import { deadlineSignal } from "../outgoing.ts";
import { failure, returned, unknown, type EnvironmentBinding, type ExecuteOperation, type TerminalReceipt } from "../port.ts";
import { inReceiptSpan } from "../receipt-span.ts";
import { SpanKind } from "../../tracing/index.ts";
import { CallTrace, traced, wasNotSent, type McpConnection } from "./mcp-connection.ts";
import {
  describeContent,
  listAllTools,
  mcpToolOf,
  NameCollision,
  outputOf,
  placedDescription,
  placementNames,
  ToolListingError,
  type CallToolResult,
} from "@skillenv/client/mcp";

/** What a setup's returned output lists: the placements the server's tools become. */
export interface McpSetupOutput {
  protocolVersion: string | undefined;
  server: { name: string; version: string } | undefined;
  tools: Array<{ name: string; tool: string; description: string; inputSchema: Record<string, unknown> }>;
}

/** How long past an operation's deadline the SDK's own request timer may run: the binding's deadline always fires first. */
const SDK_TIMEOUT_SLACK_MS = 60_000;

/** A call in flight: how to stop it, and what the transport saw of it. */
interface InFlight {
  controller: AbortController;
  trace: CallTrace;
}

/**
 * One session's binding of an MCP server. Every tools/call is sent once: a broken stream is never
 * resumed or the call re-sent; a deadline or a cancel sends notifications/cancelled (MCP
 * 2025-11-25), and the call ends as `timeout` or `cancelled` (the server may have done part of
 * it: cancellation is advisory in MCP).
 */
export class McpBinding implements EnvironmentBinding {
  readonly stagesFiles = false;
  readonly #connection: McpConnection;
  readonly #environment: string;
  readonly #tools: readonly string[];
  readonly #inFlight = new Map<string, InFlight>();

  constructor(connection: McpConnection, context: BindingContext, tools: readonly string[]) {
    this.#connection = connection;
    this.#environment = context.environment;
    this.#tools = tools;
  }

  /** Drops the MCP session here (its streams closed); the next use connects again. */
  release(): void {
    this.#connection.reset();
  }

  /** A fresh MCP session: initialize, then tools/list page by page; the tools become placements (McpSetupOutput). */
  async setup(deadlineMs: number): Promise<TerminalReceipt> {
    this.#connection.reset();
    const { signal, cancel: done, timedOut } = deadlineSignal(deadlineMs);
    try {
      const client = await this.#connection.client(signal, sdkTimeout(deadlineMs));
      const listed = await listAllTools(client, { signal, timeout: sdkTimeout(deadlineMs) });
      const offered = new Set(listed.map((tool) => tool.name));
      const missing = this.#tools.filter((name) => !offered.has(name));
      if (missing.length > 0) {
        return failure("mcp_tool_not_offered", `the server does not list ${missing.map((name) => JSON.stringify(name)).join(", ")}`, false, {
          tools: missing.join(","),
        });
      }
      const exposed = this.#tools.length === 0 ? listed : listed.filter((tool) => this.#tools.includes(tool.name));
      const names = placementNames(
        this.#environment,
        exposed.map((tool) => tool.name),
      );
      const output: McpSetupOutput = {
        protocolVersion: await this.#connection.protocolVersion(),
        server: client.getServerVersion() && { name: client.getServerVersion()!.name, version: client.getServerVersion()!.version },
        tools: exposed.map((tool, index) => ({
          name: names[index]!,
          tool: tool.name,
          description: placedDescription(tool),
          inputSchema: tool.inputSchema,
        })),
      };
      return returned(JSON.stringify(output));
    } catch (error) {
      this.#connection.reset();
      if (error instanceof NameCollision) return failure("mcp_tool_names_collide", error.message);
      if (error instanceof ToolListingError) return failure("mcp_error", error.message);
      if (timedOut()) return failure("timeout", "the MCP server did not answer its setup before the deadline");
      return setupFailure(error);
    } finally {
      done();
    }
  }

  stage(): Promise<TerminalReceipt> {
    return Promise.resolve(failure("invalid_argument", "an MCP environment has no workspace to stage files into"));
  }

  /** A tools/call, in a client span (the MCP conventions' name and attributes). */
  execute(operation: ExecuteOperation): Promise<TerminalReceipt> {
    const tool = mcpToolOf(operation.implementation);
    const attributes = { "mcp.method.name": "tools/call", "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool ?? "" };
    return inReceiptSpan(`tools/call ${tool ?? ""}`.trim(), attributes, () => this.#callTool(operation, tool), SpanKind.CLIENT);
  }

  async #callTool(operation: ExecuteOperation, tool: string | undefined): Promise<TerminalReceipt> {
    if (tool === undefined) return failure("invalid_argument", "this placement names no tool of the MCP server; nothing was sent");
    const input = parseObject(operation.input);
    if (input === undefined) return failure("invalid_argument", "an MCP tool's input is a JSON object (its arguments); nothing was sent");
    const controller = new AbortController();
    const { signal: deadline, cancel: done, timedOut } = deadlineSignal(operation.deadlineMs);
    deadline.addEventListener("abort", () => controller.abort("the operation's deadline passed"), { once: true });
    const trace = new CallTrace();
    this.#inFlight.set(operation.operationId, { controller, trace });
    try {
      let client: Client;
      try {
        client = await this.#connection.client(controller.signal, sdkTimeout(operation.deadlineMs));
      } catch (error) {
        if (timedOut()) return failure("timeout", "the MCP server could not be connected to before the deadline; the call was not sent");
        if (controller.signal.aborted) return failure("cancelled", "the call was cancelled before it was sent");
        return notSentFailure(error);
      }
      const call = traced(trace, () =>
        client.request({ method: "tools/call", params: { name: tool, arguments: input } }, CallToolResultSchema, {
          signal: controller.signal,
          timeout: sdkTimeout(operation.deadlineMs),
          onprogress: (progress) => operation.report({ outcome: "progress", data: JSON.stringify(progress) }),
        }),
      );
      const settled = await Promise.race([call, trace.ended.then(() => LOST)]);
      if (settled === LOST) {
        controller.abort("the response stream was lost");
        this.#connection.reset();
        return unknown("the connection to the MCP server was lost after the call was sent; no result came back");
      }
      const result = settled as CallToolResult;
      if (result.isError) return failure("mcp_tool_error", describeContent(result.content ?? []) || "the tool reported an error without content");
      return returned(outputOf(result));
    } catch (error) {
      if (timedOut()) return failure("timeout", "the MCP tool did not answer before the deadline; notifications/cancelled was sent");
      if (controller.signal.aborted)
        return failure("cancelled", "the call was cancelled; notifications/cancelled was sent (the server may have done part of it)");
      return this.#callFailure(error, trace);
    } finally {
      done();
      this.#inFlight.delete(operation.operationId);
    }
  }

  /** Sends notifications/cancelled for the call and waits until the server has received it (or it could not be sent). */
  async cancel(operationId: string, deadlineMs: number): Promise<TerminalReceipt> {
    const target = this.#inFlight.get(operationId);
    if (!target) return returned(JSON.stringify({ sent: false }));
    const { requestId } = target.trace;
    const delivered = requestId === undefined ? undefined : this.#connection.cancellationDelivered(requestId);
    target.controller.abort("cancelled by the session");
    if (!delivered) return returned(JSON.stringify({ sent: false }));
    const { signal, cancel: done } = deadlineSignal(deadlineMs);
    try {
      const outcome = await Promise.race([delivered, new Promise<"timeout">((resolve) => signal.addEventListener("abort", () => resolve("timeout")))]);
      if (outcome === true) return returned(JSON.stringify({ sent: true }));
      if (outcome === false) return failure("mcp_unavailable", "notifications/cancelled could not be delivered to the MCP server", true);
      return failure("timeout", "the MCP server did not take the cancellation before the deadline");
    } finally {
      done();
    }
  }

  /** A session that ends needs its MCP session no more: both end it at the server. */
  detach(): Promise<TerminalReceipt> {
    return this.#terminate();
  }

  teardown(): Promise<TerminalReceipt> {
    return this.#terminate();
  }

  async #terminate(): Promise<TerminalReceipt> {
    try {
      return returned(JSON.stringify({ terminated: await this.#connection.terminate() }));
    } catch (error) {
      return failure("mcp_error", `the MCP server did not end its session: ${messageOf(error)}`);
    }
  }

  /**
   * By the rule of every environment: a call that never left is a failure; an explicit refusal
   * (a JSON-RPC error, an HTTP 4xx) is a failure; anything else after the call left is unknown.
   */
  #callFailure(error: unknown, trace: CallTrace): TerminalReceipt {
    if (error instanceof CredentialUnreadable) return failure("credential_unavailable", error.message);
    if (trace.notSent || (!trace.answered && wasNotSent(error))) {
      this.#connection.reset();
      return failure("mcp_unavailable", `the MCP server could not be reached (${messageOf(error)}); the call was not sent`, true);
    }
    if (error instanceof StreamableHTTPError && error.code !== undefined && error.code < 500) {
      if (error.code === 404) this.#connection.reset();
      return failure("mcp_error", `the MCP server refused the call with HTTP ${error.code}: ${error.message}`, false, { httpStatus: String(error.code) });
    }
    if (error instanceof McpError && error.code !== ErrorCode.InternalError && error.code !== ErrorCode.ConnectionClosed) {
      return failure("mcp_error", `the MCP server refused the call: ${error.message}`, false, { mcpCode: String(error.code) });
    }
    this.#connection.reset();
    return unknown(`the call reached the MCP server but no reliable result came back: ${messageOf(error)}`);
  }
}

const LOST = Symbol("lost");

function setupFailure(error: unknown): TerminalReceipt {
  if (error instanceof McpError) return failure("mcp_error", `the MCP server refused its setup: ${error.message}`, false, { mcpCode: String(error.code) });
  if (error instanceof StreamableHTTPError && error.code !== undefined) {
    return failure("mcp_error", `the MCP server refused its setup with HTTP ${error.code}: ${error.message}`, false, { httpStatus: String(error.code) });
  }
  return notSentFailure(error);
}

/** Connecting failed: the tool call itself was never sent. */
function notSentFailure(error: unknown): TerminalReceipt {
  if (error instanceof CredentialUnreadable) return failure("credential_unavailable", error.message);
  return failure("mcp_unavailable", `the MCP server could not be reached or initialized: ${messageOf(error)}`, true);
}

function parseObject(text: string): Record<string, unknown> | undefined {
  try {
    const value = JSON.parse(text) as unknown;
    return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

function messageOf(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  const cause = (error as { cause?: { code?: unknown } } | undefined)?.cause?.code;
  return typeof cause === "string" ? `${message} (${cause})` : message;
}

function sdkTimeout(deadlineMs: number): number {
  return Math.max(0, deadlineMs - Date.now()) + SDK_TIMEOUT_SLACK_MS;
}
