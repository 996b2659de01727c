import { readdir, readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import { ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stableCodeOf } from "../../src/errors/index.ts";
import { shareCodecs, warmGlue } from "../../src/engine/preparation/glue.ts";
import { Preparer, type ComponentRef } from "../../src/engine/preparation/index.ts";
import { testComponent } from "../helpers/components.ts";
import { buildTestComponents, component, tempDir } from "../helpers/pool.ts";

let dataDir: { path: string; remove(): Promise<void> };

beforeAll(async () => {
  await buildTestComponents();
  dataDir = await tempDir("skillenv-preparation-");
}, 600_000);

afterAll(async () => {
  await dataDir?.remove();
});

function refOf(id: string, bytes: () => Promise<Uint8Array>): ComponentRef & { loads: number } {
  const ref = {
    id,
    loads: 0,
    load: async () => {
      ref.loads++;
      return bytes();
    },
  };
  return ref;
}

async function expectPreparationFailure(promise: Promise<unknown>, ...fragments: string[]): Promise<void> {
  const error = await promise.then(
    () => undefined,
    (thrown: unknown) => thrown,
  );
  expect(error).toBeInstanceOf(ConnectError);
  expect(stableCodeOf(error as ConnectError)).toBe("preparation_failed");
  for (const fragment of fragments) expect((error as ConnectError).rawMessage).toContain(fragment);
}

describe("preparation", () => {
  it("transpiles, instruments and persists a component once; concurrent preparations share the work", async () => {
    const preparer = await Preparer.create({ dataDir: dataDir.path, memoryMib: 64 });
    try {
      const echo = component("echo-wat");
      const [a, b, c] = await Promise.all([preparer.prepare(echo), preparer.prepare(echo), preparer.prepare(echo)]);
      expect(a).toBe(b);
      expect(b).toBe(c);
      expect(echo.loads).toBe(1);
      expect(preparer.stats.transpiles).toBe(1);
      expect(a.fromCache).toBe(false);
      expect(a.manifest.entrypoints).toEqual(["run"]);
      expect(a.manifest.glueWarmUp).toBe(true);
      expect(a.manifest.glueSharedCodecs).toBe(true);
      const glue = await readFile(join(a.dir, "glue.mjs"), "utf8");
      expect(glue).toContain("skillenv: build the glue's per-instance object shapes");
      expect(glue).toContain("const TEXT_DECODER_UTF8 = SKILLENV_UTF8_DECODER;");
      // Layout: <dataDir>/prepared/<toolchain>/<id>/{manifest.json, glue.mjs, core modules}
      expect(a.dir).toBe(join(dataDir.path, "prepared", preparer.toolchain.id, "echo-wat"));
      const files = (await readdir(a.dir)).sort();
      expect(files).toEqual(["component.core.wasm", "glue.mjs", "manifest.json"]);
      // The core module imports the fuel counter and its memory is capped at 64 MiB (1024 pages).
      const module = await WebAssembly.compile(await readFile(join(a.dir, "component.core.wasm")));
      expect(WebAssembly.Module.imports(module)).toContainEqual({ module: "skillenv:fuel", name: "remaining", kind: "global" });
      expect(a.manifest.memoryPages).toBe(1024);
      // No temp directories are left beside the prepared one.
      expect((await readdir(join(dataDir.path, "prepared", preparer.toolchain.id))).filter((name) => name.startsWith(".tmp"))).toEqual([]);
    } finally {
      await preparer.close();
    }
  });

  it("a restarted process finds the prepared files and does not transpile again", async () => {
    const first = await Preparer.create({ dataDir: dataDir.path, memoryMib: 64 });
    const js = component("echo-js");
    const prepared = await first.prepare(js);
    await first.close();
    const mtime = (await stat(join(prepared.dir, "manifest.json"))).mtimeMs;

    const second = await Preparer.create({ dataDir: dataDir.path, memoryMib: 64 });
    try {
      const again = component("echo-js");
      const reused = await second.prepare(again);
      expect(reused.fromCache).toBe(true);
      expect(second.stats).toMatchObject({ transpiles: 0, cacheHits: 1 });
      expect(again.loads).toBe(0); // not even the bytes were fetched
      expect((await stat(join(reused.dir, "manifest.json"))).mtimeMs).toBe(mtime);
    } finally {
      await second.close();
    }
  }, 120_000);

  it("a different memory cap (or fuel rewriter, or jco) is a different toolchain directory", async () => {
    const a = await Preparer.create({ dataDir: dataDir.path, memoryMib: 64 });
    const b = await Preparer.create({ dataDir: dataDir.path, memoryMib: 128 });
    try {
      expect(a.toolchain.id).not.toBe(b.toolchain.id);
      expect(b.toolchain.memoryPages).toBe(2048);
      const prepared = await b.prepare(component("echo-wat"));
      expect(prepared.fromCache).toBe(false);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  it("a damaged prepared directory is prepared again", async () => {
    const preparer = await Preparer.create({ dataDir: dataDir.path, memoryMib: 64 });
    try {
      const prepared = await preparer.prepare(component("counter-wat"));
      await preparer.discard("counter-wat");
      const again = await Preparer.create({ dataDir: dataDir.path, memoryMib: 64 });
      const redone = await again.prepare(component("counter-wat"));
      expect(redone.fromCache).toBe(false);
      expect(redone.dir).toBe(prepared.dir);
      await again.close();
    } finally {
      await preparer.close();
    }
  });

  it("leaves glue it does not recognise as jco wrote it", () => {
    const foreign = "export function instantiate() { return {}; }";
    expect(warmGlue(foreign)).toEqual({ source: foreign, warmed: false });
    expect(shareCodecs(foreign)).toEqual({ source: foreign, shared: false });
  });

  it("checks a component exactly as admission does: world, entrypoint signature, grantable imports", async () => {
    const preparer = await Preparer.create({ dataDir: dataDir.path, memoryMib: 64 });
    try {
      const hostTool = refOf("tool-importing-host", () => testComponent("tool-host"));
      await expectPreparationFailure(
        preparer.prepare(hostTool),
        "tool-importing-host",
        "skillenv:env/host@0.1.0",
        "only agent loops may import the host interface",
      );
      const badRun = refOf("bad-run", () => testComponent("bad-run"));
      await expectPreparationFailure(preparer.prepare(badRun), "bad-run", "run is func() -> s32");
      await expectPreparationFailure(preparer.prepare(refOf("both", () => testComponent("both"))), "both run and turn");
      // Refused before jco ever ran.
      expect(preparer.stats).toMatchObject({ transpiles: 0, failures: 3 });
      // What it records of a component that passes: its world's entrypoint and what it imports.
      const loop = await preparer.prepare(refOf("agent-loop", () => testComponent("agent-loop")));
      expect(loop.manifest.entrypoints).toEqual(["turn"]);
      expect(loop.manifest.imports).toEqual([
        { name: "skillenv:env/types@0.1.0", functions: [], resources: [] },
        { name: "skillenv:env/host@0.1.0", functions: ["call-model", "dispatch-tools", "emit"], resources: [] },
      ]);
    } finally {
      await preparer.close();
    }
  });

  it("fails with preparation_failed naming the component and the cause", async () => {
    const preparer = await Preparer.create({ dataDir: dataDir.path, memoryMib: 64 });
    try {
      await expectPreparationFailure(
        preparer.prepare(refOf("not-a-component", async () => new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0]))),
        "not-a-component",
        "not a WebAssembly component",
      );
      await expectPreparationFailure(
        preparer.prepare(refOf("unloadable", async () => Promise.reject(new Error("object storage is down")))),
        "unloadable",
        "object storage is down",
      );
      await expectPreparationFailure(preparer.prepare(refOf("with-sockets", () => testComponent("tool-sockets"))), "with-sockets", "wasi:sockets/tcp");
      await expectPreparationFailure(
        preparer.prepare(refOf("no-entrypoint", () => testComponent("neither"))),
        "no-entrypoint",
        "neither run (tool world) nor turn",
      );
      expect(preparer.stats.failures).toBe(4);
      expect(preparer.stats.transpiles).toBe(0);
      // A failed preparation is not cached: the next attempt tries again.
      const flaky = refOf("flaky", async () => {
        if (flaky.loads === 1) throw new Error("transient");
        return readFile(join(import.meta.dirname, "../../../build/components/echo-wat.wasm"));
      });
      await expectPreparationFailure(preparer.prepare(flaky), "transient");
      await expect(preparer.prepare(flaky)).resolves.toMatchObject({ id: "flaky" });
    } finally {
      await preparer.close();
    }
  }, 120_000);
});
