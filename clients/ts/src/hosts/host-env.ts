import type { JsonValue } from "@bufbuild/protobuf";
import type { SetupMode } from "../sessions/environments.ts";
import type { ToolServer } from "./tool-server.ts";

/** What a host tool's handler gets besides its input. */
export interface HostToolContext {
  /**
   * Aborted when the service cancels the operation (a cancelled run, a deleted session, the
   * deadline passed) or the command stream closes. A handler that throws once it is aborted
   * answers `failure { code: "cancelled" }`.
   */
  signal: AbortSignal;
  /**
   * Reports progress for people, journaled as `operation.progress`. Best effort: messages
   * above 16 KiB, or beyond the service's count per operation, are dropped by the service.
   */
  progress(message: string): void;
  /** The operation's id in the session's journal. */
  operationId: string;
  /** The placement's opaque implementation, when it has one. */
  implementation: JsonValue | undefined;
  /** The placement's configuration (null when it has none). */
  configuration: JsonValue;
  /** When the service stops waiting, reports a timeout and cancels the operation. */
  deadline: Date;
  sessionId: string;
  /** The placed tool's name. */
  tool: string;
}

/**
 * Runs one call of a host tool and answers its output: any JSON value (undefined is null).
 * A thrown `{ code, message }` with a snake_case code (and optionally `retryable`, `details`)
 * is the tool's failure with that code; anything else thrown is `tool_error`. The input is
 * typed `any` so that a handler can declare the shape its tool's input schema promises; the
 * service does not check it.
 */
// biome-ignore lint/suspicious/noExplicitAny: the model's input, which the handler checks against its inputSchema
export type HostToolHandler = (input: any, context: HostToolContext) => unknown;

export interface HostEnvOptions {
  /** The environment's name in a session: ^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$. */
  name: string;
  /**
   * The handlers this process serves, by placed tool name; default none (a session created
   * here whose host tools another process serves). A command for any other tool is answered
   * `failure { code: "tool_not_served" }`.
   */
  tools?: Readonly<Record<string, HostToolHandler>>;
  /** Default "automatic". */
  setup?: SetupMode;
}

/** The caller's own process as an environment (spec §1.4): the tools it serves over the host command stream. */
export interface HostEnvironmentDefinition {
  readonly kind: "host";
  readonly name: string;
  readonly setup: SetupMode;
  readonly tools: Readonly<Record<string, HostToolHandler>>;
  /**
   * Set when a program the client starts serves the tools instead of `tools` (an MCP server over
   * stdio): the client places what it lists when it creates a session, and serves every command
   * by it.
   */
  readonly server?: ToolServer;
}

/**
 * Defines a host environment. Performs no I/O: the tools are served once a session binds it
 * (`client.sessions.create` serves it unless told not to, `session.serve` serves it on demand).
 * The definition is frozen, so one value can serve several sessions. An MCP server's tools over
 * stdio (`mcp`) need Node: `hostEnv` of `@skillenv/client/node`.
 */
export function hostEnv(options: HostEnvOptions): HostEnvironmentDefinition {
  if ((options as { mcp?: unknown }).mcp !== undefined)
    throw new TypeError(`host environment ${options.name}: serving an MCP server over stdio needs Node; import hostEnv from @skillenv/client/node`);
  return defineHostEnv(options, undefined);
}

/** A host environment served by handlers, or (with `server`) by a program the client starts. */
export function defineHostEnv(options: HostEnvOptions, server: ToolServer | undefined): HostEnvironmentDefinition {
  const tools = { ...options.tools };
  for (const [name, handler] of Object.entries(tools)) {
    if (typeof handler !== "function") throw new TypeError(`host environment ${options.name}: the handler of tool ${name} is not a function`);
  }
  if (server && Object.keys(tools).length > 0)
    throw new TypeError(`host environment ${options.name}: serves ${server.description}, whose tools it lists; it takes no handlers besides`);
  const definition = { kind: "host" as const, name: options.name, setup: options.setup ?? "automatic", tools: Object.freeze(tools) };
  return Object.freeze(server ? { ...definition, server } : definition);
}

/** The handler of a placed tool, if this definition serves it (own properties only: a tool may be called "constructor"). */
export function handlerOf(definition: HostEnvironmentDefinition, tool: string): HostToolHandler | undefined {
  return Object.hasOwn(definition.tools, tool) ? definition.tools[tool] : undefined;
}
