import { Program, type ComponentBytes, type EnvClient, type ResolvedProgram } from "../env/index.ts";
import { oncePerInstance } from "../once-per-instance.ts";
import type { EnvironmentDefinition, ServiceEnvironmentDefinition } from "./environments.ts";
import { PlacementError } from "./placement-error.ts";
import { environmentName, type ResolvedToolImplementation, type ToolImplementation, type ToolPlacement } from "./tools.ts";

/** Admits what an implementation needs (when the workspace lacks it) and returns it by id. */
export type ImplementationResolver = (implementation: ToolImplementation) => Promise<ResolvedToolImplementation>;

/**
 * Resolutions are cached per (implementation instance, client), like skill uploads: a component
 * or program placed in many sessions is checked and admitted once. Tool ids and resolved
 * programs need no round trip; the server checks their admission when a session is created.
 */
export function createImplementationResolver(env: EnvClient): ImplementationResolver {
  const admitComponent = oncePerInstance((component: ComponentBytes) => env.admitComponent(component));
  return async (implementation) => {
    if (typeof implementation === "string") return implementation;
    if (implementation instanceof Program) return toolProgram(await env.resolve(implementation));
    if ("type" in implementation) return implementation;
    return admitComponent(implementation);
  };
}

/** A tool must be placed in one of the session's environments, as the session defines it. */
export function checkPlacedIn(placement: ToolPlacement, environments: readonly EnvironmentDefinition[]): void {
  const name = environmentName(placement);
  const defined = environments.find((environment) => environment.name === name);
  if (!defined) throw new PlacementError(`tool ${placement.name} is placed in environment ${name}, which the session does not define`);
  // Two definitions under one name would leave the tool with grants other than those it was placed with.
  if (typeof placement.environment !== "string" && JSON.stringify(placement.environment) !== JSON.stringify(defined)) {
    throw new PlacementError(`tool ${placement.name} is placed in a definition of environment ${name} that differs from the session's`);
  }
}

/** Only a placement whose definition says "service environment" can be prepared (spec §4.3 rule 3). */
export function serviceEnvironmentOf(placement: ToolPlacement): ServiceEnvironmentDefinition {
  const { environment } = placement;
  if (typeof environment !== "string" && environment.kind === "service") return environment;
  throw new PlacementError(`cannot prepare tool ${placement.name}: ${whereIs(environment)}; only placements in the service environment (serviceEnv) are prepared`);
}

function whereIs(environment: EnvironmentDefinition | string): string {
  if (typeof environment === "string") return `its environment is given only by name (${environment}), so it may be any kind`;
  return `it is placed in the ${environment.kind} environment ${environment.name}`;
}

/** A program resolved on an agent-loop runtime (a digest can name either kind) cannot be a tool. */
function toolProgram(program: ResolvedProgram): ResolvedProgram {
  if (program.entrypoint !== "run") throw new PlacementError(`program ${program.id} runs on the agent-loop runtime ${program.runtime}; a tool needs a tool runtime`);
  return program;
}
