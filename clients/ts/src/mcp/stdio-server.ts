import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { HostToolContext, ListedTool, RunningToolServer, ToolServer } from "../hosts/index.ts";
import { listAllTools, mcpToolOf, placedDescription } from "./tool-listing.ts";
import { NameCollision, placementNames } from "./tool-names.ts";
import { describeContent, outputValue, type CallToolResult } from "./tool-result.ts";

/** A local MCP server spoken to over stdio, as MCP hosts configure one (`command`, `args`, `env`). */
export interface StdioMcpServerOptions {
  /** The program to run, found on PATH (never through a shell). */
  command: string;
  args?: readonly string[];
  /**
   * Variables for the server, beside the few the MCP SDK passes on from this process (HOME,
   * LOGNAME, PATH, SHELL, TERM, USER); nothing else of this process's environment reaches it.
   */
  env?: Readonly<Record<string, string>>;
  /** Its working directory; default this process's. */
  cwd?: string;
}

/** The client as it introduces itself to the server in `initialize`. */
const CLIENT_INFO = { name: "skillenv-host", version: "0.1.0" };

/** A recipe for starting the server; `hostEnv({ name, mcp })` of `@skillenv/client/node` holds one. */
export function stdioMcpServer(options: StdioMcpServerOptions): ToolServer {
  const { command, cwd } = options;
  if (typeof command !== "string" || command === "") throw new TypeError("mcp.command must be a non-empty string");
  const args = [...(options.args ?? [])];
  if (args.some((arg) => typeof arg !== "string")) throw new TypeError("mcp.args must be strings");
  const env = { ...options.env };
  if (Object.values(env).some((value) => typeof value !== "string")) throw new TypeError("mcp.env's values must be strings");
  if (cwd !== undefined && typeof cwd !== "string") throw new TypeError("mcp.cwd must be a string");
  const description = `the MCP server ${[command, ...args].join(" ")}`;
  return Object.freeze({ description, start: (environment: string) => start(environment, description, { command, args, env, cwd }) });
}

/** Spawns the server, initializes an MCP session with it, and lists its tools (every page). */
async function start(environment: string, description: string, parameters: Required<Omit<StdioMcpServerOptions, "cwd">> & { cwd?: string }) {
  const [{ Client }, { StdioClientTransport }] = await loadSdk(description);
  const client = new Client(CLIENT_INFO, { capabilities: {} });
  let closing = false;
  const exited = new Promise<Error | undefined>((resolve) => {
    client.onclose = () => resolve(closing ? undefined : new Error("its process ended"));
  });
  const close = async () => {
    closing = true;
    await client.close().catch(() => undefined);
    // The SDK kills a server that outstays stdin's end without waiting for it to go.
    await exited;
  };
  try {
    await client.connect(new StdioClientTransport({ ...parameters, env: { ...parameters.env }, args: [...parameters.args], stderr: "inherit" }));
    const tools = await listTools(client, environment);
    return { tools, exited, close, call: (input: unknown, context: HostToolContext) => call(client, input, context) } satisfies RunningToolServer;
  } catch (error) {
    await close();
    throw new Error(`could not start ${description}: ${(error as Error).message}`, { cause: error });
  }
}

/**
 * The SDK, loaded on first use: it is an optional peer dependency of the client, which a client
 * serving no MCP server neither installs nor loads.
 */
async function loadSdk(description: string) {
  try {
    return await Promise.all([import("@modelcontextprotocol/sdk/client/index.js"), import("@modelcontextprotocol/sdk/client/stdio.js")]);
  } catch (error) {
    if ((error as { code?: unknown }).code !== "ERR_MODULE_NOT_FOUND") throw error;
    throw new Error(`could not start ${description}: it needs the MCP SDK beside the client (npm install @modelcontextprotocol/sdk)`, { cause: error });
  }
}

async function listTools(client: Client, environment: string): Promise<ListedTool[]> {
  const listed = await listAllTools(client);
  let names: string[];
  try {
    names = placementNames(
      environment,
      listed.map((tool) => tool.name),
    );
  } catch (error) {
    if (error instanceof NameCollision) throw new Error(error.message);
    throw error;
  }
  return listed.map((tool, index) => ({
    name: names[index]!,
    description: placedDescription(tool),
    inputSchema: tool.inputSchema,
    implementation: { mcpTool: tool.name },
  }));
}

/**
 * One tools/call, sent once. Its progress notifications become progress receipts whose message
 * is the notification's JSON (`{"progress":1,"total":3}`), as an MCP environment's progress data;
 * the command's cancellation (a cancelled run, the deadline) sends notifications/cancelled.
 */
async function call(client: Client, input: unknown, context: HostToolContext): Promise<unknown> {
  const tool = mcpToolOf(context.implementation);
  if (tool === undefined)
    throw {
      code: "tool_not_served",
      message: `placement ${context.tool} names no tool of the MCP server (its implementation has no mcpTool); nothing was sent`,
    };
  if (typeof input !== "object" || input === null || Array.isArray(input))
    throw { code: "invalid_argument", message: "an MCP tool's input is a JSON object (its arguments); nothing was sent" };
  const { CallToolResultSchema, ErrorCode, McpError } = await import("@modelcontextprotocol/sdk/types.js");
  let result: CallToolResult;
  try {
    result = await client.request({ method: "tools/call", params: { name: tool, arguments: input as Record<string, unknown> } }, CallToolResultSchema, {
      signal: context.signal,
      timeout: Math.max(0, context.deadline.getTime() - Date.now()),
      onprogress: (progress) => context.progress(JSON.stringify(progress)),
    });
  } catch (error) {
    // Cancelled: the SDK sent notifications/cancelled; the receipt says cancelled.
    if (context.signal.aborted || !(error instanceof McpError)) throw error;
    if (error.code === ErrorCode.RequestTimeout)
      throw { code: "timeout", message: "the MCP tool did not answer before the deadline; notifications/cancelled was sent" };
    if (error.code === ErrorCode.ConnectionClosed)
      throw { code: "mcp_unavailable", message: "the MCP server's process ended during the call; it may have done part of it" };
    throw { code: "mcp_error", message: `the MCP server refused the call: ${error.message}`, details: { mcpCode: String(error.code) } };
  }
  if (result.isError) throw { code: "mcp_tool_error", message: describeContent(result.content ?? []) || "the tool reported an error without content" };
  return outputValue(result);
}
