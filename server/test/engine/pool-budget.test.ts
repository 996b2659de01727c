// The compiled-code budget (PoolOptions.compiledMemoryMib): least recently used components are
// unloaded past it and reloaded from their prepared files when next invoked.
import { beforeAll, describe, expect, it } from "vitest";
import type { HostServices, Pool, Receipt } from "../../src/engine/pool/index.ts";
import { buildTestComponents, component, killWorker, output, run, startPool, waitFor } from "../helpers/pool.ts";

const MiB = 1024 * 1024;
/** Smaller than any one component's core modules (WAT ones are 400-1200 bytes): only the newest stays. */
const ONE_COMPONENT = 100 / MiB;

beforeAll(async () => {
  await buildTestComponents();
}, 600_000);

async function withPool(overrides: Parameters<typeof startPool>[0], body: (pool: Pool) => Promise<void>): Promise<void> {
  const pool = await startPool(overrides);
  try {
    await body(pool);
  } finally {
    await pool.close();
  }
}

function loadedCounts(pool: Pool): number[] {
  return pool.stats().workers.map((worker) => worker.loaded);
}

describe("compiled-code budget", () => {
  it("preparing B past the budget unloads A; invoking A reloads it from its prepared files", async () => {
    await withPool({ compiledMemoryMib: ONE_COMPONENT }, async (pool) => {
      const echo = component("echo-wat");
      const fib = component("fib-wat");
      await pool.prepare(echo);
      await pool.prepare(fib);
      expect(pool.stats()).toMatchObject({ prepared: 1, unloads: 1 });
      expect(loadedCounts(pool)).toEqual([1, 1]);
      expect(pool.isPrepared("echo-wat")).toBe(false);
      expect(pool.isPrepared("fib-wat")).toBe(true);

      const before = pool.stats();
      expect(output(await run(pool, echo, { v: 1, back: true }))).toEqual({ v: 1, back: true });
      const after = pool.stats();
      expect(after.preparedFromDisk).toBe(before.preparedFromDisk + 1);
      expect(after.transpiles).toBe(before.transpiles);
      // Now fib-wat is the least recently used one.
      expect(after).toMatchObject({ prepared: 1, unloads: 2 });
      expect(pool.isPrepared("echo-wat")).toBe(true);
      expect(loadedCounts(pool)).toEqual([1, 1]);
      expect(output(await run(pool, fib, "20"))).toEqual({ v: 1, fib: 6765 });
    });
  }, 60_000);

  it("interleaved concurrent invocations of several components under a one-component budget all return", async () => {
    await withPool({ compiledMemoryMib: ONE_COMPONENT, toolSlotsPerWorker: 16 }, async (pool) => {
      const echo = component("echo-wat");
      const fib = component("fib-wat");
      const counter = component("counter-wat");
      for (let wave = 0; wave < 5; wave++) {
        const calls: [Promise<Receipt>, unknown][] = [];
        for (let i = 0; i < 4; i++) {
          calls.push([run(pool, echo, { v: 1, wave, i }), { v: 1, wave, i }]);
          calls.push([run(pool, fib, "20"), { v: 1, fib: 6765 }]);
          calls.push([run(pool, counter, {}), { v: 1, count: 1 }]);
        }
        for (const [receipt, expected] of calls) expect(output(await receipt)).toEqual(expected);
        // Once nothing is in flight, the budget holds again: only the most recently used stays.
        expect(pool.stats().prepared).toBe(1);
        expect(loadedCounts(pool)).toEqual([1, 1]);
      }
      expect(pool.stats().unloads).toBeGreaterThanOrEqual(2);
      expect(pool.stats().transpiles).toBe(0);
    });
  }, 60_000);

  it("an in-flight invocation's component is not unloaded under it", async () => {
    await withPool({ compiledMemoryMib: ONE_COMPONENT }, async (pool) => {
      const agentLoop = component("agent-loop-js");
      let asked!: () => void;
      const modelCalled = new Promise<void>((resolve) => (asked = resolve));
      let answer!: (reply: string) => void;
      const reply = new Promise<string>((resolve) => (answer = resolve));
      const host: HostServices = { callModel: () => (asked(), reply), dispatchTools: async () => "{}", emit: () => undefined };
      const pending = run(pool, agentLoop, { v: 1, message: "hi" }, { entrypoint: "turn", host });
      await modelCalled;
      await pool.prepare(component("echo-wat"));
      await pool.prepare(component("fib-wat"));
      // echo-wat went; the turn's component stayed, over the budget, while the turn runs.
      expect(pool.isPrepared("agent-loop-js")).toBe(true);
      expect(pool.isPrepared("echo-wat")).toBe(false);
      expect(pool.stats().prepared).toBe(2);
      answer(JSON.stringify({ v: 1, message: { content: "done" } }));
      expect(output(await pending)).toEqual({ v: 1, message: "done", tool_results: [] });
      // Released, it is the least recently used one and goes.
      expect(pool.isPrepared("agent-loop-js")).toBe(false);
      expect(pool.stats()).toMatchObject({ prepared: 1, unloads: 2 });
    });
  }, 120_000);

  it("a budget for one StarlingMonkey component: echo-js, unloaded by sum-js, reloads without transpiling", async () => {
    await withPool({ compiledMemoryMib: 20, toolSlotsPerWorker: 4 }, async (pool) => {
      const echoJs = component("echo-js");
      const sumJs = component("sum-js");
      await pool.prepare(echoJs);
      expect(output(await run(pool, echoJs, { v: 1 }))).toEqual({ v: 1 });

      await pool.prepare(sumJs);
      expect(pool.isPrepared("echo-js")).toBe(false);
      expect(pool.stats().prepared).toBe(1);
      const before = pool.stats();
      expect(output(await run(pool, echoJs, { v: 1, reloaded: true }))).toEqual({ v: 1, reloaded: true });
      expect(pool.stats().preparedFromDisk).toBe(before.preparedFromDisk + 1);
      expect(pool.stats().transpiles).toBe(before.transpiles);

      // Interleaved, each pushing the other out: every call returns.
      const receipts = await Promise.all(
        Array.from({ length: 6 }, (_, i) => (i % 2 === 0 ? run(pool, echoJs, { v: 1, i }) : run(pool, sumJs, { v: 1, n: 10 }))),
      );
      receipts.forEach((receipt, i) => expect(output(receipt)).toEqual(i % 2 === 0 ? { v: 1, i } : { v: 1, sum: 45 }));
      expect(pool.stats().prepared).toBe(1);
    });
  }, 120_000);

  it("the default (0) unloads nothing", async () => {
    await withPool({}, async (pool) => {
      for (const name of ["echo-wat", "fib-wat", "counter-wat"]) await pool.prepare(component(name));
      expect(pool.stats()).toMatchObject({ prepared: 3, unloads: 0 });
      expect(pool.stats().compiledBytes).toBeGreaterThan(0);
      expect(loadedCounts(pool)).toEqual([3, 3]);
    });
  }, 60_000);
});

describe("components loaded on use (loadOnUseMib)", () => {
  it("one larger than the threshold is loaded on one worker when prepared, on every worker once invoked", async () => {
    // 0: every component counts as larger.
    await withPool({ loadOnUseMib: 0, workers: 2 }, async (pool) => {
      const echo = component("echo-wat");
      const fib = component("fib-wat");
      await pool.prepare(echo);
      await pool.prepare(fib);
      // One copy each, on the worker holding less code: one on each.
      expect(loadedCounts(pool)).toEqual([1, 1]);
      expect((await Promise.all([pool.report(0), pool.report(1)])).map((report) => report.loaded)).toEqual([1, 1]);
      expect(pool.isPrepared("echo-wat")).toBe(true);
      expect(pool.isPrepared("fib-wat")).toBe(true);

      expect(output(await run(pool, echo, { v: 1 }))).toEqual({ v: 1 });
      // In use: every worker loads it; calls on either worker return meanwhile and after.
      const receipts = await Promise.all(Array.from({ length: 8 }, (_, i) => run(pool, echo, { v: 1, i })));
      receipts.forEach((receipt, i) => expect(output(receipt)).toEqual({ v: 1, i }));
      await waitFor(() => loadedCounts(pool).reduce((sum, count) => sum + count, 0) === 3, 20_000, "echo-wat to load on the other worker");
      expect(loadedCounts(pool).sort()).toEqual([1, 2]);
      expect(pool.stats().transpiles).toBe(0);
    });
  }, 60_000);

  it("a replacement restores what its predecessor held, and only that", async () => {
    await withPool({ loadOnUseMib: 0, workers: 2 }, async (pool) => {
      const echo = component("echo-wat");
      await pool.prepare(echo);
      const home = loadedCounts(pool).indexOf(1);
      expect(loadedCounts(pool)[1 - home]).toBe(0);
      killWorker(pool, home);
      await waitFor(() => pool.stats().replacements === 1 && pool.isPrepared("echo-wat"), 20_000, "the replacement to restore echo-wat");
      expect(loadedCounts(pool)[home]).toBe(1);
      expect(loadedCounts(pool)[1 - home]).toBe(0);
      expect(output(await run(pool, echo, { v: 1, again: true }))).toEqual({ v: 1, again: true });
    });
  }, 60_000);

  it("below the threshold (the default 1 MiB), a hand-written component loads on every worker when prepared", async () => {
    await withPool({ workers: 2 }, async (pool) => {
      await pool.prepare(component("echo-wat"));
      expect(loadedCounts(pool)).toEqual([1, 1]);
    });
  }, 60_000);
});
