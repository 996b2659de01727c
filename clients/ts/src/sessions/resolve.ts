import { Program, type ComponentBytes, type EnvClient, type ResolvedProgram } from "../env/index.ts";
import { oncePerInstance } from "../once-per-instance.ts";
import {
  agentLoopEnvironmentName,
  agentLoopProgram,
  checkAgentLoop,
  checkAgentLoopBinding,
  type AgentLoop,
  type AgentLoopImplementation,
} from "../runs/agent-loop.ts";
import type { EnvironmentDefinition, ServiceEnvironmentDefinition } from "./environments.ts";
import { credentialOf } from "./credentials.ts";
import { PlacementError } from "./placement-error.ts";
import {
  checkFits,
  environmentName,
  isOpaque,
  type OpaqueImplementation,
  type ResolvedToolImplementation,
  type ServiceToolImplementation,
  type ToolPlacement,
} from "./tools.ts";

/**
 * Admits what an implementation needs (when the workspace lacks it) and returns it by id: a
 * tool's (the default), or a run's agent loop's (`"agentloop"`), whose program must then be on an
 * agent-loop runtime.
 */
export type ImplementationResolver = (
  implementation: ServiceToolImplementation | AgentLoopImplementation,
  role?: "tool" | "agentloop",
) => Promise<ResolvedToolImplementation>;

/** What a placement carries to CreateSession: a service implementation by id, an opaque one as is, or none. */
export type PlacedImplementation = ResolvedToolImplementation | OpaqueImplementation | undefined;

/**
 * Resolutions are cached per (implementation instance, client), like skill uploads: a component
 * or program placed in many sessions is checked and admitted once. Tool ids and resolved
 * programs need no round trip; the server checks their admission when a session is created.
 */
export function createImplementationResolver(env: EnvClient): ImplementationResolver {
  const admitComponent = oncePerInstance((component: ComponentBytes) => env.admitComponent(component));
  return async (implementation, role = "tool") => {
    if (typeof implementation === "string") return implementation;
    if (implementation instanceof Program) {
      const resolved = await env.resolve(implementation);
      return role === "tool" ? toolProgram(resolved) : agentLoopProgram(resolved);
    }
    if ("type" in implementation) return implementation;
    return admitComponent(implementation);
  };
}

/** Resolves a placement's implementation for the wire; opaque implementations need nothing. */
export async function placedImplementation(placement: ToolPlacement, resolve: ImplementationResolver): Promise<PlacedImplementation> {
  const { implementation } = placement;
  return implementation === undefined || isOpaque(implementation) ? implementation : resolve(implementation);
}

/**
 * A tool must be placed in one of the session's environments, as the session defines it, with
 * an implementation of the form that environment's kind takes.
 */
export function checkPlacedIn(placement: ToolPlacement, environments: readonly EnvironmentDefinition[]): void {
  const name = environmentName(placement);
  const defined = environments.find((environment) => environment.name === name);
  if (!defined) throw new PlacementError(`tool ${placement.name} is placed in environment ${name}, which the session does not define`);
  // Two definitions under one name would leave the tool with authority other than that it was placed with.
  if (typeof placement.environment !== "string" && !sameDefinition(placement.environment, defined)) {
    throw new PlacementError(`tool ${placement.name} is placed in a definition of environment ${name} that differs from the session's`);
  }
  checkFits(placement.name, defined, placement.implementation);
}

/**
 * A run's agent loop must be placed in one of the session's service environments, as the
 * session defines it (sessions.create with a run).
 */
export function checkAgentLoopPlacedIn(loop: AgentLoop, environments: readonly EnvironmentDefinition[]): void {
  checkAgentLoop(loop);
  const name = agentLoopEnvironmentName(loop);
  const defined = environments.find((environment) => environment.name === name);
  if (defined && typeof loop.environment !== "string" && !sameDefinition(loop.environment, defined)) {
    throw new PlacementError(`the agent loop is placed in a definition of environment ${name} that differs from the session's`);
  }
  checkAgentLoopBinding(loop, defined?.kind, "the session");
}

function sameDefinition(a: EnvironmentDefinition, b: EnvironmentDefinition): boolean {
  if (a === b) return true;
  // Handlers cannot be compared, so a host environment is only ever the same as itself.
  if (a.kind === "host" || b.kind === "host") return false;
  return JSON.stringify(a) === JSON.stringify(b) && credentialOf(a) === credentialOf(b);
}

/** Only a placement whose definition says "service environment" can be prepared (spec §4.3 rule 3). */
export function serviceEnvironmentOf(placement: ToolPlacement): { environment: ServiceEnvironmentDefinition; implementation: ServiceToolImplementation } {
  const { environment, implementation } = placement;
  if (typeof environment === "string" || environment.kind !== "service") {
    throw new PlacementError(
      `cannot prepare tool ${placement.name}: ${whereIs(environment)}; only placements in the service environment (serviceEnv) are prepared`,
    );
  }
  if (implementation === undefined || isOpaque(implementation))
    throw new PlacementError(`cannot prepare tool ${placement.name}: it has no component or program`);
  return { environment, implementation };
}

/**
 * Only an agent loop placed in a service environment definition can be prepared (spec §4.3
 * rule 3), and only one that can run as an agent loop (checkAgentLoop).
 */
export function agentLoopServiceEnvironmentOf(loop: AgentLoop): ServiceEnvironmentDefinition {
  const { environment } = loop;
  if (typeof environment === "string") {
    throw new PlacementError(
      `cannot prepare the agent loop: its environment is given only by name (${environment}); only agent loops placed in a service environment definition (serviceEnv) are prepared`,
    );
  }
  // A caller without the types may hand any definition.
  const given = environment as EnvironmentDefinition;
  if (given.kind !== "service")
    throw new PlacementError(
      `cannot prepare the agent loop: ${whereIs(given)}; only agent loops placed in a service environment definition (serviceEnv) are prepared`,
    );
  checkAgentLoop(loop);
  return given;
}

function whereIs(environment: EnvironmentDefinition | string): string {
  if (typeof environment === "string") return `its environment is given only by name (${environment}), so it may be any kind`;
  return `it is placed in the ${environment.kind} environment ${environment.name}`;
}

/** A program resolved on an agent-loop runtime (a digest can name either kind) cannot be a tool. */
function toolProgram(program: ResolvedProgram): ResolvedProgram {
  if (program.entrypoint !== "run")
    throw new PlacementError(`program ${program.id} runs on the agent-loop runtime ${program.runtime}; a tool needs a tool runtime`);
  return program;
}
