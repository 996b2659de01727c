import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { transpile } from "@bytecodealliance/jco";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FUEL_IMPORT, instrumentFuel } from "../../src/engine/fuel/index.ts";

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
async function instantiateGuest(modules: Record<string, WebAssembly.Module>, fuel: WebAssembly.Global): Promise<Guest> {
  return instantiate(
    (path) => {
      const module = modules[path];
      if (!module) throw new Error(`no core module ${path}`);
      return module;
    },
    {},
    (module, imports) => WebAssembly.instantiate(module, { ...imports, [FUEL_IMPORT.module]: { [FUEL_IMPORT.name]: fuel } }),
  );
}

function compileInstrumented(): Record<string, WebAssembly.Module> {
  const compiled: Record<string, WebAssembly.Module> = {};
  for (const [name, bytes] of Object.entries(coreModules)) compiled[name] = new WebAssembly.Module(instrumentFuel(bytes).bytes);
  return compiled;
}

describe("fuel metering of a componentize-js component", () => {
  it("instruments every core module into valid, compilable wasm", () => {
    const names = Object.keys(coreModules);
    expect(names.length).toBeGreaterThan(0);
    for (const name of names) {
      const result = instrumentFuel(coreModules[name]!);
      expect(result.functionsInstrumented).toBeGreaterThan(0);
      expect(WebAssembly.validate(result.bytes)).toBe(true);
      expect(() => new WebAssembly.Module(result.bytes)).not.toThrow();
    }
  });

  it("runs JS unchanged and charges deterministic fuel that grows with the work", async () => {
    const modules = compileInstrumented();
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
  });

  it("stops a JS infinite loop with a fuel trap", async () => {
    const fuel = new WebAssembly.Global({ value: "i64", mutable: true }, 1n << 40n);
    const guest = await instantiateGuest(compileInstrumented(), fuel);
    fuel.value = 50_000_000n;
    expect(() => guest.spin()).toThrow(/unreachable/);
    expect(fuel.value as bigint).toBeLessThan(0n);
  });
});
