import { serviceError } from "../../errors/index.ts";
import { ComponentFormatError, readComponentSections, type ComponentSections, type ExternName } from "./binary.ts";
import { ENTRYPOINT_TYPE, ENV_FUNCTIONS, HOST_INTERFACE, WASI_INTERFACES, WASI_VERSION, WORLDS, type Entrypoint, type World } from "./contract.ts";

/** What a component is, checked against the contract (contract.ts). */
export interface ComponentWorld {
  world: World;
  /** Imported interfaces, in the component's order. */
  imports: ImportedInterface[];
}

/** An imported interface and what the component takes from it. */
export interface ImportedInterface {
  /** As the component names it, versioned (`wasi:io/streams@0.2.12`). */
  name: string;
  /** Functions taken from it, in component-model names (`get-random-bytes`, `[method]descriptor.read`). */
  functions: string[];
  /** Resources taken from it (`descriptor`); type aliases need nothing. */
  resources: string[];
}

/**
 * Checks that the bytes are a component of one world of wit/env.wit, with its entrypoint's exact
 * signature, importing only interfaces the environment provides: invalid_component or
 * import_not_grantable, each naming the problem. Whether the environment has every function the
 * component takes from a WASI interface is checked against the real imports when a worker loads
 * the component (pool/imports.ts); the bytes cannot tell.
 */
export function checkWorld(bytes: Uint8Array): ComponentWorld {
  const sections = readComponent(bytes);
  const world = worldOf(sections);
  return { world, imports: checkImports(sections, world) };
}

/** The component's imports and exports, or invalid_component. */
export function readComponent(bytes: Uint8Array): ComponentSections {
  try {
    return readComponentSections(bytes);
  } catch (error) {
    if (!(error instanceof ComponentFormatError)) throw error;
    throw serviceError("invalid_component", `not a WebAssembly component the service environment can run: ${error.message}`);
  }
}

/** The world whose entrypoint the component exports: exactly one, as a function of the right type. */
export function worldOf({ exports }: ComponentSections): World {
  const entrypoints = exports.filter((item) => Object.hasOwn(WORLDS, item.name));
  const [entry, other] = entrypoints;
  if (entry === undefined) {
    throw serviceError("invalid_component", "the component exports neither run (tool world) nor turn (agent-loop world) of wit/env.wit");
  }
  if (other !== undefined) throw serviceError("invalid_component", "the component exports both run and turn; a component implements one world");
  const world = WORLDS[entry.name as Entrypoint];
  if (entry.sort !== "func") throw serviceError("invalid_component", `the component's export ${entry.name} is not a function`);
  if (entry.type !== ENTRYPOINT_TYPE) {
    throw serviceError("invalid_component", `the component's ${entry.name} is ${entry.type}, but ${world.name} declares ${ENTRYPOINT_TYPE} (wit/env.wit)`);
  }
  return world;
}

/**
 * Every import must be an interface the environment provides to this world. A type import bounded
 * by `eq` only names a type of another import (`use types.{failure}` in a world), so it needs
 * nothing from the host; any other kind of import (a function, a resource, a value, a module)
 * would have to come from the host.
 */
export function checkImports({ imports }: ComponentSections, world: World): ImportedInterface[] {
  const interfaces: ImportedInterface[] = [];
  for (const item of imports) {
    if (item.sort === "type" && item.bound === "eq") continue;
    const problem =
      item.sort === "instance" ? interfaceProblem(item, world) : `it imports a ${item.sort === "type" ? "resource" : item.sort}, not an interface`;
    if (problem !== undefined) {
      throw serviceError("import_not_grantable", `the component imports ${item.name}, which no grant can satisfy: ${problem}`, { import: item.name });
    }
    const exports = item.exports ?? [];
    interfaces.push({
      name: item.name,
      functions: exports.filter((used) => used.sort === "func").map((used) => used.name),
      resources: exports.filter((used) => used.bound === "sub-resource").map((used) => used.name),
    });
  }
  return interfaces;
}

function interfaceProblem(item: ExternName, world: World): string | undefined {
  const functions = Object.hasOwn(ENV_FUNCTIONS, item.name) ? ENV_FUNCTIONS[item.name] : undefined;
  if (functions !== undefined) {
    if (item.name === HOST_INTERFACE && !world.host) return "only agent loops may import the host interface";
    return envFunctionProblem(item, functions);
  }
  const wasi = /^wasi:([a-z0-9-]+)\/([a-z0-9-]+)@(.*)$/.exec(item.name);
  if (wasi === null) return "the service environment provides skillenv:env@0.1.0 and WASI 0.2 interfaces only";
  const [, pkg = "", iface = "", version = ""] = wasi;
  if (pkg === "sockets") return "raw sockets are never granted; use wasi:http/outgoing-handler with a network grant";
  if (!WASI_VERSION.test(version)) return "the service environment provides WASI 0.2 interfaces only";
  if (!(WASI_INTERFACES as readonly string[]).includes(`wasi:${pkg}/${iface}`)) return "this WASI interface is not provided by the service environment";
  return undefined;
}

/** A skillenv:env interface provides exactly its functions of wit/env.wit, and no resources. */
function envFunctionProblem(item: ExternName, functions: Readonly<Record<string, string>>): string | undefined {
  for (const used of item.exports ?? []) {
    if (used.sort === "type" && used.bound === "eq") continue;
    const expected = used.sort === "func" && Object.hasOwn(functions, used.name) ? functions[used.name] : undefined;
    if (expected === undefined) return `wit/env.wit's ${item.name} has no ${used.sort === "func" ? "function" : used.sort} ${used.name}`;
    if (used.type !== expected) return `its ${used.name} is ${used.type}; wit/env.wit declares ${expected}`;
  }
  return undefined;
}
