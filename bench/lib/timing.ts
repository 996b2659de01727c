/** Monotonic nanoseconds; hrtime is not subject to wall-clock jumps and resolves below 1 µs. */
export function now(): bigint {
  return process.hrtime.bigint();
}

export function msSince(start: bigint): number {
  return Number(process.hrtime.bigint() - start) / 1e6;
}

export interface Workload {
  /** Calls whose results are discarded (JIT, connection set-up, LevelDB cache). */
  warmup: number;
  /** Sequential round trips for the latency distribution. */
  sequential: number;
  /** Calls issued with `inFlight` outstanding at all times, for throughput. */
  concurrent: number;
  inFlight: number;
  /** Upper bound per phase, so a slow protocol cannot stall the whole run. */
  phaseBudgetMs: number;
}

export interface Measurement {
  /** Every call made, warm-up included (for CPU per call). */
  calls: number;
  /** Round-trip times of the sequential phase, ms. */
  latenciesMs: number[];
  concurrentCalls: number;
  concurrentMs: number;
}

/** Warm-up, then sequential round trips, then a fixed count with `inFlight` calls outstanding. */
export async function measure(call: () => Promise<void>, work: Workload): Promise<Measurement> {
  let deadline = performance.now() + work.phaseBudgetMs;
  let warmed = 0;
  for (; warmed < work.warmup && performance.now() < deadline; warmed++) await call();

  const latenciesMs: number[] = [];
  deadline = performance.now() + work.phaseBudgetMs;
  for (let i = 0; i < work.sequential && performance.now() < deadline; i++) {
    const start = now();
    await call();
    latenciesMs.push(msSince(start));
  }

  // A shared counter rather than pre-split quotas: every worker keeps going until the total is
  // reached, so the tail of the phase still has `inFlight` calls outstanding as long as possible.
  let issued = 0;
  deadline = performance.now() + work.phaseBudgetMs;
  const worker = async () => {
    while (issued < work.concurrent && performance.now() < deadline) {
      issued++;
      await call();
    }
  };
  const start = now();
  await Promise.all(Array.from({ length: work.inFlight }, worker));
  const concurrentMs = msSince(start);
  return { calls: warmed + latenciesMs.length + issued, latenciesMs, concurrentCalls: issued, concurrentMs };
}
