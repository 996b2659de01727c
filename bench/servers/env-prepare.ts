// Child of the `env` bench suite (bench/env.ts): one process lifetime of a pool that prepares one
// component, as a service start does. Run on a fresh data dir it is a cold preparation (transpile,
// instrument, cap, persist, compile, load on every worker); run again on the same data dir it is
// a warm restart (prepared files read back, no transpile). A separate process, so that nothing
// compiled or cached by an earlier pool (V8 shares compiled wasm code within a process) helps.
//
//   node bench/servers/env-prepare.ts '<json: {dataDir, wasmPath, id, pool}>'
//
// Prints one JSON line (PrepareReport) on stdout.
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { Pool, type PoolOptions } from "../../server/src/engine/pool/index.ts";
import type { PreparedManifest } from "../../server/src/engine/preparation/index.ts";

export interface PrepareJob {
  dataDir: string;
  wasmPath: string;
  id: string;
  /** Pool options without dataDir. */
  pool: Omit<PoolOptions, "dataDir">;
}

export interface PrepareReport {
  /** performance.now() when this script's own code started (after node boot and imports). */
  scriptStartMs: number;
  poolStartMs: number;
  prepareMs: number;
  /** Transpile + instrument + cap + glue patch inside the transpile worker (manifest.prepareMs). */
  manifestPrepareMs: number;
  componentBytes: number;
  preparedCoreBytes: number;
  transpiles: number;
  preparedFromDisk: number;
  /** One invocation right after prepare() (a spare may not be ready yet). */
  firstInvokeMs: number;
  firstInvokeOutcome: string;
  rssBytes: number;
}

const job = JSON.parse(process.argv[2] ?? "") as PrepareJob;
const scriptStartMs = performance.now();
let started = performance.now();
const pool = await Pool.start({ ...job.pool, dataDir: job.dataDir });
try {
  const poolStartMs = performance.now() - started;
  started = performance.now();
  await pool.prepare({ id: job.id, load: () => readFile(job.wasmPath) });
  const prepareMs = performance.now() - started;
  const stats = pool.stats();

  // <dataDir>/prepared/<toolchain>/<id>/manifest.json (one toolchain dir in a bench data dir).
  const preparedRoot = join(job.dataDir, "prepared");
  let manifest: PreparedManifest | undefined;
  let dir = "";
  for (const chain of await readdir(preparedRoot)) {
    dir = join(preparedRoot, chain, job.id);
    manifest = JSON.parse(await readFile(join(dir, "manifest.json"), "utf8").catch(() => "null")) as PreparedManifest | undefined;
    if (manifest) break;
  }
  if (!manifest) throw new Error(`no manifest for ${job.id} under ${preparedRoot}`);
  let preparedCoreBytes = 0;
  for (const name of manifest.coreModules) preparedCoreBytes += (await readFile(join(dir, name))).byteLength;

  const input = JSON.stringify({ v: 1, text: "first call" });
  const receipt = await pool.invoke({
    component: { id: job.id, load: () => readFile(job.wasmPath) },
    entrypoint: "run",
    input,
    configuration: "{}",
    deadlineMs: Date.now() + 30_000,
    grants: { filesystem: {}, network: [], secrets: [] },
  });
  const report: PrepareReport = {
    scriptStartMs,
    poolStartMs,
    prepareMs,
    manifestPrepareMs: manifest.prepareMs,
    componentBytes: manifest.componentBytes,
    preparedCoreBytes,
    transpiles: stats.transpiles,
    preparedFromDisk: stats.preparedFromDisk,
    firstInvokeMs: receipt.durationMs,
    firstInvokeOutcome:
      receipt.outcome === "returned"
        ? receipt.output === input
          ? "returned"
          : "wrong output"
        : `${receipt.outcome}: ${"message" in receipt ? receipt.message : ""}`,
    rssBytes: process.memoryUsage().rss,
  };
  process.stdout.write(`${JSON.stringify(report)}\n`);
} finally {
  await pool.close();
}
// The transpile worker is unref'd and the pool is closed; exit explicitly all the same.
process.exit(0);
