import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { transpile } from "@bytecodealliance/jco";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FUEL_IMPORT, instrumentFuel } from "../src/fuel/index.ts";

/**
 * A real componentize-js (StarlingMonkey) component: its ~12 MB core module is the module the
 * rewriter has to handle fast and correctly in production.
 */

const GUEST_JS = `
export function run(n) { let s = 0; for (let i = 0; i < n; i++) s = (s + i) >>> 0; return s; }
export function spin() { for (;;) {} }
`;

const GUEST_WIT = `
package local:fuel-test;
world guest {
  export run: func(n: u32) -> u32;
  export spin: func();
}
`;

interface Guest {
  run(n: number): number;
  spin(): void;
}

type Instantiate = (
  getCoreModule: (path: string) => WebAssembly.Module,
  imports: object,
  instantiateCore: (module: WebAssembly.Module, imports?: WebAssembly.Imports) => Promise<WebAssembly.Instance>,
) => Promise<Guest>;

let dir = "";
let coreModules: Record<string, Uint8Array<ArrayBuffer>> = {};
let instantiate: Instantiate;

beforeAll(async () => {
  // componentize-js and jco read the WIT and source through preview2-shim, which starts with no preopens.
  // TypeScript resolves the shim's browser typings; under Node the function takes a path map.
  const { _setPreopens } = (await import("@bytecodealliance/preview2-shim/filesystem")) as unknown as {
    _setPreopens(preopens: Record<string, string>): void;
  };
  _setPreopens({ "/": "/" });
  const { componentize } = await import("@bytecodealliance/componentize-js");
  dir = await mkdtemp(join(tmpdir(), "fuel-component-"));
  await writeFile(join(dir, "guest.js"), GUEST_JS);
  await writeFile(join(dir, "guest.wit"), GUEST_WIT);
  const { component } = await componentize({
    sourcePath: join(dir, "guest.js"),
    witPath: join(dir, "guest.wit"),
    worldName: "guest",
    disableFeatures: ["stdio", "random", "clocks", "http", "fetch-event"],
  });
  const { files } = await transpile(component, { instantiation: "async", name: "guest" });
  for (const [name, bytes] of Object.entries(files)) {
    await writeFile(join(dir, name), bytes);
    if (name.endsWith(".wasm")) coreModules[name] = new Uint8Array(bytes);
  }
  ({ instantiate } = (await import(pathToFileURL(join(dir, "guest.js")).href)) as { instantiate: Instantiate });
}, 300_000);

afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
  coreModules = {};
});

/** A fresh component instance whose core modules all share one fuel global. */
async function instantiateGuest(modules: Record<string, WebAssembly.Module>, fuel?: WebAssembly.Global): Promise<Guest> {
  return instantiate(
    (path) => {
      const module = modules[path];
      if (!module) throw new Error(`no core module ${path}`);
      return module;
    },
    {},
    (module, imports) =>
      WebAssembly.instantiate(module, fuel ? { ...imports, [FUEL_IMPORT.module]: { [FUEL_IMPORT.name]: fuel } } : imports),
  );
}

function compileAll(instrument: boolean): Record<string, WebAssembly.Module> {
  const compiled: Record<string, WebAssembly.Module> = {};
  for (const [name, bytes] of Object.entries(coreModules)) {
    compiled[name] = new WebAssembly.Module(instrument ? instrumentFuel(bytes).bytes : bytes);
  }
  return compiled;
}

describe("fuel metering of a componentize-js component", () => {
  it("instruments every core module into valid, compilable wasm", () => {
    const names = Object.keys(coreModules);
    expect(names.length).toBeGreaterThan(0);
    for (const name of names) {
      const bytes = coreModules[name]!;
      const start = performance.now();
      const cpuStart = process.cpuUsage();
      const result = instrumentFuel(bytes);
      const cpu = process.cpuUsage(cpuStart);
      const ms = performance.now() - start;
      expect(result.functionsInstrumented).toBeGreaterThan(0);
      expect(WebAssembly.validate(result.bytes)).toBe(true);
      expect(() => new WebAssembly.Module(result.bytes)).not.toThrow();
      const growth = ((result.bytes.length / bytes.length - 1) * 100).toFixed(1);
      console.log(
        `${name}: ${(bytes.length / 1e6).toFixed(1)} MB, ${result.functionsInstrumented} functions, ` +
          `instrumented in ${ms.toFixed(0)} ms (${((cpu.user + cpu.system) / 1000).toFixed(0)} ms CPU), +${growth}% size`,
      );
    }
  });

  it("runs JS unchanged and charges deterministic fuel that grows with the work", async () => {
    const modules = compileAll(true);
    const spend = async (n: number) => {
      const fuel = new WebAssembly.Global({ value: "i64", mutable: true }, 1n << 40n);
      const guest = await instantiateGuest(modules, fuel);
      const afterStart = fuel.value as bigint;
      expect(guest.run(n)).toBe(((n * (n - 1)) / 2) >>> 0);
      return { startup: (1n << 40n) - afterStart, call: afterStart - (fuel.value as bigint) };
    };
    const small = await spend(1_000);
    const again = await spend(1_000);
    const large = await spend(100_000);
    expect(again).toEqual(small);
    expect(small.call).toBeGreaterThan(0n);
    expect(large.call).toBeGreaterThan(small.call * 10n);
    console.log(`startup ${small.startup} fuel; run(1000) ${small.call} fuel; run(100000) ${large.call} fuel`);
  });

  it("stops a JS infinite loop with a fuel trap", async () => {
    const fuel = new WebAssembly.Global({ value: "i64", mutable: true }, 1n << 40n);
    const guest = await instantiateGuest(compileAll(true), fuel);
    fuel.value = 50_000_000n;
    expect(() => guest.spin()).toThrow(/unreachable/);
    expect(fuel.value as bigint).toBeLessThan(0n);
  });

  it("measures the slowdown of a JS loop (logged, no assertion)", async () => {
    const plainGuest = await instantiateGuest(compileAll(false));
    const fuel = new WebAssembly.Global({ value: "i64", mutable: true }, 1n << 50n);
    const meteredGuest = await instantiateGuest(compileAll(true), fuel);
    // Best of alternating runs: the machine is shared, so single timings are noise.
    const best = [Infinity, Infinity];
    for (let run = 0; run < 6; run++) {
      [plainGuest, meteredGuest].forEach((guest, i) => {
        const start = performance.now();
        guest.run(2_000_000);
        best[i] = Math.min(best[i]!, performance.now() - start);
      });
    }
    const [plainMs, meteredMs] = best as [number, number];
    console.log(`JS loop in StarlingMonkey: plain ${plainMs.toFixed(0)} ms, metered ${meteredMs.toFixed(0)} ms, ${(meteredMs / plainMs).toFixed(2)}x`);
  });
});
