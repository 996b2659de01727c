import { serviceError } from "../errors/index.ts";
import { checkImports, readComponent, worldOf, type Entrypoint, type World } from "../engine/index.ts";
import type { ComponentKind } from "./kinds.ts";

/** What admission learns about a component: the world it implements and what it imports. */
export interface ComponentWorld {
  world: string;
  imports: string[];
}

/** The entrypoint each kind is admitted by, and the endpoint that admits it. */
const ADMISSION: Record<ComponentKind, { entrypoint: Entrypoint; endpoint: string }> = {
  tool: { entrypoint: "run", endpoint: "POST /v1/tools" },
  agentloop: { entrypoint: "turn", endpoint: "POST /v1/agentloops" },
};

/**
 * Checks that the bytes are a component of the world `kind` admits (server/src/engine/component) and that a
 * grant can satisfy every import: invalid_component or import_not_grantable, each naming the
 * problem. The world is checked before the imports, so a component sent to the wrong endpoint
 * learns the right one first.
 */
export function checkComponent(bytes: Uint8Array, kind: ComponentKind): ComponentWorld {
  const sections = readComponent(bytes);
  const world = worldOf(sections);
  if (world.entrypoint !== ADMISSION[kind].entrypoint) {
    throw serviceError("invalid_component", `the component implements ${world.name} (exports ${world.entrypoint}); admit it with ${endpointOf(world)}`);
  }
  const imports = checkImports(sections, world);
  return { world: world.name, imports: imports.map((item) => item.name) };
}

function endpointOf(world: World): string {
  return Object.values(ADMISSION).find((admission) => admission.entrypoint === world.entrypoint)!.endpoint;
}
