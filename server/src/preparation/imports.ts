/**
 * The interfaces the service environment provides to a guest, as jco names a component's imports
 * (unversioned). Anything else, notably `wasi:sockets/*` and `wasi:http/incoming-handler`, is not
 * provided at all: such a component fails preparation rather than running with an import that
 * silently does nothing.
 */
export const PROVIDED_IMPORTS: ReadonlySet<string> = new Set([
  // CLI: empty environment and arguments, no cwd, exit becomes a failure, output discarded.
  "wasi:cli/environment",
  "wasi:cli/exit",
  "wasi:cli/stdin",
  "wasi:cli/stdout",
  "wasi:cli/stderr",
  "wasi:cli/terminal-input",
  "wasi:cli/terminal-output",
  "wasi:cli/terminal-stdin",
  "wasi:cli/terminal-stdout",
  "wasi:cli/terminal-stderr",
  "wasi:clocks/monotonic-clock",
  "wasi:clocks/wall-clock",
  // Filesystem: only the granted preopens (/workspace, /scratch, /secrets).
  "wasi:filesystem/preopens",
  "wasi:filesystem/types",
  "wasi:io/error",
  "wasi:io/poll",
  "wasi:io/streams",
  "wasi:random/random",
  "wasi:random/insecure",
  "wasi:random/insecure-seed",
  // Outgoing HTTP only, each request checked against the network grant.
  "wasi:http/types",
  "wasi:http/outgoing-handler",
  // Host services of an agent loop (wit/env.wit).
  "skillenv:env/host",
]);

/** Imports of a component that the environment does not provide. */
export function unprovidedImports(imports: readonly string[]): string[] {
  return imports.filter((name) => !PROVIDED_IMPORTS.has(name.replace(/@[^/]*$/, "")));
}
