// Run by the pool before it starts its workers (pool/compile-cache.ts), with a worker's
// environment and sandbox but a compile cache it may write: loads the code a worker process runs
// (its main module with everything it imports, the watchdog thread's, the egress tunnel's, and,
// through NODE_OPTIONS, the egress preload), so that Node strips its types and compiles it here,
// once, into the cache, where the workers find it. The two entry modules refuse to run outside
// their place before doing anything (entries.ts): that refusal is what is expected of them.
import { readdirSync } from "node:fs";
import { flushCompileCache, getCompileCacheDir } from "node:module";
import { NOT_A_WORKER_PROCESS, NOT_THE_WATCHDOG } from "./entries.ts";

const ENTRIES: [module: string, refusal: string | undefined][] = [
  ["./main.ts", NOT_A_WORKER_PROCESS],
  ["./watchdog-thread.ts", NOT_THE_WATCHDOG],
  ["./egress-tunnel.ts", undefined],
];

function fail(message: string): never {
  process.stderr.write(`${message}\n`);
  process.exit(1);
}

const directory = getCompileCacheDir();
if (!directory) fail("Node did not enable the compile cache (NODE_COMPILE_CACHE)");
for (const [module, refusal] of ENTRIES) {
  const error = await import(module).then(
    () => undefined,
    (error: unknown) => error,
  );
  const message = error instanceof Error ? error.message : error === undefined ? undefined : String(error);
  if (message !== refusal) fail(`${module}: expected ${refusal ? `"${refusal}"` : "no error"} on loading it here, got ${message ? `"${message}"` : "none"}`);
}
flushCompileCache();
if (readdirSync(directory).length === 0) fail(`Node wrote nothing into the compile cache ${directory}`);
process.exit(0);
