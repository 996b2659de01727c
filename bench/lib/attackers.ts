// What the hostile suite's two parts share: a paced series of round trips, and attackers running
// on a thread of their own (the suite's file started again as a worker in a named role).
import { once } from "node:events";
import { setTimeout as sleep } from "node:timers/promises";
import { Worker } from "node:worker_threads";
import { msSince, now } from "./timing.ts";

export interface Paced {
  warmup: number;
  measured: number;
  paceMs: number;
  /** The phase stops here, however few calls it measured. */
  budgetMs: number;
}

/** `warmup` calls, then up to `measured` round trips `paceMs` apart: their latencies and every call made. */
export async function pacedLatencies(
  call: () => Promise<void>,
  { warmup, measured, paceMs, budgetMs }: Paced,
): Promise<{ latenciesMs: number[]; calls: number }> {
  const deadline = performance.now() + budgetMs;
  let calls = 0;
  for (; calls < warmup && performance.now() < deadline; calls++) await call();
  const latenciesMs: number[] = [];
  while (latenciesMs.length < measured && performance.now() < deadline) {
    const start = now();
    await call();
    latenciesMs.push(msSince(start));
    await sleep(paceMs);
  }
  return { latenciesMs, calls: calls + latenciesMs.length };
}

/**
 * Starts `module` again as a worker in `role`; resolves once it posts that it has started. Its
 * `stop()` asks it to stop and resolves with what it posts back. A worker that fails or exits
 * early fails the suite instead of leaving it waiting for a message that never comes.
 */
export async function startAttackers<Stats>(module: URL, role: string, url: string, what: string): Promise<{ stop(): Promise<Stats> }> {
  const worker = new Worker(module, { workerData: { role, url } });
  let failure: unknown;
  worker.on("error", (error) => (failure = error));
  const exited = once(worker, "exit").then(() => {
    throw failure ?? new Error(`${what} stopped early`);
  });
  const nextMessage = () => Promise.race([once(worker, "message"), exited]);
  await nextMessage();
  return {
    async stop() {
      worker.postMessage("stop");
      const [stats] = (await nextMessage()) as [Stats];
      await worker.terminate();
      return stats;
    },
  };
}
