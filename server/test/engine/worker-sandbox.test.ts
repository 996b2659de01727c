// A worker process from the outside (docs/environments.md, "The sandbox and the threat model"):
// what its sandbox lets it see of the host's filesystem, processes and environment, what its
// egress proxy lets through, and what killing it costs.
import { readdir, readFile, readlink, mkdir, writeFile } from "node:fs/promises";
import net from "node:net";
import { join } from "node:path";
import { Level } from "level";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Pool } from "../../src/engine/pool/index.ts";
import {
  buildTestComponents,
  component,
  killWorker,
  NO_GRANTS,
  output,
  run,
  startGuestFacingServer,
  startPool,
  tempDir,
  waitFor,
  type GuestFacingServer,
} from "../helpers/pool.ts";

const fetchJs = component("fetch-js");
const loop = component("loop-wat");
const echo = component("echo-wat");

/** Set in this process before the workers start: it must reach no worker. */
const SENTINEL = ["SKILLENV_WORKER_SENTINEL", "not-for-workers"] as const;

let pool: Pool;
let box: { path: string; remove(): Promise<void> };
let dataDir: string;
/** A LevelDB open in this process while the workers start, as the server's metadata store is. */
let store: Level<string, string>;
let storeDir: string;
/** What this process held open before the pool started: no worker may hold any of it. */
let held: Set<string>;
/** Answers guests' requests; those to /hold are held until the test releases them. */
let server: GuestFacingServer;
let origin: string;

beforeAll(async () => {
  await buildTestComponents();
  process.env[SENTINEL[0]] = SENTINEL[1];
  box = await tempDir("skillenv-sandbox-");
  dataDir = join(box.path, "data");
  // What a server's data directory holds beside what the pool uses: none of it may be visible.
  await mkdir(join(dataDir, "metadata"), { recursive: true });
  await mkdir(join(dataDir, "blobs"), { recursive: true });
  await writeFile(join(dataDir, "upload-signing-key"), "signing key");
  await writeFile(join(dataDir, "sealing-key"), "sealing key");
  await writeFile(join(dataDir, "metadata", "CURRENT"), "leveldb");
  await writeFile(join(dataDir, "blobs", "object"), "a blob");
  storeDir = join(box.path, "store");
  store = new Level(storeDir);
  await store.put("key", "a record");
  held = new Set((await descriptors(process.pid)).filter(distinct));
  expect([...held].filter((target) => target.startsWith(storeDir))).not.toHaveLength(0);
  pool = await startPool({ workers: 2, dataDir });
  await Promise.all([fetchJs, loop, echo].map((ref) => pool.prepare(ref)));
  server = await startGuestFacingServer("/hold");
  origin = server.origin;
}, 600_000);

afterAll(async () => {
  delete process.env[SENTINEL[0]];
  await pool?.close();
  await store?.close();
  await server?.close();
  await box?.remove();
});

/** The Node process inside worker `index`'s sandbox (its pid as the host sees it). */
async function sandboxedNode(index: number): Promise<number> {
  const pending = [pool.stats().workers[index]!.pid!];
  while (pending.length > 0) {
    const pid = pending.shift()!;
    const command = (await readFile(`/proc/${pid}/cmdline`, "utf8")).split("\0");
    if (command[0] === process.execPath && command.some((part) => part.endsWith("worker/main.ts"))) return pid;
    for (const task of await readdir(`/proc/${pid}/task`)) {
      const children = (await readFile(`/proc/${pid}/task/${task}/children`, "utf8")).trim();
      if (children) pending.push(...children.split(" ").map(Number));
    }
  }
  throw new Error(`no Node process in worker ${index}'s sandbox`);
}

/** What each of `pid`'s descriptors refers to (a path, `pipe:[inode]`, `socket:[inode]`, ...). */
async function descriptors(pid: number): Promise<string[]> {
  const names = await readdir(`/proc/${pid}/fd`);
  const targets = await Promise.all(names.map((name) => readlink(`/proc/${pid}/fd/${name}`).catch(() => undefined)));
  return targets.filter((target) => target !== undefined);
}

/** A target that names one object: a file outside /dev, a pipe, a socket (not `/dev/null` or `anon_inode:[eventfd]`). */
function distinct(target: string): boolean {
  return /^(pipe|socket):\[\d+\]$/.test(target) || (target.startsWith("/") && !target.startsWith("/dev/"));
}

/** `pid` and every process under it. */
async function tree(pid: number): Promise<number[]> {
  const found = [pid];
  for (let at = 0; at < found.length; at++) {
    for (const task of await readdir(`/proc/${found[at]}/task`)) {
      const children = (await readFile(`/proc/${found[at]}/task/${task}/children`, "utf8")).trim();
      if (children) found.push(...children.split(" ").map(Number));
    }
  }
  return found;
}

/**
 * The state, process group, session and controlling terminal (0: none) of `pid`: fields 3, 5, 6
 * and 7 of its stat, after the command in parentheses.
 */
async function stateOf(pid: number): Promise<{ state: string; group: number; session: number; terminal: number }> {
  const fields = (await readFile(`/proc/${pid}/stat`, "utf8")).replace(/^.*\) /s, "").split(" ");
  return { state: fields[0]!, group: Number(fields[2]), session: Number(fields[3]), terminal: Number(fields[4]) };
}

/** Every live process of the host in process group `group` (not those dead and not yet reaped). */
async function members(group: number): Promise<number[]> {
  const found: number[] = [];
  for (const name of await readdir("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    const of = await stateOf(Number(name)).catch(() => undefined);
    if (of?.group === group && of.state !== "Z") found.push(Number(name));
  }
  return found;
}

describe("a sandboxed worker process", () => {
  it("keeps every process of its sandbox, and only those, in the process group that stopping it kills, in a session with no terminal", async () => {
    for (const index of [0, 1]) {
      const worker = pool.stats().workers[index]!.pid!;
      const processes = await tree(worker);
      expect(processes).toContain(await sandboxedNode(index));
      for (const pid of processes) expect(await stateOf(pid)).toMatchObject({ group: worker, session: worker, terminal: 0 });
      expect((await members(worker)).sort()).toEqual([...processes].sort());
    }
  }, 60_000);

  it("holds none of the server's open files, pipes or sockets: not its LevelDB store's", async () => {
    for (const index of [0, 1]) {
      const processes = await tree(pool.stats().workers[index]!.pid!);
      // bubblewrap, the sandbox's init and the worker's Node process
      expect(processes.length).toBeGreaterThanOrEqual(3);
      for (const pid of processes) {
        const targets = await descriptors(pid);
        expect(targets.length).toBeGreaterThanOrEqual(3);
        expect(targets.filter((target) => target.startsWith(storeDir))).toEqual([]);
        expect(targets.filter((target) => held.has(target))).toEqual([]);
      }
    }
  }, 60_000);

  it("sees of the data directory only the prepared components, the workspaces and its own scratch: no key, metadata or blob", async () => {
    const pid = await sandboxedNode(0);
    const view = `/proc/${pid}/root`;
    expect((await readdir(join(view, dataDir))).sort()).toEqual(["compile-cache", "invocations", "prepared", "workspaces"]);
    // The compile cache of its own code it may only read: what it loads there, the next workers load too.
    const cache = join(view, dataDir, "compile-cache");
    expect((await readdir(cache)).length).toBeGreaterThan(0);
    await expect(writeFile(join(cache, "planted"), "code").catch((error: NodeJS.ErrnoException) => error.code)).resolves.toBe("EROFS");
    const pools = await readdir(join(view, dataDir, "invocations"));
    expect(pools).toHaveLength(1);
    // Only its own directory of the pool's: not the other worker's scratch.
    expect(await readdir(join(view, dataDir, "invocations", pools[0]!))).toHaveLength(1);
    expect((await readdir(join(dataDir, "invocations", pools[0]!))).length).toBe(2);
    for (const secret of ["upload-signing-key", "sealing-key", "metadata", "blobs"]) {
      await expect(readdir(join(view, dataDir, secret)).catch((error: NodeJS.ErrnoException) => error.code)).resolves.toBe("ENOENT");
    }
    // Nothing of the host's root but the runtime, and its own /proc, /dev and /tmp.
    expect((await readdir(view)).sort()).toEqual(expect.arrayContaining(["dev", "proc", "tmp", "usr"]));
    expect(await readdir(view)).not.toContain("root");
    expect(await readdir(view)).not.toContain("home");
    expect(await readdir(join(view, "etc"))).toEqual(["ld.so.cache"]);
  }, 60_000);

  it("runs guests, and compiles and collects their components, at a lower CPU priority than the server: every thread but its watchdog's", async () => {
    const pid = await sandboxedNode(0);
    // The nice value is the 19th field of stat, after the command in parentheses (which may hold spaces).
    const nice = async (path: string) => Number((await readFile(path, "utf8")).replace(/^.*\) /s, "").split(" ")[16]);
    expect(await nice(`/proc/${pid}/stat`)).toBe(10);
    const threads = await readdir(`/proc/${pid}/task`);
    const niceness = await Promise.all(
      threads.map(async (tid) => [await readFile(`/proc/${pid}/task/${tid}/comm`, "utf8"), await nice(`/proc/${pid}/task/${tid}/stat`)] as const),
    );
    // V8's compile and collector threads among them, at 10 with the main thread (guests).
    expect(niceness.filter(([name]) => name.trim() === "V8Worker").length).toBeGreaterThan(0);
    expect(niceness.filter(([, value]) => value !== 10)).toEqual([["WorkerThread\n", 0]]);
    expect(await nice(`/proc/${process.pid}/stat`)).toBe(0);
    // Its session's scheduling group too (a worker leads a session; where the kernel groups
    // sessions, a thread's nice value counts only within the group): "/autogroup-<n> nice 10".
    const group = async (pid: number) => (await readFile(`/proc/${pid}/autogroup`, "utf8")).trim().split(" nice ");
    // Both workers: they start together, and the kernel takes one such change per 100 ms.
    const groups = await Promise.all([pid, await sandboxedNode(1)].map(group));
    expect(groups.map(([, value]) => value)).toEqual(["10", "10"]);
    expect(new Set([...groups.map(([name]) => name), (await group(process.pid))[0]]).size).toBe(3);
  }, 60_000);

  it("loads its own code compiled by the pool, from a cache it only reads: never Node's TypeScript stripper, also after calls", async () => {
    const calls = await Promise.all([1, 2, 3, 4].map((v) => run(pool, echo, { v })));
    expect(calls.map(output)).toEqual([1, 2, 3, 4].map((v) => ({ v })));
    for (const index of [0, 1]) expect(await pool.report(index)).toMatchObject({ typeStripper: false });
  }, 60_000);

  it("has none of the server's environment, no capabilities, and sees only its own processes", async () => {
    const pid = await sandboxedNode(1);
    const environment = (await readFile(`/proc/${pid}/environ`, "utf8")).split("\0").filter(Boolean);
    expect(environment.join("\n")).not.toContain(SENTINEL[0]);
    // What the pool gives it (Node's IPC channel, its preload and compile cache, its boot, its
    // egress socket, the malloc setting) and what bash sets.
    expect(environment.map((entry) => entry.split("=")[0]).sort()).toEqual([
      "MALLOC_MMAP_THRESHOLD_",
      "NODE_CHANNEL_FD",
      "NODE_CHANNEL_SERIALIZATION_MODE",
      "NODE_COMPILE_CACHE",
      "NODE_OPTIONS",
      "PWD",
      "SHLVL",
      "SKILLENV_EGRESS",
      "SKILLENV_WORKER",
    ]);
    const status = await readFile(`/proc/${pid}/status`, "utf8");
    expect(status).toMatch(/^CapEff:\s+0+$/m);
    expect(status).toMatch(/^NoNewPrivs:\s+1$/m);
    // A user namespace of one id: uid 1000 inside is the server's own uid outside, nothing more.
    expect((await readFile(`/proc/${pid}/uid_map`, "utf8")).trim().split(/\s+/)).toEqual(["1000", String(process.getuid!()), "1"]);
    // Its /proc is its PID namespace's: the sandbox's own few processes, none of the host's.
    const processes = (await readdir(`/proc/${pid}/root/proc`)).filter((name) => /^\d+$/.test(name));
    expect(processes.length).toBeLessThanOrEqual(3);
    expect(processes).not.toContain(String(process.pid));
  }, 60_000);

  it("its egress proxy opens a tunnel only to an origin granted to an invocation in flight on it, and closes it after", async () => {
    const connectThrough = async (pid: number, target: string) => {
      const socket = net.connect(`/proc/${pid}/root/run/skillenv/egress.sock`);
      await new Promise<void>((resolve, reject) => socket.once("connect", resolve).once("error", reject));
      socket.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\nX-Skillenv-Scheme: http\r\n\r\n`);
      const answer = await new Promise<string>((resolve) => socket.once("data", (chunk) => resolve(chunk.toString("latin1"))));
      return { socket, status: answer.split(" ")[1] };
    };
    const authority = origin.slice("http://".length);
    const pid = await sandboxedNode(0);
    // Nothing in flight: nothing is granted.
    const refused = await connectThrough(pid, authority);
    expect(refused.status).toBe("403");
    refused.socket.destroy();
    // A guest on worker 0 waits on a response from the origin it was granted; meanwhile the
    // origin is open through worker 0's proxy, and no other.
    const other = await connectThrough(pid, "127.0.0.1:1");
    other.socket.destroy();
    expect(other.status).toBe("403");
    const waiting = run(pool, fetchJs, { v: 1, url: `${origin}/hold-1` }, { grants: { ...NO_GRANTS, network: [origin] } });
    const release = await server.held("/hold-1");
    const where = pool.stats().workers.findIndex((worker) => worker.tools === 1);
    const opened = await connectThrough(await sandboxedNode(where), authority);
    expect(opened.status).toBe("200");
    const closed = new Promise<void>((resolve) => opened.socket.once("close", () => resolve()));
    release();
    expect(output(await waiting)).toMatchObject({ status: 200 });
    // The grant ended with its invocation: the tunnel it allowed is closed.
    await closed;
    expect((await connectThrough(await sandboxedNode(where), authority)).status).toBe("403");
  }, 60_000);

  it("killed mid-call, it costs only its own invocations: `unknown` for them, the other worker's call returns", async () => {
    const waiting = run(pool, fetchJs, { v: 1, url: `${origin}/hold-2` }, { grants: { ...NO_GRANTS, network: [origin] } });
    const releaseFirst = await server.held("/hold-2");
    const first = pool.stats().workers.findIndex((worker) => worker.tools === 1);
    const looping = run(pool, loop, {}, { deadlineMs: Date.now() + 60_000 });
    await waitFor(() => pool.stats().workers[1 - first]!.busy, 30_000, "the loop to run on the other worker");
    killWorker(pool, 1 - first);
    expect(await looping).toMatchObject({ outcome: "unknown" });
    releaseFirst();
    expect(output(await waiting)).toMatchObject({ status: 200 });
    await waitFor(() => pool.isPrepared("echo-wat"), 30_000, "the replacement to restore preparation");
    expect(output(await run(pool, echo, { v: 1 }))).toEqual({ v: 1 });
  }, 60_000);
});

describe("a worker stopped while it starts", () => {
  // Each step of a replacement's start, told apart by what its process tree holds: bubblewrap
  // alone, bubblewrap and the sandbox's init (setting up the namespaces), the worker's Node
  // process. Closing the pool at each stops the whole group, and the close completes.
  const steps = [
    { name: "just spawned", reached: (processes: number[]) => processes.length >= 1 },
    { name: "setting up its namespaces", reached: (processes: number[]) => processes.length >= 2 },
    { name: "starting its Node process", reached: (processes: number[]) => processes.length >= 3 },
  ];
  for (const step of steps) {
    it(`leaves no process behind when the pool closes with the replacement ${step.name}`, async () => {
      const own = await startPool({ workers: 1, dataDir });
      const first = own.stats().workers[0]!.pid!;
      killWorker(own, 0);
      let replacement: number | undefined;
      // Polled without pause: the step may last only a moment.
      for (;;) {
        replacement = own.stats().workers[0]!.pid;
        if (replacement !== undefined && replacement !== first && step.reached(await tree(replacement).catch(() => []))) break;
        await new Promise((resolve) => setImmediate(resolve));
      }
      await own.close();
      expect(await members(replacement)).toEqual([]);
    }, 120_000);
  }
});
