import { Program, type EnvClient, type ResolvedProgram } from "../env/index.ts";
import { serviceEnvironmentOf, type ImplementationResolver } from "./resolve.ts";
import type { PreparedToolPlacement, ToolPlacement } from "./tools.ts";

/**
 * `client.prepare` (spec §4.3): admits what is missing and loads it on every worker of the
 * service environment, without a session and without granting anything. The result keeps the
 * placement and configuration, needs no further admission, and can be given to any number of
 * sessions and clients of the same server. Preparing again checks current readiness.
 */
export interface Prepare {
  /** Refuses (PlacementError) a placement that is not in a service environment definition. */
  (placed: ToolPlacement): Promise<PreparedToolPlacement>;
  (placed: Program): Promise<ResolvedProgram>;
}

export function createPrepare(env: EnvClient, resolveImplementation: ImplementationResolver): Prepare {
  async function prepareTool(placed: ToolPlacement): Promise<PreparedToolPlacement> {
    const { environment, implementation: given } = serviceEnvironmentOf(placed);
    const implementation = await resolveImplementation(given);
    await env.prepareIds(typeof implementation === "string" ? { tools: [implementation] } : { programs: [implementation.id], tools: [implementation.runtime] });
    return Object.freeze({ ...placed, environment, implementation });
  }

  function prepare(placed: ToolPlacement): Promise<PreparedToolPlacement>;
  function prepare(placed: Program): Promise<ResolvedProgram>;
  function prepare(placed: ToolPlacement | Program): Promise<PreparedToolPlacement | ResolvedProgram> {
    return placed instanceof Program ? env.prepare(placed) : prepareTool(placed);
  }
  return prepare;
}
