import type { MessageInitShape } from "@bufbuild/protobuf";
import type { AgentLoopSchema } from "../../gen/skillenv/sessions/v1/runs_pb.js";
import { Program, type ComponentBytes, type ResolvedProgram } from "../env/index.ts";
import type { ServiceEnvironmentDefinition } from "../sessions/environments.ts";
import { hasJsonForm } from "../sessions/json.ts";
import { PlacementError } from "../sessions/placement-error.ts";
import { programConfiguration } from "../sessions/tools.ts";
import { jsonValue } from "../sessions/wire.ts";

/** What a run's custom agent loop runs, in any form the client can resolve. */
export type AgentLoopImplementation =
  /** The id (SHA-256, 64 lowercase hex) of an agent-loop component admitted in this workspace. */
  | string
  /** An agent-loop component given by its bytes (`{ kind: "agentloop", bytes }`); admitted when the workspace lacks it. */
  | ComponentBytes
  /** A program on an agent-loop runtime; its source and runtime are admitted when missing. */
  | Program
  /** A program resolved on an agent-loop runtime (entrypoint "turn"), e.g. by `client.prepare(program)`. */
  | ResolvedProgram;

/** An agent-loop implementation that needs no more admission: an agent loop's id or a resolved program. */
export type ResolvedAgentLoopImplementation = string | ResolvedProgram;

/**
 * A custom agent loop for a run (docs/runs.md, custom agent loops), in place of the service's
 * default loop: it runs in a service environment of the run's session, and its model and tool
 * calls go through the same path as the default loop's.
 */
export interface AgentLoop {
  /** The session's service environment it runs in: its definition, or its name in the session. */
  environment: ServiceEnvironmentDefinition | string;
  implementation: AgentLoopImplementation;
  /** Handed to the loop unread; defaults to the program's own configuration. */
  configuration?: unknown;
}

/**
 * What `client.prepare(loop)` returns: the same loop, ready on every worker, nothing left to
 * admit. Its configuration is the one it runs with (the loop's own, else the program's). A run of
 * any session, of any client of the same workspace, takes it as its `agentLoop`.
 */
export interface PreparedAgentLoop extends AgentLoop {
  readonly environment: ServiceEnvironmentDefinition;
  readonly implementation: ResolvedAgentLoopImplementation;
  readonly configuration: unknown;
}

const AGENT_LOOP_ID = /^[0-9a-f]{64}$/;

/** The name of the environment the loop is placed in. */
export function agentLoopEnvironmentName(loop: AgentLoop): string {
  return typeof loop.environment === "string" ? loop.environment : loop.environment.name;
}

/**
 * Refuses (PlacementError) a loop that cannot run as one, before anything is sent: an
 * implementation of a tool's form, an environment definition of another kind than the service
 * environment, a configuration without a JSON form.
 */
export function checkAgentLoop(loop: AgentLoop): void {
  const refuse = (why: string): never => {
    throw new PlacementError(`the agent loop: ${why}`);
  };
  const { environment, implementation } = loop;
  if (typeof environment !== "string" && (environment as { kind?: unknown }).kind !== "service") {
    refuse(
      `it is placed in the ${String((environment as { kind?: unknown }).kind)} environment ${environment.name}; an agent loop runs in a service environment (serviceEnv)`,
    );
  }
  if (typeof implementation === "string") {
    if (!AGENT_LOOP_ID.test(implementation)) refuse(`${JSON.stringify(implementation)} is not an agent loop id (64 lowercase hex)`);
  } else if (implementation instanceof Program) {
    if (typeof implementation.runtime !== "string" && implementation.runtime.kind !== "agentloop")
      refuse("a program for an agent loop needs an agent-loop runtime, not a tool runtime");
  } else if (typeof implementation === "object" && implementation !== null && "type" in implementation) {
    if (implementation.entrypoint !== "turn") refuse(`program ${implementation.id} runs on a tool runtime; an agent loop needs an agent-loop runtime`);
  } else if (implementation?.kind !== "agentloop" || !(implementation.bytes instanceof Uint8Array)) {
    refuse('a component given by bytes must be { kind: "agentloop", bytes }');
  }
  if (loop.configuration !== undefined && !hasJsonForm(loop.configuration)) refuse("its configuration must be a JSON value");
}

/**
 * The loop's environment must be a service environment of its session: `kind` is that of the
 * session's environment of the loop's environment name, undefined when the session has none.
 */
export function checkAgentLoopBinding(loop: AgentLoop, kind: string | undefined, session: string): void {
  const name = agentLoopEnvironmentName(loop);
  if (kind === undefined) throw new PlacementError(`the agent loop is placed in environment ${name}, which ${session} does not define`);
  if (kind !== "service")
    throw new PlacementError(
      `the agent loop is placed in the ${kind} environment ${name} of ${session}; an agent loop runs in a service environment (serviceEnv)`,
    );
}

/** A program resolved on a tool runtime (a digest can name either kind) cannot be an agent loop. */
export function agentLoopProgram(program: ResolvedProgram): ResolvedProgram {
  if (program.entrypoint !== "turn")
    throw new PlacementError(`program ${program.id} runs on the tool runtime ${program.runtime}; an agent loop needs an agent-loop runtime`);
  return program;
}

/** The configuration the loop runs with, in a run and once prepared: its own, else its program's. */
export function agentLoopConfiguration(loop: AgentLoop): unknown {
  return loop.configuration ?? programConfiguration(loop.implementation);
}

/** The run's `agentloop`, with its implementation resolved to ids. */
export function agentLoopMessage(loop: AgentLoop, implementation: ResolvedAgentLoopImplementation): MessageInitShape<typeof AgentLoopSchema> {
  return {
    environment: agentLoopEnvironmentName(loop),
    implementation: {
      kind:
        typeof implementation === "string"
          ? { case: "agentloop", value: implementation }
          : { case: "program", value: { id: implementation.id, runtime: implementation.runtime } },
    },
    configuration: jsonValue(agentLoopConfiguration(loop)),
  };
}
