// Guests that wait without computing (issue #18: a guest asking a clock for a long block() held
// its worker's thread, and every call queued on that worker, while using no fuel): every blocking
// wasi:io call suspends the guest instead (server/src/engine/wasi/blocking.ts).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Pool, Receipt } from "../../src/engine/pool/index.ts";
import { buildTestComponents, component, output, run, startPool, waitFor } from "../helpers/pool.ts";

const probe = component("wasi-probe-js");
const echo = component("echo-wat");

let pool: Pool;

beforeAll(async () => {
  await buildTestComponents();
  pool = await startPool({ workers: 2, toolSlotsPerWorker: 4 });
  await Promise.all([probe, echo].map((ref) => pool.prepare(ref)));
}, 600_000);

afterAll(async () => {
  await pool?.close();
});

/** A guest that blocks on the monotonic clock for `seconds` (pollable.block, a synchronous WASI call). */
const SLEEPER =
  "const started = tools.clock.now(); tools.clock.subscribeDuration(BigInt(args.seconds) * 1000000000n).block(); return { sleptNs: String(tools.clock.now() - started) };";

describe("a guest blocked in a WASI call", () => {
  it("holds no thread: with a sleeper on every worker, other calls are served at once", async () => {
    const controller = new AbortController();
    const settled: Receipt[] = [];
    const sleepers = [0, 1].map(() =>
      run(pool, probe, { v: 1, source: SLEEPER, args: { seconds: 60 } }, { signal: controller.signal, deadlineMs: Date.now() + 120_000 }).then((receipt) => {
        settled.push(receipt);
        return receipt;
      }),
    );
    await waitFor(() => pool.stats().workers.every((worker) => worker.tools === 1), 30_000, "a sleeper on each worker");
    // Each worker's thread is free: calls on both workers return while the sleepers sleep.
    for (let i = 0; i < 6; i++) expect(output(await run(pool, echo, { v: i }))).toEqual({ v: i });
    expect(settled).toEqual([]);
    // A suspended guest stops at once when cancelled, and its worker stays.
    controller.abort();
    for (const receipt of await Promise.all(sleepers)) expect(receipt).toMatchObject({ outcome: "failure", code: "cancelled" });
    expect(pool.stats().replacements).toBe(0);
  }, 120_000);

  it("wakes when its wait is over, and the wait costs no fuel", async () => {
    const short = output(await run(pool, probe, { v: 1, source: SLEEPER, args: { seconds: 0 } })) as { result: { sleptNs: string } };
    const long = await run(pool, probe, { v: 1, source: SLEEPER, args: { seconds: 1 } });
    expect(BigInt((output(long) as { result: { sleptNs: string } }).result.sleptNs)).toBeGreaterThanOrEqual(1_000_000_000n);
    expect(short.result).toBeDefined();
    // The same guest, the same work: only the wait differs, and waiting is not computing.
    const shortAgain = await run(pool, probe, { v: 1, source: SLEEPER, args: { seconds: 0 } });
    if (long.outcome !== "returned" || shortAgain.outcome !== "returned") throw new Error("expected returned receipts");
    expect(Math.abs(long.fuelUsed - shortAgain.fuelUsed)).toBeLessThan(shortAgain.fuelUsed / 100);
  }, 120_000);

  it("past its deadline while suspended, it ends timeout without stopping its worker", async () => {
    const before = pool.stats().replacements;
    const receipt = await run(pool, probe, { v: 1, source: SLEEPER, args: { seconds: 60 } }, { deadlineMs: Date.now() + 1000 });
    expect(receipt).toMatchObject({ outcome: "failure", code: "timeout" });
    expect(pool.stats().replacements).toBe(before);
  }, 60_000);
});
