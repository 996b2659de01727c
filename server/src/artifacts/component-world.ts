import { serviceError } from "../errors/index.ts";
import type { ComponentKind } from "./kinds.ts";
import { ComponentFormatError, readComponentSections, type ExternName } from "./component-sections.ts";

/** What admission learns about a component: the world it implements and what it imports. */
export interface ComponentWorld {
  world: string;
  imports: string[];
}

/** The worlds of wit/env.wit, by the function each exports and the kind it is admitted as. */
const WORLDS: Record<ComponentKind, { world: string; entrypoint: string; endpoint: string }> = {
  tool: { world: "skillenv:env/tool@0.1.0", entrypoint: "run", endpoint: "POST /v1/tools" },
  agentloop: { world: "skillenv:env/agent-loop@0.1.0", entrypoint: "turn", endpoint: "POST /v1/agentloops" },
};

const ENV_TYPES = "skillenv:env/types@0.1.0";
const ENV_HOST = "skillenv:env/host@0.1.0";

/**
 * The WASI 0.2 interfaces a service-environment grant can satisfy, per package. Sockets are
 * absent: network access is HTTP only, checked per request against the granted origins.
 * `wasi:cli/exit` is admitted because most toolchains import it; the host turns an exit into a
 * failed invocation, never into an exit of the worker. `wasi:cli/environment` is served empty:
 * secrets are files under /secrets, not environment variables.
 */
const WASI_INTERFACES: ReadonlyMap<string, readonly string[]> = new Map([
  ["io", ["error", "poll", "streams"]],
  ["clocks", ["monotonic-clock", "wall-clock"]],
  ["random", ["random", "insecure", "insecure-seed"]],
  ["cli", ["environment", "exit", "stdin", "stdout", "stderr", "terminal-input", "terminal-output", "terminal-stdin", "terminal-stdout", "terminal-stderr"]],
  ["filesystem", ["types", "preopens"]],
  ["http", ["types", "outgoing-handler"]],
]);

const WASI_NAME = /^wasi:([a-z0-9-]+)\/([a-z0-9-]+)@0\.2\.(0|[1-9][0-9]*)$/;

/**
 * Checks that the bytes are a component of the world `kind` admits and that a grant can satisfy
 * every import: invalid_component or import_not_grantable, each naming the problem.
 */
export function checkComponent(bytes: Uint8Array, kind: ComponentKind): ComponentWorld {
  const { imports, exports } = readSections(bytes);
  checkExports(exports, kind);
  for (const item of imports) checkImport(item, kind);
  const interfaces = imports.filter((item) => item.sort === "instance");
  return { world: WORLDS[kind].world, imports: interfaces.map((item) => item.name) };
}

function readSections(bytes: Uint8Array): ReturnType<typeof readComponentSections> {
  try {
    return readComponentSections(bytes);
  } catch (error) {
    if (!(error instanceof ComponentFormatError)) throw error;
    throw serviceError("invalid_component", `not a WebAssembly component: ${error.message}`);
  }
}

/** Exactly one of the entrypoints, as a function, and the one the endpoint admits. */
function checkExports(exports: readonly ExternName[], kind: ComponentKind): void {
  const [actual, other] = (Object.keys(WORLDS) as ComponentKind[]).filter((k) => exports.some((e) => e.name === WORLDS[k].entrypoint));
  if (actual === undefined) {
    throw serviceError("invalid_component", "the component exports neither run (tool world) nor turn (agent-loop world) of wit/env.wit");
  }
  if (other !== undefined) throw serviceError("invalid_component", "the component exports both run and turn; a component implements one world");
  const { entrypoint } = WORLDS[actual];
  if (exports.find((e) => e.name === entrypoint)?.sort !== "func") {
    throw serviceError("invalid_component", `the component's export ${entrypoint} is not a function`);
  }
  if (actual !== kind) {
    throw serviceError("invalid_component", `the component implements ${WORLDS[actual].world} (exports ${entrypoint}); admit it with ${WORLDS[actual].endpoint}`);
  }
}

/**
 * Interfaces must be grantable. A type import bounded by `eq` only names a type of another import
 * (`use types.{failure}` in a world), so it needs nothing from the host; any other kind of
 * import (a function, a resource, a value, a module) would have to come from the host.
 */
function checkImport({ name, sort, bound }: ExternName, kind: ComponentKind): void {
  if (sort === "type" && bound === "eq") return;
  const problem = sort === "instance" ? importProblem(name, kind) : `it imports a ${sort === "type" ? "resource" : sort}, not an interface`;
  if (problem !== undefined) {
    throw serviceError("import_not_grantable", `the component imports ${name}, which no grant can satisfy: ${problem}`, { import: name });
  }
}

function importProblem(name: string, kind: ComponentKind): string | undefined {
  if (name === ENV_TYPES) return undefined;
  if (name === ENV_HOST) return kind === "agentloop" ? undefined : "only agent loops may import the host interface";
  const wasi = WASI_NAME.exec(name);
  if (wasi === null) return "the service environment provides skillenv:env@0.1.0 and WASI 0.2 interfaces only";
  const [, pkg = "", iface = ""] = wasi;
  if (pkg === "sockets") return "raw sockets are never granted; use wasi:http/outgoing-handler with a network grant";
  if (!WASI_INTERFACES.get(pkg)?.includes(iface)) return "this WASI interface is not provided by the service environment";
  return undefined;
}
