import { Program, type EnvClient, type ResolvedProgram } from "../env/index.ts";
import { agentLoopConfiguration, type AgentLoop, type PreparedAgentLoop } from "../runs/agent-loop.ts";
import { agentLoopServiceEnvironmentOf, serviceEnvironmentOf, type ImplementationResolver } from "./resolve.ts";
import type { PreparedToolPlacement, ToolPlacement } from "./tools.ts";

/**
 * `client.prepare` (spec §4.3): admits what is missing and loads it on every worker of the
 * service environment, without a session and without granting anything. The result keeps the
 * placement and configuration, needs no further admission, and can be given to any number of
 * sessions and clients of the same server: a prepared tool as one of a session's `tools`, a
 * prepared agent loop as a run's `agentLoop`. Preparing again checks current readiness.
 */
export interface Prepare {
  /** Refuses (PlacementError) a placement that is not in a service environment definition. */
  (placed: ToolPlacement): Promise<PreparedToolPlacement>;
  /**
   * A run's agent loop (`{ environment, implementation, configuration }`, as `agentLoop` takes
   * it). Refuses (PlacementError) a loop whose environment is not a service environment
   * definition (a name alone included), or whose implementation cannot run as an agent loop.
   */
  (placed: AgentLoop): Promise<PreparedAgentLoop>;
  (placed: Program): Promise<ResolvedProgram>;
}

export function createPrepare(env: EnvClient, resolveImplementation: ImplementationResolver): Prepare {
  async function prepareTool(placed: ToolPlacement): Promise<PreparedToolPlacement> {
    const { environment, implementation: given } = serviceEnvironmentOf(placed);
    const implementation = await resolveImplementation(given);
    await env.prepareIds(typeof implementation === "string" ? { tools: [implementation] } : { programs: [implementation.id], tools: [implementation.runtime] });
    return Object.freeze({ ...placed, environment, implementation });
  }

  async function prepareAgentLoop(placed: AgentLoop): Promise<PreparedAgentLoop> {
    const environment = agentLoopServiceEnvironmentOf(placed);
    const implementation = await resolveImplementation(placed.implementation, "agentloop");
    await env.prepareIds(
      typeof implementation === "string" ? { agentloops: [implementation] } : { programs: [implementation.id], agentloops: [implementation.runtime] },
    );
    return Object.freeze({ environment, implementation, configuration: agentLoopConfiguration(placed) });
  }

  function prepare(placed: ToolPlacement): Promise<PreparedToolPlacement>;
  function prepare(placed: AgentLoop): Promise<PreparedAgentLoop>;
  function prepare(placed: Program): Promise<ResolvedProgram>;
  function prepare(placed: ToolPlacement | AgentLoop | Program): Promise<PreparedToolPlacement | PreparedAgentLoop | ResolvedProgram> {
    if (placed instanceof Program) return env.prepare(placed);
    // A tool placement (from tool()) always has a name; an agent loop has none.
    return "name" in placed ? prepareTool(placed) : prepareAgentLoop(placed);
  }
  return prepare;
}
