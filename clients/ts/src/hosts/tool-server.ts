import type { JsonValue } from "@bufbuild/protobuf";
import type { HostToolHandler } from "./host-env.ts";

/** A tool a tool server lists: what the client places for it when it creates a session. */
export interface ListedTool {
  /** The placement name. */
  readonly name: string;
  readonly description: string;
  readonly inputSchema: Readonly<Record<string, unknown>>;
  /** The placement's opaque implementation: which of the server's tools it is. */
  readonly implementation: JsonValue;
}

/**
 * A host environment's tools served by a program the client starts rather than by handlers
 * (an MCP server over stdio: `hostEnv({ name, mcp })` of `@skillenv/client/node`). The
 * definition holds this recipe, never a process: each start is a process of its own.
 */
export interface ToolServer {
  /** What is started, for messages (e.g. "the MCP server npx -y some-server"). */
  readonly description: string;
  /** Starts the server for environment `environment` and lists its tools; rejects when it cannot. */
  start(environment: string): Promise<RunningToolServer>;
}

/**
 * A started tool server. It serves until `close()`, which stops the program; `exited` settles
 * when the program ends for any reason, first.
 */
export interface RunningToolServer {
  readonly tools: readonly ListedTool[];
  /** Runs one command, whichever placed tool it names (its implementation says which of the server's tools). */
  readonly call: HostToolHandler;
  /** Settles once the program has ended: with undefined after `close()`, else with why it ended. */
  readonly exited: Promise<Error | undefined>;
  close(): Promise<void>;
}

/**
 * Starts each of `servers` at once; when one cannot start, the others are closed again and the
 * first failure is thrown. Keyed by environment name.
 */
export async function startToolServers(servers: ReadonlyArray<{ name: string; server: ToolServer }>): Promise<Map<string, RunningToolServer>> {
  const started = await Promise.allSettled(servers.map(({ name, server }) => server.start(name)));
  const failed = started.find((outcome) => outcome.status === "rejected");
  if (failed) {
    await closeAll(started.flatMap((outcome) => (outcome.status === "fulfilled" ? [outcome.value] : [])));
    throw failed.reason;
  }
  return new Map(servers.map(({ name }, index) => [name, (started[index] as PromiseFulfilledResult<RunningToolServer>).value]));
}

export async function closeAll(servers: Iterable<RunningToolServer>): Promise<void> {
  await Promise.all([...servers].map((server) => server.close().catch(() => undefined)));
}
