// Several ways of doing one thing (a figure and its baselines), measured side by side in one run:
// sequential round trips in interleaved rounds, the order rotated each round so that drift in
// the machine's load hits every variant alike, then a closed loop per variant with a fixed number
// of calls in flight. The processes serving a variant are read around every chunk, so CPU per call
// is attributed to the variant even when two variants share one server process.
import type { ChildStats, ServerChild } from "./child.ts";
import { MiB, percentile, summarize, throughput } from "./stats.ts";
import type { ResultRow } from "./suite.ts";
import { measure, msSince, now } from "./timing.ts";

/** A process (or part of one) that serves calls, read between chunks. */
export interface Side {
  name: string;
  stats(): Promise<ChildStats>;
}

export interface Variant {
  name: string;
  /** One call; it must check its own answer, so that a refusal never passes for a fast call. */
  call(): Promise<void>;
  /** The process serving the call first (its CPU and RSS go in the table), then any other it depends on. */
  sides: readonly [Side, ...Side[]];
  /** Untimed calls first (JIT, connections, caches). */
  warmup: number;
  /** Sequential timed calls per round. */
  perRound: number;
  /** Calls of the closed loop; 0 leaves the throughput figure out. */
  concurrent: number;
}

export interface Plan {
  rounds: number;
  /** Calls outstanding in the closed loop. */
  inFlight: number;
  /** Upper bound per variant for its sequential rounds together, and again for its closed loop. */
  budgetMs: number;
}

export interface VariantResult {
  row: ResultRow;
  latenciesMs: number[];
  /** Calls of the closed loop actually made. */
  concurrentCalls: number;
  /** CPU (user + system) per timed call of every side, by side name. */
  cpuUsPerCall: Map<string, number>;
  /** Fewer calls than planned: a phase ran out of budget. */
  truncated: boolean;
}

/** A server child, under the name its CPU is reported by. */
export function childSide(name: string, child: ServerChild): Side {
  return { name, stats: () => child.stats() };
}

/**
 * The threads of this process other than the main one: worker threads and LevelDB's libuv pool
 * when the served code runs in the bench process itself. (No forced GC here: it would run on
 * these very threads.)
 */
export function thisProcessThreads(name: string): Side {
  return {
    name,
    async stats() {
      const all = process.cpuUsage();
      const main = process.threadCpuUsage();
      const memory = process.memoryUsage();
      return { rssBytes: memory.rss, heapUsedBytes: memory.heapUsed, cpuMicros: all.user + all.system - main.user - main.system };
    },
  };
}

/** Timed calls and the CPU they cost, accumulated over a variant's chunks. */
class Tally {
  readonly latenciesMs: number[] = [];
  calls = 0;
  spentMs = 0;
  clientCpuMicros = 0;
  readonly sideCpuMicros = new Map<string, number>();
  rssBytes = Number.NaN;
}

/**
 * A child's stats() forces a full GC after reading its CPU, so that GC lands in the next
 * interval. Its cost (and the IPC's), taken as the median of back-to-back reads, is subtracted
 * from every interval that starts with a read.
 */
async function readCost(side: Side): Promise<number> {
  const reads: number[] = [];
  for (let i = 0; i < 6; i++) reads.push((await side.stats()).cpuMicros);
  const deltas = reads.slice(1).map((cpu, i) => cpu - reads[i]!);
  return percentile(
    deltas.sort((a, b) => a - b),
    50,
  );
}

/** Runs `work` between reads of every side and of this thread, adding the CPU to `tally`. */
async function accounted(variant: Variant, costs: Map<Side, number>, tally: Tally, work: () => Promise<void>): Promise<void> {
  const before = await Promise.all(variant.sides.map((side) => side.stats()));
  const client = process.threadCpuUsage();
  await work();
  const clientCpu = process.threadCpuUsage(client);
  const after = await Promise.all(variant.sides.map((side) => side.stats()));
  tally.clientCpuMicros += clientCpu.user + clientCpu.system;
  variant.sides.forEach((side, i) => {
    const used = Math.max(0, after[i]!.cpuMicros - before[i]!.cpuMicros - costs.get(side)!);
    tally.sideCpuMicros.set(side.name, (tally.sideCpuMicros.get(side.name) ?? 0) + used);
  });
  tally.rssBytes = after[0]!.rssBytes;
}

/** Every variant's warm-up, then the rounds of sequential calls (variants rotated), then each variant's closed loop. */
export async function measureVariants(variants: readonly Variant[], plan: Plan): Promise<VariantResult[]> {
  const costs = new Map<Side, number>();
  for (const side of new Set(variants.flatMap((variant) => variant.sides))) costs.set(side, await readCost(side));
  for (const variant of variants) for (let i = 0; i < variant.warmup; i++) await variant.call();

  const tallies = variants.map(() => new Tally());
  for (let round = 0; round < plan.rounds; round++) {
    for (let k = 0; k < variants.length; k++) {
      const index = (round + k) % variants.length;
      const variant = variants[index]!;
      const tally = tallies[index]!;
      if (tally.spentMs >= plan.budgetMs) continue;
      await accounted(variant, costs, tally, async () => {
        const started = performance.now();
        for (let i = 0; i < variant.perRound && tally.spentMs + (performance.now() - started) < plan.budgetMs; i++) {
          const t = now();
          await variant.call();
          tally.latenciesMs.push(msSince(t));
          tally.calls++;
        }
        tally.spentMs += performance.now() - started;
      });
    }
  }

  const results: VariantResult[] = [];
  for (const [index, variant] of variants.entries()) {
    const tally = tallies[index]!;
    let concurrentCalls = 0;
    let callsPerSec = Number.NaN;
    if (variant.concurrent > 0) {
      await accounted(variant, costs, tally, async () => {
        const m = await measure(variant.call, {
          warmup: 0,
          sequential: 0,
          concurrent: variant.concurrent,
          inFlight: plan.inFlight,
          phaseBudgetMs: plan.budgetMs,
        });
        concurrentCalls = m.concurrentCalls;
        callsPerSec = throughput(m.concurrentCalls, m.concurrentMs);
      });
    }
    const timed = tally.calls + concurrentCalls;
    const cpuUsPerCall = new Map([...tally.sideCpuMicros].map(([name, micros]) => [name, micros / timed]));
    const s = summarize(tally.latenciesMs);
    results.push({
      row: {
        name: variant.name,
        n: s.n,
        medianMs: s.medianMs,
        p99Ms: s.p99Ms,
        callsPerSec,
        serverRssMiB: tally.rssBytes / MiB,
        serverCpuUs: cpuUsPerCall.get(variant.sides[0].name)!,
        clientCpuUs: tally.clientCpuMicros / timed,
      },
      latenciesMs: tally.latenciesMs,
      concurrentCalls,
      cpuUsPerCall,
      truncated: s.n < plan.rounds * variant.perRound || concurrentCalls < variant.concurrent,
    });
  }
  return results;
}
