import { createHash } from "node:crypto";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { transpile } from "@bytecodealliance/jco";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { capMemory, FUEL_IMPORT, instrumentFuel } from "../../src/engine/fuel/index.ts";
import { memoryPages, TRANSPILE_OPTIONS } from "../../src/engine/preparation/index.ts";
import type { HostServices, Pool, Receipt } from "../../src/engine/pool/index.ts";
import { testComponent } from "../helpers/components.ts";
import { buildTestComponents, component, COMPONENTS_DIR, killWorker, NO_GRANTS, output, run, startPool, tempDir, waitFor } from "../helpers/pool.ts";

const echo = component("echo-wat");
const counter = component("counter-wat");
const fib = component("fib-wat");
const loop = component("loop-wat");
const hog = component("memory-hog-wat");
const trap = component("trap-wat");
const echoJs = component("echo-js");
const agentLoop = component("agent-loop-js");

let pool: Pool;

interface InstantiationGlue {
  instantiate(
    getCoreModule: (file: string) => WebAssembly.Module | undefined,
    imports: object,
    instantiateCore: (module: WebAssembly.Module, imports: WebAssembly.Imports) => WebAssembly.Instance,
  ): Promise<{ run(input: string, configuration: string, deadlineMs: bigint): Promise<string> }>;
}

/**
 * Fuel one `run` uses when the component is prepared as the pool prepares it (jco with the same
 * options, fuel, memory cap) and instantiated on this thread, with no pool, worker or spare.
 */
async function fuelInThisThread(component: Uint8Array, input: string): Promise<number> {
  const dir = await tempDir("fuel-here-");
  try {
    const options = { ...TRANSPILE_OPTIONS, asyncImports: [...TRANSPILE_OPTIONS.asyncImports], asyncExports: [...TRANSPILE_OPTIONS.asyncExports] };
    const { files } = (await transpile(component, options as never)) as { files: Record<string, Uint8Array> };
    const modules = new Map<string, WebAssembly.Module>();
    for (const [file, bytes] of Object.entries(files)) {
      if (file.endsWith(".wasm")) modules.set(file, new WebAssembly.Module(capMemory(instrumentFuel(bytes).bytes, memoryPages(256))));
      else await writeFile(join(dir.path, "glue.mjs"), bytes);
    }
    const glue = (await import(pathToFileURL(join(dir.path, "glue.mjs")).href)) as InstantiationGlue;
    const budget = 10_000_000_000n;
    const fuel = new WebAssembly.Global({ value: "i64", mutable: true }, budget);
    const instance = await glue.instantiate(
      (file: string) => modules.get(file),
      {},
      (module: WebAssembly.Module, imports: WebAssembly.Imports) =>
        new WebAssembly.Instance(module, { ...imports, [FUEL_IMPORT.module]: { [FUEL_IMPORT.name]: fuel } }),
    );
    await instance.run(input, "{}", BigInt(Date.now() + 30_000));
    return Number(budget - (fuel.value as bigint));
  } finally {
    await dir.remove();
  }
}

beforeAll(async () => {
  await buildTestComponents();
  pool = await startPool();
  await Promise.all([echo, counter, fib, loop, hog, trap, echoJs, agentLoop].map((ref) => pool.prepare(ref)));
}, 600_000);

afterAll(async () => {
  await pool?.close();
});

describe("pool basics", () => {
  it("round-trips a WAT and a componentize-js echo", async () => {
    expect(output(await run(pool, echo, { v: 1, hello: "wat" }))).toEqual({ v: 1, hello: "wat" });
    expect(output(await run(pool, echoJs, { v: 1, hello: "js" }))).toEqual({ v: 1, hello: "js" });
    expect(pool.isPrepared("echo-wat")).toBe(true);
    expect(pool.stats().workers.every((worker) => worker.state === "ready")).toBe(true);
  }, 60_000);

  it("gives every invocation a fresh instance (the counter always answers 1)", async () => {
    // As many at once as there are tool slots (2 workers x 2).
    const receipts = await Promise.all(Array.from({ length: 4 }, () => run(pool, counter, {})));
    for (const receipt of receipts) expect(output(receipt)).toEqual({ v: 1, count: 1 });
    for (let i = 0; i < 5; i++) expect(output(await run(pool, counter, {}))).toEqual({ v: 1, count: 1 });
  });

  it("meters fuel deterministically", async () => {
    const a = await run(pool, fib, "20");
    const b = await run(pool, fib, "20");
    const c = await run(pool, fib, "22");
    expect(output(a)).toEqual({ v: 1, fib: 6765 });
    expect(a.outcome === "returned" && b.outcome === "returned" && c.outcome === "returned").toBe(true);
    if (a.outcome !== "returned" || b.outcome !== "returned" || c.outcome !== "returned") return;
    expect(a.fuelUsed).toBeGreaterThan(0);
    expect(b.fuelUsed).toBe(a.fuelUsed);
    expect(c.fuelUsed).toBeGreaterThan(a.fuelUsed * 2);
    // The same with JavaScript inside StarlingMonkey.
    const j1 = await run(pool, echoJs, { v: 1 });
    const j2 = await run(pool, echoJs, { v: 1 });
    expect(j1.outcome === "returned" && j2.outcome === "returned" && j1.fuelUsed === j2.fuelUsed).toBe(true);
  });

  it("charges exactly the fuel the same prepared component uses in this thread", async () => {
    const cases: [string, string][] = [
      ["fib-wat", "21"],
      ["echo-js", JSON.stringify({ v: 1, text: "same fuel" })],
    ];
    for (const [name, input] of cases) {
      // Named by content: the shared data dir may hold an older build prepared under the plain name.
      const bytes = await readFile(join(COMPONENTS_DIR, `${name}.wasm`));
      const ref = { id: `${name}-${createHash("sha256").update(bytes).digest("hex").slice(0, 16)}`, load: async () => bytes };
      const receipt = await run(pool, ref, input);
      expect(receipt.outcome).toBe("returned");
      if (receipt.outcome !== "returned") return;
      expect(receipt.fuelUsed).toBe(await fuelInThisThread(bytes, input));
    }
  }, 120_000);

  it("stops a runaway loop when its fuel runs out", async () => {
    const receipt = await run(pool, loop, {}, { fuel: 2_000_000 });
    expect(receipt).toMatchObject({ outcome: "failure", code: "fuel_exhausted", fuelUsed: 2_000_000 });
    // A budget too small for the JS engine's own start-up is exhausted too.
    expect(await run(pool, echoJs, { v: 1 }, { fuel: 1000 })).toMatchObject({ outcome: "failure", code: "fuel_exhausted" });
  });

  it("stops a runaway loop at its deadline by stopping its worker process, and replaces the worker", async () => {
    const before = pool.stats();
    // Without the watchdog the loop would run until its 10 billion fuel units are spent.
    const receipt = await run(pool, loop, {}, { deadlineMs: Date.now() + 300 });
    expect(receipt).toMatchObject({ outcome: "failure", code: "timeout" });
    await waitFor(() => pool.stats().replacements === before.replacements + 1, 10_000, "the worker to be replaced");
    expect(output(await run(pool, echo, { v: 1 }))).toEqual({ v: 1 });
  });

  it("cancels a waiting guest at once, and one not started yet before it runs", async () => {
    const controller = new AbortController();
    let asked!: () => void;
    const modelCalled = new Promise<void>((resolve) => (asked = resolve));
    const host: HostServices = { callModel: () => (asked(), new Promise(() => undefined)), dispatchTools: async () => "{}", emit: () => undefined };
    const pending = run(pool, agentLoop, { v: 1, message: "hi" }, { entrypoint: "turn", host, signal: controller.signal });
    await modelCalled;
    controller.abort();
    expect(await pending).toMatchObject({ outcome: "failure", code: "cancelled" });

    const early = new AbortController();
    early.abort();
    expect(await run(pool, echo, { v: 1 }, { signal: early.signal })).toMatchObject({
      outcome: "failure",
      code: "cancelled",
      message: expect.stringContaining("did not run"),
    });
  });

  it("an already expired deadline fails at once", async () => {
    expect(await run(pool, echo, {}, { deadlineMs: Date.now() - 1 })).toMatchObject({ outcome: "failure", code: "timeout" });
  });

  it("stops a memory hog at the memory cap", async () => {
    const small = await startPool({ workers: 1, memoryMib: 16 });
    try {
      const receipt = await run(small, hog, {});
      expect(receipt).toMatchObject({ outcome: "failure", code: "memory_exhausted" });
    } finally {
      await small.close();
    }
  }, 60_000);

  it("reports a fault that is neither fuel nor memory as guest_trap, and the worker keeps serving", async () => {
    const receipt = await run(pool, trap, {});
    expect(receipt).toMatchObject({ outcome: "failure", code: "guest_trap" });
    expect((receipt as { message: string }).message).toMatch(/unreachable/);
    expect(output(await run(pool, echo, { v: 1, after: "trap" }))).toEqual({ v: 1, after: "trap" });
  });

  it("reports a guest's own failure with its code", async () => {
    const receipt = await run(pool, agentLoop, "not json", {
      entrypoint: "turn",
      host: { callModel: async () => "{}", dispatchTools: async () => "{}", emit: () => undefined },
    });
    expect(receipt).toMatchObject({ outcome: "failure", code: "invalid_input" });
  });

  it("prepares on first use when nobody prepared explicitly, sharing one preparation", async () => {
    const fresh = component("counter-wat");
    const other = await startPool({ workers: 2 });
    try {
      const receipts = await Promise.all([run(other, fresh, {}), run(other, fresh, {}), run(other, fresh, {})]);
      for (const receipt of receipts) expect(output(receipt)).toEqual({ v: 1, count: 1 });
      expect(fresh.loads).toBeLessThanOrEqual(1);
      expect(other.isPrepared("counter-wat")).toBe(true);
      expect(other.stats().prepared).toBe(1);
    } finally {
      await other.close();
    }
  });

  it("reports preparation failures as receipts", async () => {
    const broken = { id: "broken-component", load: async () => new Uint8Array([1, 2, 3]) };
    const receipt = await run(pool, broken, {});
    expect(receipt).toMatchObject({ outcome: "failure", code: "preparation_failed" });
    expect(receipt.outcome === "failure" && receipt.message).toContain("broken-component");
    await expect(pool.prepare(broken)).rejects.toThrow(/broken-component/);
  });
});

describe("programs on the QuickJS runtime (qjs-program-tool)", () => {
  const runtime = component("qjs-program-tool");
  const runProgram = (source: string, input: unknown = {}) => run(pool, runtime, input, { program: { source } });

  it("runs a synchronous program in a fresh instance each time", async () => {
    const counting = "function run(input) { globalThis.calls = (globalThis.calls ?? 0) + 1; return { calls: globalThis.calls, sum: input.a + input.b }; }";
    for (let i = 0; i < 3; i++) expect(output(await runProgram(counting, { a: 1, b: 2 }))).toEqual({ calls: 1, sum: 3 });
  }, 60_000);

  it("runs an agent-loop program whose host calls suspend the guest (qjs-program-agent-loop)", async () => {
    const loop = component("qjs-program-agent-loop");
    const events: string[] = [];
    const host: HostServices = {
      callModel: async (request) => {
        await new Promise((resolve) => setTimeout(resolve, 5));
        return JSON.stringify({ v: 1, heard: JSON.parse(request) });
      },
      dispatchTools: () => Promise.reject({ code: "tool_failed", message: "no tools here" }),
      emit: (event) => void events.push(event),
    };
    const turn = (source: string) =>
      pool.invoke({
        component: loop,
        entrypoint: "turn",
        input: '{"q":"hi"}',
        configuration: "{}",
        deadlineMs: Date.now() + 30_000,
        grants: NO_GRANTS,
        host,
        program: { source },
      });
    const answered = await turn("function turn(input, configuration, host) { host.emit({ v: 1, kind: 'asked' }); return host.callModel({ q: input.q }); }");
    expect(output(answered)).toEqual({ v: 1, heard: { q: "hi" } });
    expect(events).toEqual(['{"v":1,"kind":"asked"}']);
    const caught = await turn("function turn(input, configuration, host) { try { host.dispatchTools({}); } catch (error) { return { caught: error.code }; } }");
    expect(output(caught)).toEqual({ caught: "tool_failed" });
  }, 60_000);

  it("refuses an async program, and passes a thrown failure through", async () => {
    expect(await runProgram("async function run(input) { return input; }")).toMatchObject({ outcome: "failure", code: "invalid_program" });
    expect(await runProgram("function run() { throw { code: 'nope', message: 'refused' }; }")).toMatchObject({
      outcome: "failure",
      code: "nope",
      message: "refused",
    });
  }, 60_000);
});

describe("what preparation refuses", () => {
  it("a tool whose run has another signature is not prepared, and no invocation runs it", async () => {
    const badRun = { id: "bad-run", load: () => testComponent("bad-run") };
    await expect(pool.prepare(badRun)).rejects.toThrow(/bad-run.*run is func\(\) -> s32/);
    const receipt = await run(pool, badRun, {});
    expect(receipt).toMatchObject({ outcome: "failure", code: "preparation_failed" });
    expect(pool.isPrepared("bad-run")).toBe(false);
  });

  it("a component taking a function its WASI interface lacks is not prepared", async () => {
    const randomF = { id: "random-f", load: () => testComponent("tool-random-f") };
    await expect(pool.prepare(randomF)).rejects.toThrow(/f of wasi:random\/random@0\.2\.3, which the service environment does not provide/);
    expect(await run(pool, randomF, {})).toMatchObject({ outcome: "failure", code: "preparation_failed" });
    expect(pool.isPrepared("random-f")).toBe(false);
  });
});

describe("spare instances", () => {
  const MiB = 1024 * 1024;

  it("hold no more memory than their budget, and refilling stops when the next one would not fit", async () => {
    // big-memory-wat starts with 162.5 MiB of memory: one spare fits in 256 MiB, two do not.
    const big = component("big-memory-wat");
    const spareful = await startPool({ workers: 1, spareInstances: 2, spareMemoryMib: 256 });
    try {
      await spareful.prepare(big);
      expect(output(await run(spareful, big, { v: 1 }))).toEqual({ v: 1 });
      let spares = await sparesOf(spareful);
      for (let polls = 0; spares.instances !== 1; polls++) {
        if (polls > 500) throw new Error(`the spares never settled: ${JSON.stringify(spares)}`);
        spares = await sparesOf(spareful);
      }
      expect(spares.bytes).toBe(2600 * 65536);
      // Settled for good: every later look finds the same spare, none instantiated since. (The
      // old policy instantiated a second one, evicted one, and started over, without end.)
      for (let look = 0; look < 20; look++) {
        await new Promise((resolve) => setTimeout(resolve, 5));
        expect(await sparesOf(spareful)).toEqual(spares);
      }
    } finally {
      await spareful.close();
    }
  }, 60_000);

  it("are kept only for components in use: none after preparation, then refilled after a call", async () => {
    const lazy = await startPool({ workers: 1, spareInstances: 2, spareMemoryMib: 256 });
    try {
      await Promise.all([echo, echoJs, fib].map((ref) => lazy.prepare(ref)));
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(await sparesOf(lazy)).toEqual({ instances: 0, bytes: 0, instantiated: 0 });
      await run(lazy, echo, { v: 1 });
      await waitForSpares(lazy, 2);
      expect((await sparesOf(lazy)).instantiated).toBe(2);
    } finally {
      await lazy.close();
    }
  }, 60_000);

  it("are never instantiated when one would not fit in the budget at all", async () => {
    const big = component("big-memory-wat");
    const frugal = await startPool({ workers: 1, spareInstances: 2, spareMemoryMib: 128 });
    try {
      await frugal.prepare(big);
      for (let i = 0; i < 3; i++) expect(output(await run(frugal, big, { v: i }))).toEqual({ v: i });
      expect(await sparesOf(frugal)).toEqual({ instances: 0, bytes: 0, instantiated: 0 });
      // A small component still gets its spares beside it.
      await frugal.prepare(echo);
      await run(frugal, echo, { v: 1 });
      await waitForSpares(frugal, 2);
      expect((await sparesOf(frugal)).bytes).toBeLessThanOrEqual(128 * MiB);
    } finally {
      await frugal.close();
    }
  }, 60_000);
});

describe("recycled memories (a small memory is zeroed and given to the next instance)", () => {
  const residue = component("memory-residue-wat");

  it("never shows an instance what an earlier one left in its memory, sequential or concurrent", async () => {
    // One worker, so that every call after the first few gets a memory an earlier call filled.
    const single = await startPool({ workers: 1, toolSlotsPerWorker: 4, workspaceToolSlots: 4 });
    try {
      await single.prepare(residue);
      for (let i = 0; i < 30; i++) expect(output(await run(single, residue, { v: i }))).toBe("clean");
      for (let round = 0; round < 5; round++) {
        const receipts = await Promise.all(Array.from({ length: 4 }, (_, i) => run(single, residue, { v: round * 4 + i })));
        for (const receipt of receipts) expect(output(receipt)).toBe("clean");
      }
      // The memories were recycled: each guest filled the one it was given, and few were made.
      const { memories } = await single.report(0);
      expect(memories.reused).toBeGreaterThanOrEqual(40);
      expect(memories.made).toBeLessThanOrEqual(10);
      expect(memories.made + memories.reused).toBeGreaterThanOrEqual(50);
    } finally {
      await single.close();
    }
  }, 120_000);

  it("drops a memory that grew, and one whose guest trapped is zeroed like any other", async () => {
    const single = await startPool({ workers: 1, memoryMib: 16 });
    try {
      await Promise.all([hog, residue, trap].map((ref) => single.prepare(ref)));
      const before = (await single.report(0)).memories;
      expect(await run(single, hog, {})).toMatchObject({ outcome: "failure", code: "memory_exhausted" });
      expect(await run(single, trap, {})).toMatchObject({ outcome: "failure", code: "guest_trap" });
      const after = (await single.report(0)).memories;
      // The hog's memory grew to the cap: dropped. The trap's was not grown: kept.
      expect(after.dropped - before.dropped).toBe(1);
      for (let i = 0; i < 5; i++) expect(output(await run(single, residue, { v: i }))).toBe("clean");
    } finally {
      await single.close();
    }
  }, 120_000);
});

/** The spare instances worker 0 reports. */
async function sparesOf(target: Pool) {
  return (await target.report(0)).spares;
}

/** Polls worker 0 until it holds `count` spares (bounded: a hang fails the test). */
async function waitForSpares(target: Pool, count: number): Promise<void> {
  for (let polls = 0; (await sparesOf(target)).instances !== count; polls++) {
    if (polls > 500) throw new Error(`worker 0 never held ${count} spares`);
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
}

describe("crashes and capacity", () => {
  it("a worker killed mid-call gives unknown; its replacement restores preparation without transpiling", async () => {
    const crashy = await startPool({ workers: 2 });
    try {
      await crashy.prepare(echo);
      await crashy.prepare(loop);
      const transpiles = crashy.stats().transpiles;
      const pending = run(crashy, loop, {}, { deadlineMs: Date.now() + 60_000 });
      // Killed once its guest runs (WorkerStats.running), not merely dispatched to its worker.
      await waitFor(() => crashy.stats().workers.some((worker) => worker.running === 1), 5000, "the loop to start");
      const index = crashy.stats().workers.findIndex((worker) => worker.running === 1);
      killWorker(crashy, index);
      const receipt = await pending;
      expect(receipt.outcome).toBe("unknown");
      await waitFor(() => crashy.stats().replacements === 1 && crashy.stats().workers[index]!.loaded === 2, 20_000, "the replacement to restore preparation");
      expect(crashy.stats().replacements).toBe(1);
      expect(crashy.isPrepared("echo-wat")).toBe(true);
      expect(crashy.stats().workers[index]).toMatchObject({ state: "ready", loaded: 2 });
      // Calls work on every worker, and nothing was transpiled again.
      const receipts = await Promise.all(Array.from({ length: 4 }, () => run(crashy, echo, { v: 1 })));
      for (const r of receipts) expect(output(r)).toEqual({ v: 1 });
      expect(crashy.stats().transpiles).toBe(transpiles);
    } finally {
      await crashy.close();
    }
  }, 60_000);

  it("without a queue, fails at once with pool_saturated when every tool slot is busy", async () => {
    const busy = await startPool({ workers: 2, toolSlotsPerWorker: 2, queueLength: 0 });
    try {
      await busy.prepare(loop);
      await busy.prepare(echo);
      const loops = Array.from({ length: 4 }, () => run(busy, loop, {}, { deadlineMs: Date.now() + 60_000 }));
      await waitFor(() => busy.stats().inFlight.tools === 4, 5000, "four loops in flight");
      const receipt = await run(busy, echo, { v: 1 });
      expect(receipt).toMatchObject({ outcome: "failure", code: "pool_saturated" });
      // The refusal did not wait for a slot: the loops, which only end when the pool closes, all
      // still hold theirs.
      expect(busy.stats().inFlight.tools).toBe(4);
      // Agent loops have their own capacity: a turn is not refused because tools are busy.
      expect(busy.stats().capacity.agentLoops).toBeGreaterThan(0);
      await waitFor(() => busy.stats().workers.every((worker) => worker.busy), 10_000, "a loop computing on each worker");
      await busy.close();
      // One loop computes on each worker; the other sent there never started.
      const outcomes = (await Promise.all(loops)).map((r) => (r.outcome === "failure" ? r.code : r.outcome)).sort();
      expect(outcomes, JSON.stringify(outcomes)).toEqual(["unavailable", "unavailable", "unknown", "unknown"]);
    } finally {
      await busy.close();
    }
  }, 60_000);

  it("agent loops filling every worker still get their nested tool calls run", async () => {
    const loops = await startPool({ workers: 2, agentLoopSlotsPerWorker: 2, toolSlotsPerWorker: 2, queueLength: 0 });
    try {
      await loops.prepare(agentLoop);
      await loops.prepare(echo);
      const turns = 4; // every agent-loop slot of both workers
      let waiting = 0;
      let releaseAll!: () => void;
      const allWaiting = new Promise<void>((resolve) => (releaseAll = resolve));
      let dispatching = 0;
      let releaseDispatch!: () => void;
      const allDispatching = new Promise<void>((resolve) => (releaseDispatch = resolve));
      const inFlightAtDispatch: number[] = [];
      const events: string[] = [];
      const host = (turn: number): HostServices => ({
        async callModel(request) {
          const { messages } = JSON.parse(request) as { messages: { role: string; content: string }[] };
          const toolMessage = messages.find((message) => message.role === "tool");
          if (toolMessage) return JSON.stringify({ v: 1, message: { content: `turn ${turn} saw ${toolMessage.content}` } });
          // Hold every turn until all of them are in flight: every slot is taken at once.
          if (++waiting === turns) releaseAll();
          await allWaiting;
          return JSON.stringify({ v: 1, message: { content: "", tool_calls: [{ id: `call-${turn}`, name: "echo", input: { v: 1, turn } }] } });
        },
        async dispatchTools(calls) {
          // Every turn is now inside dispatch-tools, holding its agent-loop slot, when the
          // tools run: they use the separate tool slots.
          if (++dispatching === turns) releaseDispatch();
          await allDispatching;
          inFlightAtDispatch.push(loops.stats().inFlight.agentLoops);
          const { calls: list } = JSON.parse(calls) as { calls: { id: string; input: unknown }[] };
          const results = await Promise.all(
            list.map(async (call) => {
              const receipt = await run(loops, echo, call.input);
              return receipt.outcome === "returned" ? { id: call.id, output: JSON.parse(receipt.output) } : { id: call.id, error: receipt };
            }),
          );
          return JSON.stringify({ v: 1, results });
        },
        emit: (event) => events.push(event),
      });
      const pending = Array.from({ length: turns }, (_, turn) =>
        loops.invoke({
          component: agentLoop,
          entrypoint: "turn",
          input: JSON.stringify({ v: 1, message: `hello ${turn}` }),
          configuration: "{}",
          deadlineMs: Date.now() + 60_000,
          grants: NO_GRANTS,
          host: host(turn),
        }),
      );
      await allWaiting;
      // One more turn finds no agent-loop slot (and, without a queue, is refused at once).
      const extra = await loops.invoke({
        component: agentLoop,
        entrypoint: "turn",
        input: JSON.stringify({ v: 1, message: "x" }),
        configuration: "{}",
        deadlineMs: Date.now() + 60_000,
        grants: NO_GRANTS,
        host: host(99),
      });
      expect(extra).toMatchObject({ outcome: "failure", code: "pool_saturated" });
      const receipts: Receipt[] = await Promise.all(pending);
      receipts.forEach((receipt, turn) => {
        expect(output(receipt)).toEqual({
          v: 1,
          message: `turn ${turn} saw ${JSON.stringify({ v: 1, turn })}`,
          tool_results: [{ id: `call-${turn}`, output: { v: 1, turn } }],
        });
      });
      expect(inFlightAtDispatch).toEqual([turns, turns, turns, turns]);
      expect(events.filter((event) => event.includes("turn_started"))).toHaveLength(turns);
    } finally {
      await loops.close();
    }
  }, 120_000);

  it("a new pool on the same data directory reuses the persisted preparation", async () => {
    const dir = await tempDir("skillenv-pool-restart-");
    try {
      const first = await startPool({ dataDir: dir.path, workers: 1 });
      await first.prepare(component("echo-wat"));
      await first.prepare(component("echo-js"));
      expect(first.stats().transpiles).toBe(2);
      await first.close();

      const second = await startPool({ dataDir: dir.path, workers: 2 });
      try {
        const js = component("echo-js");
        await second.prepare(js);
        await second.prepare(component("echo-wat"));
        expect(second.stats()).toMatchObject({ transpiles: 0, preparedFromDisk: 2 });
        expect(js.loads).toBe(0);
        expect(output(await run(second, js, { v: 1, again: true }))).toEqual({ v: 1, again: true });
      } finally {
        await second.close();
      }
    } finally {
      await dir.remove();
    }
  }, 120_000);

  it("close ends in-flight invocations as unknown and refuses new ones", async () => {
    const closing = await startPool({ workers: 1 });
    await closing.prepare(loop);
    const pending = run(closing, loop, {}, { deadlineMs: Date.now() + 60_000 });
    // Its guest holds the thread: it has started.
    await waitFor(() => closing.stats().workers[0]!.busy);
    await closing.close();
    expect((await pending).outcome).toBe("unknown");
    expect(await run(closing, echo, {})).toMatchObject({ outcome: "failure", code: "unavailable" });
  }, 30_000);
});
