// Child of the `env` bench suite (bench/env.ts): the memory of a pool with the service defaults,
// as a service start sees it. It starts idle, prepares every component of components/ (built)
// (cold on a fresh data dir: transpiles included; warm on a prepared one), then calls a few of
// them on every worker and waits for their spare instances to settle. A separate process, so
// that what is measured is this pool's and nothing else's: this process and every worker
// process (each sandbox's processes), RSS and PSS summed over them.
//
//   node bench/servers/env-memory.ts '<json: MemoryJob>'
//
// Prints one JSON line (MemoryReport) on stdout.
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { Pool, type PoolOptions } from "../../server/src/engine/pool/index.ts";
import { memoryOf, processTree, type ProcessMemory } from "../lib/processes.ts";
import { MiB } from "../lib/stats.ts";

export interface MemoryJob {
  dataDir: string;
  componentsDir: string;
  /** The components to prepare, by name (those with sources in components/: not a stale build output). */
  names: string[];
  /** Pool options without dataDir. */
  pool: Omit<PoolOptions, "dataDir">;
  /** Tools to call after preparing, each with its input; every worker gets calls of each. */
  use: { name: string; input: string }[];
}

export interface MemoryReport {
  components: number;
  transpiles: number;
  /** This process and its workers, summed: RSS counts shared pages once per process, PSS shares them out. */
  idleRssBytes: number;
  idlePssBytes: number;
  preparedRssBytes: number;
  preparedPssBytes: number;
  /** The processes' largest RSS each up to the end of preparation (VmHWM), summed. */
  preparedPeakRssBytes: number;
  usedRssBytes: number;
  usedPssBytes: number;
  /** Of preparedPssBytes: this process alone (the pool's own part, the server's in a service). */
  preparedPoolProcessPssBytes: number;
  /** Guest memory the spare instances of every worker hold once they settled. */
  spareBytes: number;
  spares: number;
}

const job = JSON.parse(process.argv[2] ?? "") as MemoryJob;
const NO_GRANTS = { filesystem: {}, network: [], secrets: [] };

/** This process and every worker process's tree. */
function memory(): ProcessMemory {
  return memoryOf([process.pid, ...pool.stats().workers.flatMap((worker) => (worker.pid === undefined ? [] : processTree(worker.pid)))]);
}

const settle = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const pool = await Pool.start({ ...job.pool, dataDir: job.dataDir });
try {
  const idle = await settledMemory();
  const names = [...job.names].sort();
  const refs = new Map(names.map((name) => [name, { id: name, load: () => readFile(join(job.componentsDir, `${name}.wasm`)) }]));
  for (const ref of refs.values()) await pool.prepare(ref);
  const prepared = await settledMemory();
  const preparedHere = memoryOf([process.pid]);

  const workers = job.pool.workers;
  for (const { name, input } of job.use) {
    const component = refs.get(name);
    if (!component) throw new Error(`no component ${name} in ${job.componentsDir}`);
    // Calls alternate between idle workers, so each worker serves some of them.
    for (let i = 0; i < 2 * workers; i++) {
      const receipt = await pool.invoke({ component, entrypoint: "run", input, configuration: "{}", deadlineMs: Date.now() + 30_000, grants: NO_GRANTS });
      if (receipt.outcome !== "returned") throw new Error(`${name}: ${JSON.stringify(receipt)}`);
    }
  }
  const spares = await settledSpares(workers);
  const used = await settledMemory();
  const report: MemoryReport = {
    components: names.length,
    transpiles: pool.stats().transpiles,
    idleRssBytes: idle.rss,
    idlePssBytes: idle.pss,
    preparedRssBytes: prepared.rss,
    preparedPssBytes: prepared.pss,
    preparedPeakRssBytes: prepared.peak,
    usedRssBytes: used.rss,
    usedPssBytes: used.pss,
    preparedPoolProcessPssBytes: preparedHere.pss,
    spareBytes: spares.bytes,
    spares: spares.instances,
  };
  process.stdout.write(`${JSON.stringify(report)}\n`);
} finally {
  await pool.close();
}
process.exit(0);

/**
 * Memory once RSS has stopped falling: no drop of more than 1 MiB over a second, at most 5 s.
 * Right after preparation a look can still find garbage that the threads' next collections
 * return within the second (measured: 414 MiB at 200 ms, 367 MiB from 1 s on); a server at rest
 * holds the settled figure, and VmHWM keeps the peak.
 */
async function settledMemory(): Promise<ProcessMemory> {
  let last = memory();
  for (let waited = 0, steady = 0; steady < 1000 && waited < 5000; waited += 250) {
    await settle(250);
    const now = memory();
    steady = last.rss - now.rss > MiB ? 0 : steady + 250;
    last = now;
  }
  return last;
}

/** The spares of every worker once three looks in a row find them unchanged. */
async function settledSpares(workers: number): Promise<{ bytes: number; instances: number }> {
  const look = async () => {
    const all = await Promise.all(Array.from({ length: workers }, async (_, index) => (await pool.report(index)).spares));
    return {
      bytes: all.reduce((sum, s) => sum + s.bytes, 0),
      instances: all.reduce((sum, s) => sum + s.instances, 0),
      instantiated: all.reduce((sum, s) => sum + s.instantiated, 0),
    };
  };
  let last = await look();
  for (let same = 0, polls = 0; same < 3 && polls < 200; polls++) {
    await settle(50);
    const now = await look();
    same = now.instantiated === last.instantiated ? same + 1 : 0;
    last = now;
  }
  return last;
}
