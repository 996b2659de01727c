// Whether the import objects a worker hands a guest have everything the component takes from
// them. The names come from the component's own import types (server/src/engine/component), the objects
// are the real ones (wasi.ts, guest.ts), and jco's glue looks each function and resource up by
// its JavaScript name; a missing one would fail every instantiation, so loading fails instead.
import { unversioned } from "../component/contract.ts";
import type { ImportedInterface } from "../component/index.ts";

type Namespace = Readonly<Record<string, unknown>>;

/**
 * What the component takes from its imports that `provided` (keyed by unversioned interface, as
 * jco keys them) lacks, each as `<name> of <interface>`.
 */
export function missingImports(imports: readonly ImportedInterface[], provided: Namespace): string[] {
  const missing: string[] = [];
  for (const { name, functions, resources } of imports) {
    const namespace = member(provided, unversioned(name)) as Namespace | undefined;
    for (const resource of resources) if (!isFunction(member(namespace, pascalCase(resource)))) missing.push(`${resource} of ${name}`);
    for (const fn of functions) if (!providesFunction(namespace, fn)) missing.push(`${fn} of ${name}`);
  }
  return missing;
}

/**
 * jco's JavaScript names: a function `get-random-bytes` is `getRandomBytes`; for a resource
 * `fields` (the class `Fields`), `[constructor]fields` is the class itself, `[method]fields.get`
 * a prototype method and `[static]fields.from-list` a static one.
 */
function providesFunction(namespace: Namespace | undefined, fn: string): boolean {
  const resourceMember = /^\[(constructor|method|static)\]([^.]+)(?:\.(.+))?$/.exec(fn);
  if (!resourceMember) return isFunction(member(namespace, camelCase(fn)));
  const [, kind, resource = "", name = ""] = resourceMember;
  const resourceClass = member(namespace, pascalCase(resource)) as { prototype?: Namespace } | undefined;
  if (!isFunction(resourceClass)) return false;
  if (kind === "constructor") return true;
  return isFunction(member(kind === "method" ? resourceClass!.prototype : (resourceClass as Namespace), camelCase(name)));
}

/** An own property (or, for prototypes and classes, an inherited one), never Object.prototype's. */
function member(holder: Namespace | undefined, key: string): unknown {
  if (holder === undefined || holder === null || key in Object.prototype) return undefined;
  return (holder as Record<string, unknown>)[key];
}

function isFunction(value: unknown): boolean {
  return typeof value === "function";
}

function camelCase(kebab: string): string {
  const pascal = pascalCase(kebab);
  return pascal.charAt(0).toLowerCase() + pascal.slice(1);
}

function pascalCase(kebab: string): string {
  return kebab
    .split("-")
    .map((word) => word.charAt(0).toUpperCase() + word.slice(1).toLowerCase())
    .join("");
}
