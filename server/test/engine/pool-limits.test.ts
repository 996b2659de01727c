// Guests that attack the limits through the back doors: tables, which the memory cap once
// ignored, and start-up code, which runs before there is an instance to read the fuel from.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TABLE_ENTRY_BYTES, TABLE_GROWTH_SHARE } from "../../src/engine/fuel/index.ts";
import { compileCoreModules } from "../../src/engine/worker/components.ts";
import { classify, instantiate, loadComponent, newRecycling, type GuestInstance } from "../../src/engine/worker/guest.ts";
import { memoryPages, Preparer } from "../../src/engine/preparation/index.ts";
import type { Pool } from "../../src/engine/pool/index.ts";
import { buildTestComponents, component, run, SHARED_DATA_DIR, startPool } from "../helpers/pool.ts";

const MEMORY_MIB = 16;
const CAP_BYTES = MEMORY_MIB * 1024 * 1024;
const tableHog = component("table-hog-wat");
const startupLoop = component("startup-loop-wat");

let pool: Pool;

beforeAll(async () => {
  await buildTestComponents();
  pool = await startPool({ workers: 1, memoryMib: MEMORY_MIB });
}, 600_000);

afterAll(async () => {
  await pool?.close();
});

/** A fresh instance of a component prepared as the pool prepares it, on this thread (guest.ts, no worker). */
async function instanceHere(name: string, budget: bigint): Promise<GuestInstance> {
  const preparer = await Preparer.create({ dataDir: SHARED_DATA_DIR, memoryMib: MEMORY_MIB });
  try {
    const prepared = await preparer.prepare(component(name));
    const { modules, recycled } = await compileCoreModules(preparer.coreModuleFiles(prepared));
    const { entrypoints, imports, initialMemoryPages } = prepared.manifest;
    const facts = { entrypoints, imports, initialMemoryBytes: initialMemoryPages * 65536 };
    const loaded = loadComponent(name, await import(prepared.glueUrl), modules, facts, recycled, newRecycling());
    return await instantiate(loaded, budget, {});
  } finally {
    await preparer.close();
  }
}

/** What a promise rejected with (undefined when it resolved). */
function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => undefined,
    (thrown: unknown) => thrown,
  );
}

describe("tables count against the memory cap", () => {
  it("stops a guest growing eight tables by millions of entries: memory_exhausted", async () => {
    expect(await run(pool, tableHog, {})).toMatchObject({ outcome: "failure", code: "memory_exhausted" });
  }, 60_000);

  it("its tables end at the maxima the cap gave them, within the cap with its memory", async () => {
    const budget = 10_000_000_000n;
    const instance = await instanceHere("table-hog-wat", budget);
    const error = await rejection(instance.exports.run!("", "{}", BigInt(Date.now() + 30_000)) as Promise<unknown>);
    expect(String(error)).toMatch(/unreachable/);
    const tables = instance.capped.filter(({ object }) => object instanceof WebAssembly.Table);
    expect(tables).toHaveLength(8);
    // Tables may grow by a sixty-fourth of the cap together: 8192 entries at 16 MiB, 1024 each.
    const share = (CAP_BYTES * TABLE_GROWTH_SHARE) / TABLE_ENTRY_BYTES / 8;
    for (const { object, maximum } of tables) {
      expect(maximum).toBe(share);
      expect((object as WebAssembly.Table).length).toBe(maximum);
    }
    const tableBytes = tables.reduce((sum, { object }) => sum + (object as WebAssembly.Table).length * TABLE_ENTRY_BYTES, 0);
    const memoryBytes = instance.memories.reduce((sum, memory) => sum + memory.buffer.byteLength, 0);
    expect(tableBytes + memoryBytes).toBeLessThanOrEqual(CAP_BYTES);
    expect(classify(error, instance, budget, memoryPages(MEMORY_MIB))).toMatchObject({ code: "memory_exhausted" });
  });
});

describe("fuel spent in start-up code", () => {
  it("is fuel_exhausted, not a trap, when a start function burns the budget", async () => {
    const receipt = await run(pool, startupLoop, {}, { fuel: 1_000_000 });
    expect(receipt).toMatchObject({ outcome: "failure", code: "fuel_exhausted", fuelUsed: 1_000_000, message: expect.stringContaining("while starting") });
  });

  it("is classified from the counter of the instantiation that threw", async () => {
    const error = await rejection(instanceHere("startup-loop-wat", 1_000_000n));
    expect(String(error)).toMatch(/unreachable/);
    expect(classify(error, undefined, 1_000_000n, memoryPages(MEMORY_MIB))).toMatchObject({ code: "fuel_exhausted", fuelUsed: 1_000_000 });
    // An error no instantiation threw has no counter to read: a trap.
    expect(classify(new WebAssembly.RuntimeError("unreachable"), undefined, 1_000_000n, memoryPages(MEMORY_MIB))).toMatchObject({ code: "guest_trap" });
  });
});
