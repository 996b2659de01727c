import { createHash } from "node:crypto";

/** Model-facing tool names (the providers' function-name rule); placement names keep it. */
const MODEL_NAME = /^[a-zA-Z0-9_-]{1,64}$/;
const MAX_NAME = 64;
/** Hex digits of SHA-256 that tell shortened names apart. */
const HASH_CHARS = 10;
/** The longest MCP environment name: room is left for `__`, a readable head and the hash. */
export const MAX_MCP_ENVIRONMENT_NAME = 32;

/**
 * The placement name of an MCP server's tool in environment `environment`:
 *
 * - `<environment>__<tool>` when that matches ^[a-zA-Z0-9_-]{1,64}$;
 * - otherwise `<environment>__<head>_<hash>`, where <hash> is the first 10 hex digits of the
 *   SHA-256 of the tool's name (UTF-8) and <head> is the tool's name with every character
 *   outside [a-zA-Z0-9_-] replaced by `_`, cut to fill the name to exactly 64 characters.
 *
 * An MCP environment's name has no `__` and at most 32 characters, so the environment a placement
 * belongs to is always the part before its first `__`, and two environments never share a name.
 * Within one environment, names that fit are the tools' own (unique on the server), and shortened
 * names differ by their hash; a collision left (a server listing a name twice, or a shortened name
 * equal to another tool's full one) is refused by `placementNames`, never resolved by order.
 */
export function placementName(environment: string, tool: string): string {
  const plain = `${environment}__${tool}`;
  if (MODEL_NAME.test(plain)) return plain;
  const hash = createHash("sha256").update(tool, "utf8").digest("hex").slice(0, HASH_CHARS);
  const room = MAX_NAME - environment.length - 2 - 1 - HASH_CHARS;
  const head = [...tool]
    .map((character) => (/^[a-zA-Z0-9_-]$/.test(character) ? character : "_"))
    .join("")
    .slice(0, room);
  return `${environment}__${head}_${hash}`;
}

/** The placement names of `tools`, in order; throws NameCollision naming the first two tools that share one. */
export function placementNames(environment: string, tools: readonly string[]): string[] {
  const seen = new Map<string, string>();
  return tools.map((tool) => {
    const name = placementName(environment, tool);
    const other = seen.get(name);
    if (other !== undefined) throw new NameCollision(`the server's tools ${JSON.stringify(other)} and ${JSON.stringify(tool)} would both be placed as ${name}`);
    seen.set(name, tool);
    return name;
  });
}

export class NameCollision extends Error {}

/** Whether `name` can name an MCP environment (see placementName). */
export function isMcpEnvironmentName(name: string): boolean {
  return name.length <= MAX_MCP_ENVIRONMENT_NAME && !name.includes("__");
}
