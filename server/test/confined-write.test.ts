/**
 * The service's writes and removals in a workspace stay inside it while a "guest" (a worker
 * thread here, doing what a guest with a write grant can do through the WASI shim: relative
 * symlinks and renames) swaps the directories on the way for symlinks out of it. Checking a path
 * and then using it lost this race within a few dozen attempts.
 */
import * as fs from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import { Worker } from "node:worker_threads";
import { afterEach, describe, expect, it } from "vitest";
import { ConfinementError, removeConfined, writeConfined } from "../src/environments/service/confined-write.ts";

const ATTEMPTS = 1500;

/** A workspace and a directory beside it that nothing done in the workspace may touch. */
async function layout(): Promise<{ base: string; workspace: string; outside: string }> {
  const base = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "skillenv-confined-")));
  const workspace = path.join(base, "workspace");
  const outside = path.join(base, "outside");
  await fs.mkdir(workspace);
  await fs.mkdir(outside);
  return { base, workspace, outside };
}

/** Runs `body` (a loop of fs calls on `workspace`, errors ignored) on a thread until terminated. */
function racer(workspace: string, body: string): Worker {
  return new Worker(
    `const fs = require("node:fs"); const ws = require("node:worker_threads").workerData; const t = (f) => { try { f(); } catch {} }; ${body}`,
    {
      eval: true,
      workerData: workspace,
    },
  );
}

describe("confined writes and removals under a racing guest", () => {
  const cleanup: Array<() => Promise<unknown>> = [];
  afterEach(async () => {
    for (const step of cleanup.splice(0).reverse()) await step();
  });

  it("never write outside the workspace when a directory on the way is swapped for a symlink", async () => {
    const { base, workspace, outside } = await layout();
    cleanup.push(() => fs.rm(base, { recursive: true, force: true }));
    await fs.mkdir(path.join(workspace, "skills", "a"), { recursive: true });
    const guest = racer(
      workspace,
      `fs.symlinkSync("../../outside", ws + "/skills/l");
       for (;;) { t(() => fs.renameSync(ws + "/skills/a", ws + "/skills/a.real")); t(() => fs.renameSync(ws + "/skills/l", ws + "/skills/a"));
                  t(() => fs.renameSync(ws + "/skills/a", ws + "/skills/l")); t(() => fs.renameSync(ws + "/skills/a.real", ws + "/skills/a")); }`,
    );
    cleanup.push(() => guest.terminate());
    let written = 0;
    for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
      await writeConfined(workspace, "skills/a/SKILL.md", new TextEncoder().encode(`attempt ${attempt}`)).then(
        () => written++,
        (error: unknown) => expect(error).toBeInstanceOf(ConfinementError),
      );
    }
    expect(await fs.readdir(outside)).toEqual([]);
    expect(written).toBeGreaterThan(0);
  });

  it("never move or remove anything outside the workspace when a nested path's parent is swapped", async () => {
    const { base, workspace, outside } = await layout();
    cleanup.push(() => fs.rm(base, { recursive: true, force: true }));
    await fs.mkdir(path.join(outside, "alpha"));
    await fs.writeFile(path.join(outside, "alpha", "precious.txt"), "keep me");
    const guest = racer(
      workspace,
      `fs.symlinkSync("../outside", ws + "/link");
       for (;;) { t(() => fs.mkdirSync(ws + "/skills/alpha", { recursive: true })); t(() => fs.renameSync(ws + "/skills", ws + "/real"));
                  t(() => fs.renameSync(ws + "/link", ws + "/skills")); t(() => fs.renameSync(ws + "/skills", ws + "/link")); t(() => fs.rmSync(ws + "/real", { recursive: true })); }`,
    );
    cleanup.push(() => guest.terminate());
    for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
      await removeConfined(workspace, "skills/alpha", `${workspace}.removing-${attempt}`).catch((error: unknown) =>
        expect(error).toBeInstanceOf(ConfinementError),
      );
    }
    expect(await fs.readFile(path.join(outside, "alpha", "precious.txt"), "utf8")).toBe("keep me");
  });

  it("refuses a symlink or a file where a directory is needed, and a path that leaves the workspace", async () => {
    const { base, workspace, outside } = await layout();
    cleanup.push(() => fs.rm(base, { recursive: true, force: true }));
    await fs.symlink("../outside", path.join(workspace, "linked"));
    await fs.writeFile(path.join(workspace, "plain"), "a file");
    for (const relative of ["linked/x.txt", "plain/x.txt", "../outside/x.txt", "/etc/x.txt"]) {
      await expect(writeConfined(workspace, relative, new Uint8Array(1))).rejects.toBeInstanceOf(ConfinementError);
    }
    await fs.symlink("../outside/target.txt", path.join(workspace, "file-link"));
    await expect(writeConfined(workspace, "file-link", new Uint8Array(1))).rejects.toBeInstanceOf(ConfinementError);
    expect(await fs.readdir(outside)).toEqual([]);
  });
});
