import { Program, type ComponentBytes, type ResolvedProgram } from "../env/index.ts";
import type { EnvironmentDefinition, ServiceEnvironmentDefinition } from "./environments.ts";
import { hasJsonForm } from "./json.ts";
import { PlacementError } from "./placement-error.ts";

/** What a tool in the service environment runs, in any form the client can resolve. */
export type ServiceToolImplementation =
  /** The id (SHA-256, 64 lowercase hex) of a tool component admitted in this workspace. */
  | string
  /** A tool component given by its bytes; admitted when the workspace lacks it. */
  | ComponentBytes
  /** A program on a tool runtime; its source and runtime are admitted when missing. */
  | Program
  | ResolvedProgram;

/**
 * What a tool in a host or extension environment runs: any JSON value, carried unread with
 * every call (e.g. which handler or version the environment should use).
 */
export interface OpaqueImplementation {
  readonly opaque: unknown;
}

/** A service environment's implementation, or an opaque one for host and extension environments. */
export type ToolImplementation = ServiceToolImplementation | OpaqueImplementation;

/** An implementation that needs no more admission: a tool id or a resolved program. */
export type ResolvedToolImplementation = string | ResolvedProgram;

export interface ToolOptions {
  /** The model-facing name: ^[a-zA-Z0-9_-]{1,64}$, no "__", not "skills". */
  name: string;
  /** What the tool does, for the model. */
  description?: string;
  /** JSON Schema of the tool's input; the server's default is `{ "type": "object" }`. */
  inputSchema?: Record<string, unknown>;
  /** The environment the tool runs in: its definition, or its name in the session. */
  environment: EnvironmentDefinition | string;
  /**
   * Required in the service environment. In a host or extension environment, `{ opaque: <JSON> }`
   * or nothing: a host then serves the tool by its name alone.
   */
  implementation?: ToolImplementation;
  /** Handed to every invocation unread; defaults to the program's own configuration. */
  configuration?: unknown;
  /**
   * `"always"`: each call a run's model makes waits for a person's decision before it is sent
   * (`run.approve` / `run.deny`, docs/runs.md "Approvals"); `"never"` (the default): sent at once.
   */
  approval?: ToolApproval;
}

/** Whether a person decides each call of a tool before it is sent. */
export type ToolApproval = "always" | "never";

/** A tool placed in an environment (spec §1.3): what a session is created with. */
export interface ToolPlacement {
  readonly name: string;
  readonly description: string;
  readonly inputSchema: Readonly<Record<string, unknown>> | undefined;
  readonly environment: EnvironmentDefinition | string;
  readonly implementation: ToolImplementation | undefined;
  readonly configuration: unknown;
  readonly approval: ToolApproval;
}

/** What `prepare` returns: the same placement, ready on every worker, nothing left to admit. */
export interface PreparedToolPlacement extends ToolPlacement {
  readonly environment: ServiceEnvironmentDefinition;
  readonly implementation: ResolvedToolImplementation;
}

const TOOL_ID = /^[0-9a-f]{64}$/;

/**
 * Places a tool. Performs no I/O (spec §4.3 rule 2): `client.sessions.create` and
 * `client.prepare` admit what is missing. Refuses an implementation that cannot run as a tool,
 * or that the environment's kind does not take (when the environment is given by definition).
 */
export function tool(options: ToolOptions): ToolPlacement {
  checkImplementation(options.name, options.implementation);
  if (typeof options.environment !== "string") checkFits(options.name, options.environment, options.implementation);
  return Object.freeze({
    name: options.name,
    description: options.description ?? "",
    inputSchema: options.inputSchema,
    environment: options.environment,
    implementation: options.implementation,
    configuration: options.configuration ?? programConfiguration(options.implementation),
    approval: checkApproval(options.name, options.approval),
  });
}

/** The name of the environment a tool is placed in. */
export function environmentName(placement: ToolPlacement): string {
  return typeof placement.environment === "string" ? placement.environment : placement.environment.name;
}

/**
 * The kind of environment decides the form: the service environment needs a component or a
 * program; host and extension environments take an opaque value or nothing.
 */
export function checkFits(name: string, environment: EnvironmentDefinition, implementation: ToolImplementation | undefined): void {
  const where = `tool ${name} is placed in the ${environment.kind} environment ${environment.name}`;
  if (environment.kind === "mcp") throw new PlacementError(`${where}, whose tools come from its server when the session sets it up`);
  if (environment.kind === "host" && environment.server)
    throw new PlacementError(`${where}, which serves ${environment.server.description}: its tools are those the server lists`);
  if (environment.kind === "service") {
    if (implementation === undefined || isOpaque(implementation)) throw new PlacementError(`${where}, which runs a tool id, a component or a program`);
  } else if (implementation !== undefined && !isOpaque(implementation)) {
    throw new PlacementError(`${where}, which takes an opaque implementation ({ opaque: <any JSON> }) or none`);
  }
}

export function isOpaque(implementation: ToolImplementation): implementation is OpaqueImplementation {
  return typeof implementation === "object" && "opaque" in implementation;
}

function checkApproval(name: string, approval: ToolApproval | undefined): ToolApproval {
  if (approval === undefined) return "never";
  if (approval !== "always" && approval !== "never")
    throw new PlacementError(`tool ${name}: approval must be "always" or "never", not ${JSON.stringify(approval)}`);
  return approval;
}

function checkImplementation(name: string, implementation: ToolImplementation | undefined): void {
  const refuse = (why: string): never => {
    throw new PlacementError(`tool ${name}: ${why}`);
  };
  if (implementation === undefined) return;
  if (typeof implementation === "string") {
    if (!TOOL_ID.test(implementation)) refuse(`${JSON.stringify(implementation)} is not a tool id (64 lowercase hex)`);
  } else if (implementation instanceof Program) {
    if (typeof implementation.runtime !== "string" && implementation.runtime.kind !== "tool")
      refuse("a program for a tool needs a tool runtime, not an agent-loop runtime");
  } else if (isOpaque(implementation)) {
    if (!hasJsonForm(implementation.opaque)) refuse("an opaque implementation must be a JSON value");
  } else if ("type" in implementation) {
    if (implementation.entrypoint !== "run") refuse(`program ${implementation.id} runs on an agent-loop runtime; a tool needs a tool runtime`);
  } else if (implementation.kind !== "tool" || !(implementation.bytes instanceof Uint8Array)) {
    refuse('a component given by bytes must be { kind: "tool", bytes }');
  }
}

/** A program's own configuration (a Program or a resolved one), the default of a placement's or an agent loop's. */
export function programConfiguration(implementation: ToolImplementation | undefined): unknown {
  return typeof implementation === "object" && ("type" in implementation || implementation instanceof Program) ? implementation.configuration : undefined;
}
