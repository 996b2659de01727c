import type { EnvironmentBinding } from "./port.ts";

/** The kinds of environment a session can bind (SPEC 1.4, 1.5). */
export type EnvironmentKindName = "service" | "host" | "extension" | "mcp";

/** Where a binding lives. */
export interface BindingContext {
  workspace: string;
  sessionId: string;
  /** The environment's name in the session. */
  environment: string;
}

/**
 * A tool an environment offers of itself when it is set up (an MCP server's): placed in the
 * session under `name` like a tool the session was created with.
 */
export interface DiscoveredTool {
  /** The placement name, within the model-facing name rule. */
  name: string;
  description: string;
  /** JSON Schema, as JSON text. */
  inputSchema: string;
  /** As the kind's execute reads it. */
  implementation: unknown;
  /** "always": a run's call of it waits for a person's decision (docs/runs.md, "Approvals"). */
  approval?: "always";
}

/**
 * One kind of environment, as sessions see it: it checks what a session asks of it when the
 * session is created, and binds environments of that kind. `Options` is the normalised form the
 * session stores (JSON); nothing secret may be in it unsealed.
 */
export interface EnvironmentKind<Options = unknown> {
  /**
   * Validates and authorizes the binding's options from the request (JSON), e.g. grants against
   * the deployment allow-lists. Throws service errors; returns the options as stored.
   */
  authorize(context: BindingContext, options: unknown): Promise<Options>;
  /** The options as a session shows them (the proto JSON of the kind's message): never a credential. */
  describe(options: Options): unknown;
  /**
   * What the kind knows of the binding's live state, merged into what `describe` says when a
   * session is shown; never journaled, since it holds only until it changes.
   */
  describeLive?(context: BindingContext): Record<string, unknown>;
  /** Checks a placed tool's implementation (JSON) in this kind of environment; returns it as stored. */
  checkImplementation(context: BindingContext, implementation: unknown): Promise<unknown>;
  /** Checks a run's agent-loop implementation (JSON); absent when the kind cannot run agent loops. */
  checkAgentLoop?(context: BindingContext, implementation: unknown): Promise<unknown>;
  /**
   * For a kind whose tools come from the environment itself: the tools a returned setup's output
   * offers. They replace the environment's earlier ones; the session checks its own limits.
   */
  discoveredTools?(setupOutput: string, options: Options): DiscoveredTool[];
  bind(context: BindingContext, options: Options): EnvironmentBinding;
}

/** Every kind a session can bind, each served by its adapter. */
export type EnvironmentKinds = Record<EnvironmentKindName, EnvironmentKind>;
