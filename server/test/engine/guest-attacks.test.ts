// Hostile guests against a real pool (docs/environments.md, "The sandbox and the threat model"):
// componentize-js guests built from components/wasi-probe-js run attacker-written JavaScript
// against the raw wasi:filesystem bindings, in sandboxed worker processes and in unsandboxed ones
// (SERVICE_ENV_SANDBOX=off), from two workspaces. Every attack must read and write nothing
// outside the preopen it went through.
import { existsSync } from "node:fs";
import { mkdir, readdir, readFile, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Pool, Receipt, ServiceGrants } from "../../src/engine/pool/index.ts";
import { buildTestComponents, component, NO_GRANTS, output, run, startPool, tempDir } from "../helpers/pool.ts";

const probe = component("wasi-probe-js");
/** What any successful escape would read: it lies in the workspace root, outside every binding. */
const MARKER = "the marker outside every preopen";

interface Probe {
  result: unknown;
}

for (const sandbox of [true, false]) {
  describe(`hostile guests, ${sandbox ? "sandboxed workers" : "SERVICE_ENV_SANDBOX=off"}`, () => {
    let pool: Pool;
    let box: { path: string; remove(): Promise<void> };
    let root: string;
    let workspaceA: string;
    let workspaceB: string;

    beforeAll(async () => {
      await buildTestComponents();
      box = await tempDir("skillenv-attacks-");
      root = join(box.path, "root");
      workspaceA = join(root, "A", "ses_a", "env");
      workspaceB = join(root, "B", "ses_b", "env");
      await mkdir(workspaceA, { recursive: true });
      await mkdir(workspaceB, { recursive: true });
      await writeFile(join(root, "marker.txt"), MARKER);
      await writeFile(join(workspaceA, "mine.txt"), "workspace A's file");
      pool = await startPool({ workers: 2, sandbox, workspaceRoot: root, toolSlotsPerWorker: 2 });
      await pool.prepare(probe);
    }, 600_000);

    afterAll(async () => {
      await pool?.close();
      await box?.remove();
    });

    /** Runs `source` in a guest with these filesystem grants on workspace A (or `workspaceDir`). */
    function attack(
      source: string,
      filesystem: ServiceGrants["filesystem"],
      args: unknown = null,
      workspaceDir = workspaceA,
      fuel = 200_000_000_000,
    ): Promise<Receipt> {
      // Fuel for thousands of refused calls: a WASI error is a thrown exception in the guest's JS engine, and costly.
      return run(pool, probe, { v: 1, source, args }, { grants: { ...NO_GRANTS, filesystem }, workspaceDir, deadlineMs: Date.now() + 120_000, fuel });
    }

    async function result(receipt: Promise<Receipt>): Promise<unknown> {
      return (output(await receipt) as Probe).result;
    }

    /** Nothing was created outside the bindings' workspaces: the root holds what the test put there. */
    async function nothingEscaped(): Promise<void> {
      expect((await readdir(root)).sort()).toEqual(["A", "B", "marker.txt"]);
      expect(await readdir(join(root, "A"))).toEqual(["ses_a"]);
      expect(await readFile(join(root, "marker.txt"), "utf8")).toBe(MARKER);
    }

    const STALE_DESCRIPTOR = `
      const root = preopens[args.preopen];
      root.createDirectoryAt('d');
      const d = root.openAt({ symlinkFollow: false }, 'd', { directory: true }, { read: true });
      root.removeDirectoryAt('d');
      root.symlinkAt(args.climb, 'd');
      const seen = {};
      for (const name of ['marker.txt', '../marker.txt', 'mine.txt', 'A/ses_a/env/mine.txt', '.']) {
        try {
          const file = d.openAt({ symlinkFollow: false }, name, {}, { read: true });
          seen[name] = file.getType() === 'directory' ? 'a directory' : tools.readAll(file);
        } catch (error) { seen[name] = tools.code(error); }
      }
      try { seen.listing = [...(() => { const s = d.readDirectory(); const out = []; for (let e; (e = s.readDirectoryEntry()); ) out.push(e.name); return out; })()]; } catch (error) { seen.listing = tools.code(error); }
      try { d.openAt({ symlinkFollow: false }, 'escaped.txt', { create: true }, { write: true }); seen.create = 'created'; } catch (error) { seen.create = tools.code(error); }
      try { root.openAt({ symlinkFollow: true }, 'd/marker.txt', {}, { read: true }); seen.throughLink = 'opened'; } catch (error) { seen.throughLink = tools.code(error); }
      return seen;`;

    it("a stale directory descriptor behind a climbing symlink reads and writes nothing outside, through a workspace grant", async () => {
      const seen = (await result(attack(STALE_DESCRIPTOR, { workspace: "write" }, { preopen: "/workspace", climb: "../../.." }))) as Record<string, unknown>;
      expect(JSON.stringify(seen)).not.toContain(MARKER);
      expect(JSON.stringify(seen)).not.toContain("workspace A's file");
      expect(seen.create).not.toBe("created");
      expect(seen.throughLink).toBe("not-permitted");
      await nothingEscaped();
    }, 120_000);

    it("the same through a scratch grant, which needs no allow-list", async () => {
      const seen = (await result(attack(STALE_DESCRIPTOR, { scratch: "write" }, { preopen: "/scratch", climb: "../../../.." }))) as Record<string, unknown>;
      expect(JSON.stringify(seen)).not.toContain(MARKER);
      expect(seen.create).not.toBe("created");
      expect(seen.throughLink).toBe("not-permitted");
      await nothingEscaped();
    }, 120_000);

    it("the rename race, thousands of times, on two workers at once: nothing outside is ever read or written", async () => {
      // A swaps r for a climbing symlink and back until B says it is done; B, on the other worker,
      // opens through r a fixed number of times. Each starts once the other has said it is there
      // (files in the workspace), so every one of B's attempts races A's swaps.
      const swapper = `
        const w = preopens['/workspace'];
        w.openAt({ symlinkFollow: false }, 'swapper-ready', { create: true }, { write: true });
        for (let i = 0; i < 100000; i++) { try { w.statAt({ symlinkFollow: false }, 'opener-ready'); break; } catch {} }
        let swaps = 0;
        for (; swaps < args.maxSwaps; swaps++) {
          try { w.statAt({ symlinkFollow: false }, 'opener-done'); break; } catch {}
          try {
            w.renameAt('r', w, 'r.d');
            w.symlinkAt('../../..', 'r');
            w.unlinkFileAt('r');
            w.renameAt('r.d', w, 'r');
          } catch (error) { return { failed: tools.code(error), swaps }; }
        }
        return { swaps };`;
      const opener = `
        const w = preopens['/workspace'];
        w.openAt({ symlinkFollow: false }, 'opener-ready', { create: true }, { write: true });
        for (let i = 0; i < 100000; i++) { try { w.statAt({ symlinkFollow: false }, 'swapper-ready'); break; } catch {} }
        const outcomes = {};
        let leaked = 0;
        for (let attempt = 0; attempt < args.attempts; attempt++) {
          for (const [path, flags, open] of [['r/marker.txt', {}, { read: true }], ['r/escaped.txt', { create: true }, { write: true }]]) {
            try {
              const file = w.openAt({ symlinkFollow: true }, path, flags, open);
              if (open.read && tools.readAll(file).includes(args.marker)) leaked++;
              // Dropped at once: an invocation holds at most 256 descriptors.
              file[Symbol.dispose]();
              outcomes.opened = (outcomes.opened ?? 0) + 1;
            } catch (error) { const code = tools.code(error); outcomes[code] = (outcomes[code] ?? 0) + 1; }
          }
        }
        w.openAt({ symlinkFollow: false }, 'opener-done', { create: true }, { write: true });
        return { leaked, outcomes };`;
      await mkdir(join(workspaceA, "r"), { recursive: true });
      const attempts = 2000;
      const [swapped, opened] = await Promise.all([
        // The swapper runs for as long as the opener does, however slow a loaded machine makes it:
        // its fuel is all there is, and the opener's end (or the deadline) is what stops it.
        result(attack(swapper, { workspace: "write" }, { maxSwaps: 1_000_000 }, workspaceA, 2 ** 62)),
        result(attack(opener, { workspace: "write" }, { attempts, marker: MARKER })),
      ]);
      const { leaked, outcomes } = opened as { leaked: number; outcomes: Record<string, number> };
      expect(leaked).toBe(0);
      // Every attempt met some state of r: 2 opens each, all counted.
      expect(Object.values(outcomes).reduce((sum, count) => sum + count, 0)).toBe(2 * attempts);
      // The swapper swapped all along, without a failure, and the opener met the swapped-out states.
      expect((swapped as { swaps: number; failed?: string }).failed).toBeUndefined();
      expect((swapped as { swaps: number }).swaps).toBeGreaterThan(0);
      expect(Object.keys(outcomes).length).toBeGreaterThan(1);
      await nothingEscaped();
      // What it created through r landed in r, inside the workspace, if anywhere.
      expect(existsSync(join(root, "escaped.txt"))).toBe(false);
    }, 300_000);

    it("refuses .., absolute paths, climbing and absolute symlinks, a symlink renamed into a path, and hard links out", async () => {
      const source = `
        const w = preopens['/workspace'];
        const codes = {};
        const tryOpen = (label, path, follow = true) => { try { const f = w.openAt({ symlinkFollow: follow }, path, {}, { read: true }); codes[label] = tools.readAll(f); } catch (error) { codes[label] = tools.code(error); } };
        tryOpen('dotdot', '../../../marker.txt');
        w.createDirectoryAt('sub');
        tryOpen('inner dotdot', 'sub/../../marker.txt');
        tryOpen('absolute', '/marker.txt');
        w.symlinkAt('../../../marker.txt', 'climb');
        tryOpen('climbing symlink', 'climb');
        w.symlinkAt(args.absolute, 'absolute-link');
        tryOpen('absolute symlink', 'absolute-link');
        w.createDirectoryAt('dir');
        w.symlinkAt('../../../..', 'dir/up');
        tryOpen('symlink in a path', 'dir/up/marker.txt');
        w.renameAt('dir/up', w, 'moved');
        tryOpen('renamed symlink', 'moved/marker.txt');
        try { w.linkAt({ symlinkFollow: true }, 'climb', w, 'hard'); codes.hardLinkThroughSymlink = 'linked'; } catch (error) { codes.hardLinkThroughSymlink = tools.code(error); }
        try { w.linkAt({ symlinkFollow: false }, '../../../marker.txt', w, 'hard2'); codes.hardLinkUp = 'linked'; } catch (error) { codes.hardLinkUp = tools.code(error); }
        try { w.readlinkAt('climb'); codes.readlink = 'read'; } catch (error) { codes.readlink = tools.code(error); }
        return codes;`;
      const codes = (await result(attack(source, { workspace: "write" }, { absolute: join(root, "marker.txt") }))) as Record<string, string>;
      expect(JSON.stringify(codes)).not.toContain(MARKER);
      for (const label of ["dotdot", "inner dotdot", "absolute", "climbing symlink", "absolute symlink", "symlink in a path", "renamed symlink"]) {
        expect(codes[label], label).toBe("not-permitted");
      }
      expect(codes.hardLinkThroughSymlink).toBe("not-permitted");
      expect(codes.hardLinkUp).toBe("not-permitted");
      // A symlink is only text: reading it is allowed, following it out is not.
      expect(codes.readlink).toBe("read");
      await nothingEscaped();
    }, 120_000);

    it("keeps workspaces apart: workspace B's guest reaches nothing of workspace A", async () => {
      const source = `
        const w = preopens['/workspace'];
        const codes = {};
        for (const path of ['../../../A/ses_a/env/mine.txt', '../../A/ses_a/env/mine.txt']) {
          try { codes[path] = tools.readAll(w.openAt({ symlinkFollow: true }, path, {}, { read: true })); } catch (error) { codes[path] = tools.code(error); }
        }
        w.symlinkAt('../../../A/ses_a/env', 'a');
        try { codes.link = tools.readAll(w.openAt({ symlinkFollow: true }, 'a/mine.txt', {}, { read: true })); } catch (error) { codes.link = tools.code(error); }
        return codes;`;
      const codes = await result(attack(source, { workspace: "write" }, null, workspaceB));
      expect(JSON.stringify(codes)).not.toContain("workspace A's file");
      expect(Object.values(codes as object)).toEqual(["not-permitted", "not-permitted", "not-permitted"]);
    }, 120_000);

    it("a NUL byte in a path is `invalid`, and no message names a host path", async () => {
      const source = `
        const w = preopens['/workspace'];
        const seen = [];
        for (const path of ['a\\u0000b', 'mine.txt\\u0000', '\\u0000']) {
          try { w.openAt({ symlinkFollow: false }, path, { create: true }, { write: true }); seen.push('opened'); } catch (error) { seen.push(tools.code(error)); }
          try { w.statAt({ symlinkFollow: false }, path); seen.push('stat'); } catch (error) { seen.push(tools.code(error)); }
        }
        return seen;`;
      const receipt = await attack(source, { workspace: "write" });
      expect(JSON.stringify(receipt)).not.toContain(root);
      expect(new Set((output(receipt) as Probe).result as string[])).toEqual(new Set(["invalid"]));
    }, 120_000);
  });
}

describe("disk quotas", () => {
  let pool: Pool;
  let box: { path: string; remove(): Promise<void> };
  const MiB = 1024 * 1024;

  beforeAll(async () => {
    await buildTestComponents();
    box = await tempDir("skillenv-quota-");
    pool = await startPool({ workers: 2, workspaceRoot: box.path, workspaceQuotaBytes: 2 * MiB, scratchQuotaBytes: 1 * MiB });
    await pool.prepare(probe);
  }, 600_000);

  afterAll(async () => {
    await pool?.close();
    await box?.remove();
  });

  /** Writes `chunks` x 64 KiB into `name` under `preopen`; reports the bytes written and the error that stopped it. */
  const WRITER = `
    const dir = preopens[args.preopen];
    const chunk = new Uint8Array(65536).fill(120);
    let written = 0;
    try {
      // Creating the file counts too (its entry): with the quota spent, the open is what fails.
      const file = dir.openAt({ symlinkFollow: false }, args.name, { create: true }, { write: true });
      for (let i = 0; i < args.chunks; i++) written += Number(file.write(chunk, BigInt(written)));
      return { written };
    } catch (error) { return { written, stopped: tools.code(error) }; }`;

  function write(preopen: string, name: string, chunks: number, workspaceDir: string) {
    const filesystem = preopen === "/workspace" ? { workspace: "write" as const } : { scratch: "write" as const };
    return run(
      pool,
      probe,
      { v: 1, source: WRITER, args: { preopen, name, chunks } },
      { grants: { ...NO_GRANTS, filesystem }, workspaceDir, deadlineMs: Date.now() + 60_000 },
    );
  }

  it("a workspace write past the binding's quota fails with `quota` and writes nothing of it; the bytes stay counted across invocations and workers", async () => {
    const workspace = join(box.path, "ws", "ses", "env");
    await mkdir(workspace, { recursive: true });
    const first = (output(await write("/workspace", "one.bin", 24, workspace)) as Probe).result as { written: number; stopped?: string };
    expect(first).toEqual({ written: 24 * 65536 });
    // 1.5 MiB used (plus an entry): the second file gets what is left, then `quota`.
    const second = (output(await write("/workspace", "two.bin", 24, workspace)) as Probe).result as { written: number; stopped?: string };
    expect(second.stopped).toBe("quota");
    expect(second.written).toBeLessThan(0.5 * MiB);
    expect((await stat(join(workspace, "two.bin"))).size).toBe(second.written);
    // Two invocations at once, on both workers, share what is left between them.
    const together = await Promise.all([write("/workspace", "three.bin", 16, workspace), write("/workspace", "four.bin", 16, workspace)]);
    const results = together.map((receipt) => (output(receipt) as Probe).result as { written: number; stopped?: string });
    expect(results.every((r) => r.stopped === "quota")).toBe(true);
    // A file whose creation the quota refused is not there.
    const sizes = await Promise.all(
      ["one.bin", "two.bin", "three.bin", "four.bin"].map((name) =>
        stat(join(workspace, name)).then(
          (file) => file.size,
          () => 0,
        ),
      ),
    );
    expect(sizes.reduce((sum, size) => sum + size, 0) + 4 * 4096).toBeLessThanOrEqual(2 * MiB);
  }, 120_000);

  it("a scratch write past the invocation's quota fails with `quota`; the next invocation starts afresh", async () => {
    const workspace = join(box.path, "ws2", "ses", "env");
    await mkdir(workspace, { recursive: true });
    for (let i = 0; i < 2; i++) {
      const result = (output(await write("/scratch", "big.bin", 32, workspace)) as Probe).result as { written: number; stopped?: string };
      expect(result.stopped).toBe("quota");
      expect(result.written).toBeLessThan(1 * MiB);
      expect(result.written).toBeGreaterThan(0.5 * MiB);
    }
  }, 120_000);
});
