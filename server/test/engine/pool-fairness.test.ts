// The pool's share-out between workspaces (issue #18): each holds at most its share of slots,
// what cannot start waits in its workspace's queue and gets freed slots in turn with the others,
// nothing that waited or never started is ever reported as possibly run, and new work avoids a
// worker whose thread a guest holds.
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import type { Pool, Receipt } from "../../src/engine/pool/index.ts";
import { buildTestComponents, component, killWorker, output, run, startPool, waitFor } from "../helpers/pool.ts";

const probe = component("wasi-probe-js");
const echo = component("echo-wat");
const loop = component("loop-wat");
/** A guest that waits on a clock (suspended: it holds a slot, not a thread) until cancelled. */
const SLEEPER = "tools.clock.subscribeDuration(600000000000n).block(); return 'woke';";

let pool: Pool | undefined;

beforeAll(async () => {
  await buildTestComponents();
}, 600_000);

afterEach(async () => {
  await pool?.close();
  pool = undefined;
});

function sleep(target: Pool, tenant: string, signal: AbortSignal): Promise<Receipt> {
  return run(target, probe, { v: 1, source: SLEEPER }, { tenant, signal, deadlineMs: Date.now() + 120_000 });
}

describe("a workspace's share of the pool", () => {
  it("holds at most its share; its other calls wait instead of being refused, up to its queue, and other workspaces still start", async () => {
    pool = await startPool({ workers: 1, toolSlotsPerWorker: 4, workspaceToolSlots: 2, queueLength: 3 });
    await Promise.all([probe, echo].map((ref) => pool!.prepare(ref)));
    const flood = new AbortController();
    const a = Array.from({ length: 5 }, () => sleep(pool!, "a", flood.signal));
    await waitFor(() => pool!.stats().inFlight.tools === 2 && pool!.stats().waiting.tools === 3, 30_000, "two running, three waiting");
    // A sixth is one too many for a's queue: refused at once, nothing ran.
    expect(await sleep(pool, "a", flood.signal)).toMatchObject({ outcome: "failure", code: "pool_saturated", message: expect.stringContaining("not started") });
    // b has its own share: its calls start at once, beside a's.
    for (let i = 0; i < 3; i++) expect(output(await run(pool, echo, { v: i }, { tenant: "b" }))).toEqual({ v: i });
    flood.abort();
    const receipts = await Promise.all(a);
    expect(receipts.map((receipt) => receipt.outcome === "failure" && receipt.code)).toEqual(["cancelled", "cancelled", "cancelled", "cancelled", "cancelled"]);
    // The three that waited say they did not run.
    expect(receipts.filter((receipt) => receipt.outcome === "failure" && /did not run/.test(receipt.message))).toHaveLength(3);
  }, 120_000);

  it("gives freed slots to the waiting workspaces in turn", async () => {
    pool = await startPool({ workers: 1, toolSlotsPerWorker: 1, workspaceToolSlots: 1, queueLength: 8 });
    await Promise.all([probe, echo].map((ref) => pool!.prepare(ref)));
    const holder = new AbortController();
    const held = sleep(pool, "a", holder.signal);
    await waitFor(() => pool!.stats().inFlight.tools === 1, 30_000, "the slot taken");
    const order: string[] = [];
    const queued = [
      ["a", 1],
      ["a", 2],
      ["a", 3],
      ["b", 1],
      ["c", 1],
      ["b", 2],
    ].map(([tenant, i]) => run(pool!, echo, { v: i }, { tenant: tenant as string }).then((receipt) => order.push(`${tenant}${i}:${receipt.outcome}`)));
    await waitFor(() => pool!.stats().waiting.tools === 6, 30_000, "six waiting");
    holder.abort();
    await held;
    await Promise.all(queued);
    // One slot: each starts when the last ends, workspaces in the order they came to wait, by turns.
    expect(order).toEqual(["a1:returned", "b1:returned", "c1:returned", "a2:returned", "b2:returned", "a3:returned"]);
  }, 120_000);

  it("a call whose deadline passes while it waits ends timeout, and it did not run", async () => {
    pool = await startPool({ workers: 1, toolSlotsPerWorker: 1, workspaceToolSlots: 1, queueLength: 8 });
    await Promise.all([probe, echo].map((ref) => pool!.prepare(ref)));
    const holder = new AbortController();
    const held = sleep(pool, "a", holder.signal);
    await waitFor(() => pool!.stats().inFlight.tools === 1, 30_000, "the slot taken");
    const late = await run(pool, echo, { v: 1 }, { tenant: "b", deadlineMs: Date.now() + 500 });
    expect(late).toMatchObject({ outcome: "failure", code: "timeout", message: expect.stringContaining("did not run") });
    expect(pool.stats().waiting.tools).toBe(0);
    holder.abort();
    await held;
  }, 120_000);
});

describe("a workspace's share of the workers", () => {
  it("keeps a workspace whose guests compute without end to its share of the workers; the others serve everyone else", async () => {
    pool = await startPool({ workers: 2, toolSlotsPerWorker: 4, workspaceWorkers: 1 });
    await Promise.all([loop, echo].map((ref) => pool!.prepare(ref)));
    const loops = [1, 2].map(() => run(pool!, loop, {}, { tenant: "a", deadlineMs: Date.now() + 60_000 }));
    await waitFor(() => pool!.stats().inFlight.tools === 2 && pool!.stats().workers.some((worker) => worker.busy), 30_000, "a's loops sent, one computing");
    // Both on one worker: the other is free of a.
    expect(
      pool
        .stats()
        .workers.map((worker) => worker.tools)
        .sort(),
    ).toEqual([0, 2]);
    // Each of these would wait behind a computing loop on a's worker: b's calls never go there.
    for (let i = 0; i < 6; i++) expect(output(await run(pool, echo, { v: i }, { tenant: "b" }))).toEqual({ v: i });
    killWorker(
      pool,
      pool.stats().workers.findIndex((worker) => worker.tools === 2),
    );
    // The loop that computed may have run; the one queued behind it on the same worker did not.
    const outcomes = (await Promise.all(loops)).map((receipt) => (receipt.outcome === "failure" ? receipt.code : receipt.outcome)).sort();
    expect(outcomes).toEqual(["unavailable", "unknown"]);
  }, 120_000);

  it("keeps a workspace whose worker was stopped to its replacement while it starts, not another workspace's worker", async () => {
    pool = await startPool({ workers: 2, toolSlotsPerWorker: 4, workspaceWorkers: 1 });
    await Promise.all([loop, echo].map((ref) => pool!.prepare(ref)));
    const looping = run(pool, loop, {}, { tenant: "a", deadlineMs: Date.now() + 60_000 });
    await waitFor(() => pool!.stats().workers.some((worker) => worker.running > 0), 30_000, "a's loop to start");
    const lost = pool.stats().workers.findIndex((worker) => worker.running > 0);
    const before = pool.stats().workers[lost]!.pid;
    killWorker(pool, lost);
    expect(await looping).toMatchObject({ outcome: "unknown" });
    await waitFor(() => pool!.stats().workers[lost]!.pid !== before, 30_000, "the replacement to be spawned");
    // The replacement is still loading its components: a's next call waits for it there, and the
    // other worker, ready and idle, stays b's (without the inheritance, a ready worker wins).
    expect(pool.stats().workers[lost]!.state).toBe("starting");
    const next = run(pool, echo, { v: 1 }, { tenant: "a" });
    expect(pool.stats().workers.map((worker) => worker.tools)).toEqual(lost === 0 ? [1, 0] : [0, 1]);
    expect(output(await next)).toEqual({ v: 1 });
    // Once it is ready, a workspace with nothing in flight goes where the scores say, as before.
    expect(output(await run(pool, echo, { v: 2 }, { tenant: "b" }))).toEqual({ v: 2 });
  }, 120_000);
});

describe("a workspace's share while its worker is replaced", () => {
  it("keeps what the workspace had waiting to the replacement of the worker its guest overran on, as that worker's invocations end", async () => {
    pool = await startPool({ workers: 2, toolSlotsPerWorker: 4, workspaceWorkers: 1, workspaceToolSlots: 2 });
    await Promise.all([loop, echo].map((ref) => pool!.prepare(ref)));
    // a's share of two slots: two loops, the first overrunning a short deadline, the second behind
    // it; two more loops wait in a's queue for a slot.
    const overrunning = run(pool, loop, {}, { tenant: "a", deadlineMs: Date.now() + 1_500 });
    const behind = run(pool, loop, {}, { tenant: "a", deadlineMs: Date.now() + 60_000 });
    await waitFor(() => pool!.stats().inFlight.tools === 2, 30_000, "a's first two loops sent");
    const lost = pool.stats().workers.findIndex((worker) => worker.tools === 2);
    const before = pool.stats().workers[lost]!.pid;
    const waiting = [1, 2].map(() => run(pool!, loop, {}, { tenant: "a", deadlineMs: Date.now() + 60_000 }));
    expect(pool.stats().waiting.tools).toBe(2);
    // The watchdog stops the worker; ending its two invocations frees a's slots, and the two
    // waiting loops start: on the replacement, not on the worker that serves everyone else.
    expect(await overrunning).toMatchObject({ outcome: "failure", code: "timeout" });
    expect(await behind).toMatchObject({ outcome: "failure", code: "unavailable" });
    await waitFor(() => pool!.stats().workers[lost]!.pid !== before && pool!.stats().waiting.tools === 0, 30_000, "a's waiting loops sent");
    expect(pool.stats().workers[lost]!.tools).toBe(2);
    expect(pool.stats().workers[1 - lost]!.tools).toBe(0);
    // So b's calls find a worker no guest of a holds.
    for (let i = 0; i < 4; i++) expect(output(await run(pool, echo, { v: i }, { tenant: "b" }))).toEqual({ v: i });
    expect(pool.stats().workers[lost]!.tools).toBe(2);
    // a's two loops go on until the pool is closed after the test, which ends them.
    void Promise.allSettled(waiting);
  }, 120_000);
});

describe("work that never started", () => {
  it("sent to a worker that was lost before starting it, ends unavailable (it did not run); what ran ends unknown", async () => {
    pool = await startPool({ workers: 1, toolSlotsPerWorker: 4, workspaceToolSlots: 4 });
    await Promise.all([loop, echo].map((ref) => pool!.prepare(ref)));
    // The loop holds the worker's only thread: the echoes sent after it cannot start.
    const looping = run(pool, loop, {}, { deadlineMs: Date.now() + 60_000 });
    await waitFor(() => pool!.stats().workers[0]!.busy, 30_000, "the loop to hold the thread");
    const echoes = [1, 2].map((v) => run(pool!, echo, { v }));
    await waitFor(() => pool!.stats().inFlight.tools === 3, 30_000, "the echoes sent");
    killWorker(pool, 0);
    expect(await looping).toMatchObject({ outcome: "unknown" });
    for (const receipt of await Promise.all(echoes))
      expect(receipt).toMatchObject({ outcome: "failure", code: "unavailable", message: expect.stringContaining("did not run") });
  }, 120_000);

  it("new calls go to a worker whose thread no guest holds", async () => {
    pool = await startPool({ workers: 2, toolSlotsPerWorker: 4, workspaceToolSlots: 8 });
    await Promise.all([loop, echo].map((ref) => pool!.prepare(ref)));
    const looping = run(pool, loop, {}, { deadlineMs: Date.now() + 60_000 });
    await waitFor(() => pool!.stats().workers.some((worker) => worker.busy), 30_000, "the loop to hold its thread");
    const busy = pool.stats().workers.findIndex((worker) => worker.busy);
    // Every one of these would wait behind the loop on its worker; none is sent there.
    for (let i = 0; i < 6; i++) expect(output(await run(pool, echo, { v: i }))).toEqual({ v: i });
    expect(pool.stats().workers[busy]!.tools).toBe(1);
    killWorker(pool, busy);
    expect(await looping).toMatchObject({ outcome: "unknown" });
  }, 120_000);
});
