import { spawn } from "node:child_process";
import { mkdir } from "node:fs/promises";
import { compileCacheSandboxArguments, launchCommand } from "./bubblewrap.ts";
import { nodeCommand, runtimeEnvironment, STDERR_TAIL } from "./worker-process.ts";

const FILLER = new URL("../worker/fill-compile-cache.ts", import.meta.url).pathname;
/** Filling takes 0.2-0.6 s here; one that has not finished in this long is stuck. */
const FILL_TIMEOUT_MS = 60_000;

/**
 * Fills the compile cache of the workers' own code (docs/environments.md, "Decisions"). A worker
 * runs the engine's TypeScript, which Node strips of its types as it loads it with a stripper
 * (amaro, compiled to WebAssembly) that then stays in the process: 11.5 MiB in a worker's main
 * thread and as much in its watchdog thread, measured. Node's compile cache (NODE_COMPILE_CACHE)
 * keeps the stripped code, and V8's code cache of it, on disk, checked against each file's
 * content; a process that finds all its modules there never loads the stripper.
 *
 * Workers may only read the cache: one a guest had broken out of the engine in could otherwise
 * plant code for the workers after it. So the pool fills it before it starts any: one process,
 * with a worker's environment and in a worker's sandbox (Node keys the cache by user id, the
 * sandbox's 1000) but with the cache writable and nothing else of the data directory, loads the
 * workers' code and exits, before any guest code exists. The cache outlasts the pool: a restart
 * finds it filled and only checks it. Rejects when the filler fails (its stderr says why).
 */
export async function fillCompileCache(options: { sandbox: boolean; path: string }): Promise<void> {
  await mkdir(options.path, { recursive: true, mode: 0o700 });
  const [command, ...args] = launchCommand(options.sandbox, nodeCommand(FILLER), (node) => compileCacheSandboxArguments(options.path, node));
  const child = spawn(command!, args, {
    stdio: ["ignore", "ignore", "pipe"],
    env: runtimeEnvironment(options.path),
    timeout: FILL_TIMEOUT_MS,
    killSignal: "SIGKILL",
  });
  let stderr = "";
  child.stderr.on("data", (chunk: Buffer) => {
    stderr = (stderr + chunk.toString("utf8")).slice(-STDERR_TAIL);
  });
  const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve, reject) => {
    child.once("error", reject);
    child.once("close", (code, signal) => resolve([code, signal]));
  });
  if (code !== 0)
    throw new Error(`filling the workers' compile cache failed (${signal ? `stopped by ${signal}` : `exit code ${code}`}): ${stderr.trim() || "no output"}`);
}
