import { mkdir, readdir, readFile, symlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { HostServices, Pool, Receipt, ServiceGrants } from "../../src/engine/pool/index.ts";
import {
  buildTestComponents,
  component,
  NO_GRANTS,
  output,
  run,
  SHARED_DATA_DIR,
  startGuestFacingServer,
  startPool,
  tempDir,
  type GuestFacingServer,
} from "../helpers/pool.ts";

const workspaceJs = component("workspace-js");
const secretsJs = component("secrets-js");
const fetchJs = component("fetch-js");
const programTool = component("js-program-tool");
const programLoop = component("js-program-agent-loop");
const echo = component("echo-wat");
const environmentJs = component("environment-js");

let pool: Pool;
let box: { path: string; remove(): Promise<void> };
let workspace: string;
/** Answers guests' requests; those to /slow are held until the test releases them. */
let server: GuestFacingServer;
let origin: string;

/** Set before the workers start, so that it is in their copy of the environment: it must not reach guests. */
const SENTINEL = ["SKILLENV_SENTINEL", "must-not-leak"] as const;

beforeAll(async () => {
  await buildTestComponents();
  process.env[SENTINEL[0]] = SENTINEL[1];
  box = await tempDir("skillenv-grants-");
  // The workspace root holds the workspace and, beside it, what no guest may reach.
  pool = await startPool({ workers: 2, workspaceRoot: box.path });
  await Promise.all([workspaceJs, secretsJs, fetchJs, programTool, programLoop, echo, environmentJs].map((ref) => pool.prepare(ref)));
  workspace = join(box.path, "workspace");
  await mkdir(join(workspace, "sub"), { recursive: true });
  await writeFile(join(workspace, "hello.txt"), "hello from the host");
  await writeFile(join(box.path, "outside.txt"), "OUTSIDE");
  await symlink("../outside.txt", join(workspace, "relative-escape"));
  await symlink(join(box.path, "outside.txt"), join(workspace, "absolute-escape"));
  await symlink("hello.txt", join(workspace, "inside-link"));
  server = await startGuestFacingServer("/slow");
  origin = server.origin;
}, 600_000);

afterAll(async () => {
  delete process.env[SENTINEL[0]];
  await pool?.close();
  await server?.close();
  await box?.remove();
});

function grants(extra: Partial<ServiceGrants>): ServiceGrants {
  return { ...NO_GRANTS, ...extra };
}

/** A workspace-js call with these filesystem grants; a workspace grant maps the test's workspace. */
function fs(request: Record<string, unknown>, filesystem: ServiceGrants["filesystem"]) {
  return run(pool, workspaceJs, { v: 1, ...request }, { grants: grants({ filesystem }), workspaceDir: workspace });
}

describe("filesystem grants", () => {
  it("reads, writes and lists a writable /workspace", async () => {
    const rw = { workspace: "write" } as const;
    expect(output(await fs({ op: "read", path: "/workspace/hello.txt" }, rw))).toEqual({ v: 1, ok: true, data: "hello from the host" });
    expect(output(await fs({ op: "write", path: "/workspace/sub/new.txt", data: "from the guest" }, rw))).toEqual({ v: 1, ok: true, bytes: 14 });
    expect(await readFile(join(workspace, "sub", "new.txt"), "utf8")).toBe("from the guest");
    expect(output(await fs({ op: "read", path: "/workspace/inside-link" }, rw))).toMatchObject({ data: "hello from the host" });
    const listing = output(await fs({ op: "list", path: "/workspace" }, rw)) as { entries: { name: string }[] };
    expect(listing.entries.map((entry) => entry.name)).toEqual(["absolute-escape", "hello.txt", "inside-link", "relative-escape", "sub"]);
  }, 60_000);

  it("a read-only /workspace refuses every write", async () => {
    const ro = { workspace: "read" } as const;
    expect(output(await fs({ op: "read", path: "/workspace/hello.txt" }, ro))).toMatchObject({ data: "hello from the host" });
    expect(await fs({ op: "write", path: "/workspace/nope.txt", data: "x" }, ro)).toMatchObject({ outcome: "failure", code: "read-only" });
    expect(await fs({ op: "write", path: "/workspace/hello.txt", data: "overwritten" }, ro)).toMatchObject({ outcome: "failure", code: "read-only" });
    expect(await readFile(join(workspace, "hello.txt"), "utf8")).toBe("hello from the host");
    expect(await readdir(workspace)).not.toContain("nope.txt");
  }, 60_000);

  it("refuses .., absolute paths and symlinks that leave the preopen", async () => {
    const rw = { workspace: "write" } as const;
    for (const path of [
      "/workspace/../outside.txt",
      "/workspace/sub/../../outside.txt",
      "/workspace/relative-escape",
      "/workspace/absolute-escape",
      `/workspace/${join(box.path, "outside.txt")}`,
      "/etc/passwd",
    ]) {
      const receipt = await fs({ op: "read", path }, rw);
      expect(receipt, path).toMatchObject({ outcome: "failure", code: "not-permitted" });
    }
    expect(await fs({ op: "write", path: "/workspace/../escaped.txt", data: "x" }, rw)).toMatchObject({ outcome: "failure", code: "not-permitted" });
    expect(await readdir(box.path)).not.toContain("escaped.txt");
    // Nothing at all without a grant.
    expect(await fs({ op: "read", path: "/workspace/hello.txt" }, {})).toMatchObject({ outcome: "failure", code: "not-permitted" });
  }, 60_000);

  it("gives each invocation a fresh /scratch and removes it afterwards", async () => {
    const scratch = { scratch: "write" } as const;
    expect(output(await fs({ op: "write", path: "/scratch/note.txt", data: "temporary" }, scratch))).toEqual({ v: 1, ok: true, bytes: 9 });
    expect(await fs({ op: "read", path: "/scratch/note.txt" }, scratch)).toMatchObject({ outcome: "failure", code: "no-entry" });
    expect(output(await fs({ op: "list", path: "/scratch" }, scratch))).toEqual({ v: 1, ok: true, entries: [] });
    // Each invocation's /scratch, in its worker's directory, is removed once its receipt is in.
    const roots = (await readdir(join(SHARED_DATA_DIR, "invocations"))).filter((name) => name.startsWith(`${process.pid}-`));
    expect(roots.length).toBeGreaterThan(0);
    const scratchDirs = async () =>
      (
        await Promise.all(
          roots.map(async (root) =>
            (await readdir(join(SHARED_DATA_DIR, "invocations", root))).map((worker) => join(SHARED_DATA_DIR, "invocations", root, worker, "scratch")),
          ),
        )
      ).flat();
    const leftovers = async () => (await Promise.all((await scratchDirs()).map((dir) => readdir(dir).catch(() => [])))).flat();
    for (let polls = 0; (await leftovers()).length > 0; polls++) {
      if (polls > 1000) throw new Error(`invocation directories left behind: ${(await leftovers()).join(", ")}`);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  }, 60_000);

  it('honours the scratch mode: "read" is an empty read-only /scratch, "write" a writable one', async () => {
    const read = { scratch: "read" } as const;
    expect(output(await fs({ op: "list", path: "/scratch" }, read))).toEqual({ v: 1, ok: true, entries: [] });
    expect(await fs({ op: "write", path: "/scratch/note.txt", data: "x" }, read)).toMatchObject({ outcome: "failure", code: "read-only" });
    const write = { scratch: "write" } as const;
    expect(output(await fs({ op: "write", path: "/scratch/note.txt", data: "x" }, write))).toEqual({ v: 1, ok: true, bytes: 1 });
  }, 60_000);

  it("has no /scratch without a scratch grant", async () => {
    expect(await fs({ op: "list", path: "/scratch" }, {})).toMatchObject({ outcome: "failure", code: "not-permitted" });
    // Beside a workspace, /scratch is no directory of its own and leads nowhere outside.
    expect(await fs({ op: "write", path: "/scratch/note.txt", data: "x" }, { workspace: "write" })).toMatchObject({
      outcome: "failure",
      code: "not-permitted",
    });
    expect(await readdir(workspace)).not.toContain("scratch");
  }, 60_000);

  it("mounts granted secrets read-only under /secrets, and nothing else", async () => {
    const source = { API_TOKEN: "t0ps3cret", OTHER: "x", NOT_GRANTED: "y" };
    const granted = { grants: grants({ secrets: ["API_TOKEN", "OTHER"] }), secretSource: source };
    expect(output(await run(pool, secretsJs, { v: 1, name: "API_TOKEN" }, granted))).toEqual({ v: 1, value: "t0ps3cret" });
    expect(await run(pool, secretsJs, { v: 1, name: "API_TOKEN" }, { secretSource: source })).toMatchObject({ outcome: "failure", code: "not-permitted" });
    expect(await run(pool, secretsJs, { v: 1, name: "NOT_GRANTED" }, granted)).toMatchObject({ outcome: "failure", code: "no-entry" });
    expect(await run(pool, secretsJs, { v: 1, name: "../hello.txt" }, granted)).toMatchObject({ outcome: "failure", code: "not-permitted" });
    // The secrets preopen refuses writes even to its own files.
    const write = await run(pool, workspaceJs, { v: 1, op: "write", path: "/secrets/API_TOKEN", data: "changed" }, granted);
    expect(write).toMatchObject({ outcome: "failure", code: "read-only" });
  }, 60_000);

  it("refuses a granted secret without a value, or named unlike an environment variable, before anything runs", async () => {
    const unset = await run(pool, secretsJs, { v: 1, name: "API_TOKEN" }, { grants: grants({ secrets: ["API_TOKEN"] }), secretSource: {} });
    expect(unset).toMatchObject({ outcome: "failure", code: "secret_unavailable", message: expect.stringContaining("API_TOKEN") });
    const badName = await run(pool, secretsJs, { v: 1, name: "x" }, { grants: grants({ secrets: ["../evil"] }), secretSource: { "../evil": "x" } });
    expect(badName).toMatchObject({ outcome: "failure", code: "invalid_argument" });
  }, 60_000);

  it("refuses a workspace grant without the directory behind it", async () => {
    const receipt = await run(pool, workspaceJs, { v: 1, op: "list", path: "/workspace" }, { grants: grants({ filesystem: { workspace: "read" } }) });
    expect(receipt).toMatchObject({ outcome: "failure", code: "invalid_argument", message: expect.stringContaining("workspaceDir") });
  }, 60_000);
});

describe("network grants", () => {
  it("lets a granted origin through", async () => {
    const receipt = await run(pool, fetchJs, { v: 1, url: `${origin}/granted` }, { grants: grants({ network: [origin] }) });
    expect(output(receipt)).toEqual({ v: 1, status: 200, body: JSON.stringify({ pong: "/granted" }) });
    expect(server.requests).toContain("GET /granted");
  }, 60_000);

  it("refuses origins not granted before any connection is made", async () => {
    const port = new URL(origin).port;
    const cases: [string, string[]][] = [
      ["none-granted", []],
      ["localhost-lookalike", [`http://localhost:${port}`]],
      ["other-port", [`http://127.0.0.1:${Number(port) + 1}`]],
      ["https-only", [`https://127.0.0.1:${port}`]],
      ["wildcard", ["https://*.example.com"]],
    ];
    for (const [name, network] of cases) {
      const receipt = await run(pool, fetchJs, { v: 1, url: `${origin}/${name}` }, { grants: grants({ network }) });
      expect(receipt, name).toMatchObject({ outcome: "failure", code: "http_error" });
    }
    expect(server.requests.filter((request) => cases.some(([name]) => request.endsWith(`/${name}`)))).toEqual([]);
  }, 60_000);
});

describe("waiting on HTTP", () => {
  it("suspends the guest instead of blocking its worker; a deadline during the wait stops only that call", async () => {
    const single = await startPool({ workers: 1 });
    try {
      await single.prepare(fetchJs);
      await single.prepare(echo);
      const slow = run(single, fetchJs, { v: 1, url: `${origin}/slow-1` }, { grants: grants({ network: [origin] }) });
      const answer = await server.held("/slow-1");
      // The only worker has a guest waiting on an HTTP response that has not come, yet it serves
      // another call meanwhile.
      expect(output(await run(single, echo, { v: 1 }))).toEqual({ v: 1 });
      answer();
      expect(output(await slow)).toMatchObject({ status: 200 });
      // A deadline that passes while the guest waits (the response never comes): timeout, and the
      // worker is not replaced. The deadline leaves the request time to arrive on a loaded machine;
      // the test waits for it to arrive, so the deadline passes during the wait.
      const late = run(single, fetchJs, { v: 1, url: `${origin}/slow-2` }, { grants: grants({ network: [origin] }), deadlineMs: Date.now() + 2_000 });
      await server.held("/slow-2");
      const receipt = await late;
      expect(receipt, JSON.stringify(receipt)).toMatchObject({ outcome: "failure", code: "timeout" });
      expect(single.stats().replacements).toBe(0);
      expect(output(await run(single, echo, { v: 2 }))).toEqual({ v: 2 });
    } finally {
      await single.close();
    }
  }, 60_000);
});

describe("fuel while waiting (SPEC 8: HTTP, model and tool waits consume no fuel)", () => {
  /** Runs echo calls on the pool: a wait that lasts as long as other guests take to compute. */
  async function otherCalls(): Promise<void> {
    for (let i = 0; i < 5; i++) expect(output(await run(pool, echo, { v: i }))).toEqual({ v: i });
  }

  function fuelOf(receipt: Receipt): number {
    if (receipt.outcome !== "returned") throw new Error(`expected a returned receipt, got ${JSON.stringify(receipt)}`);
    return receipt.fuelUsed;
  }

  it("a guest uses the same fuel whether its HTTP response comes at once or after other calls ran", async () => {
    // Paths of one length: the same bytes to parse either way.
    const fetch = (path: string) => run(pool, fetchJs, { v: 1, url: `${origin}${path}` }, { grants: grants({ network: [origin] }) });
    const atOnce = fuelOf(await fetch("/fast-fuel"));
    expect(fuelOf(await fetch("/fast-fuel"))).toBe(atOnce);
    const waiting = fetch("/slow-fuel");
    const answer = await server.held("/slow-fuel");
    await otherCalls();
    answer();
    expect(fuelOf(await waiting)).toBe(atOnce);
  }, 60_000);

  it("an agent loop uses the same fuel whether the model and its tools answer at once or after other calls ran", async () => {
    const source = `function turn(input, configuration, host) {
      const answer = host.callModel({ v: 1, messages: [{ role: "user", content: "go" }] });
      const dispatched = host.dispatchTools({ v: 1, calls: answer.message.tool_calls });
      return { answer: answer.message.content, results: dispatched.results };
    }`;
    const reply = JSON.stringify({ v: 1, message: { content: "ok", tool_calls: [{ id: "t1", name: "echo", input: { v: 1 } }] } });
    const results = JSON.stringify({ v: 1, results: [{ id: "t1", output: { v: 1 } }] });
    const turn = async (wait: () => Promise<void>) =>
      fuelOf(
        await pool.invoke({
          component: programLoop,
          entrypoint: "turn",
          input: "{}",
          configuration: "{}",
          deadlineMs: Date.now() + 30_000,
          grants: NO_GRANTS,
          host: { callModel: async () => (await wait(), reply), dispatchTools: async () => (await wait(), results), emit: () => undefined },
          program: { source },
        }),
      );
    const atOnce = await turn(async () => undefined);
    expect(await turn(async () => undefined)).toBe(atOnce);
    expect(await turn(otherCalls)).toBe(atOnce);
  }, 60_000);
});

describe("the guest's WASI world", () => {
  it("has no host environment variables, arguments or cwd", async () => {
    const reported = output(await run(pool, environmentJs, { v: 1 })) as { variables: [string, string][] };
    expect(reported.variables).not.toContainEqual(SENTINEL);
    expect(reported).toEqual({ v: 1, variables: [], arguments: [], cwd: null });
  }, 60_000);

  it("turns wasi:cli/exit into a failed invocation; the worker, and the process, carry on", async () => {
    const before = pool.stats().replacements;
    const receipt = await run(pool, environmentJs, { v: 1, exit: true });
    expect(receipt).toMatchObject({ outcome: "failure", code: "guest_trap", message: expect.stringContaining("wasi:cli/exit") });
    expect(pool.stats().replacements).toBe(before);
    expect(output(await run(pool, environmentJs, { v: 1 }))).toMatchObject({ v: 1 });
  }, 60_000);
});

describe("programs", () => {
  it("runs a JavaScript program as a tool", async () => {
    const source = `function run(input, configuration, context) {
      return { sum: input.a + input.b, configuration, hasDeadline: typeof context.deadlineMs === "number" };
    }`;
    const receipt = await run(pool, programTool, { a: 2, b: 3 }, { configuration: JSON.stringify({ unit: "apples" }), program: { source } });
    expect(output(receipt)).toEqual({ sum: 5, configuration: { unit: "apples" }, hasDeadline: true });
    const failing = await run(pool, programTool, {}, { program: { source: "function run() { throw { code: 'nope', message: 'refused' }; }" } });
    expect(failing).toMatchObject({ outcome: "failure", code: "nope", message: "refused" });
    expect(await run(pool, programTool, {}, { program: { source: "this is not javascript" } })).toMatchObject({ outcome: "failure", code: "invalid_program" });
  }, 60_000);

  it("runs a JavaScript program as an agent loop whose tool calls reach real components", async () => {
    const source = `function turn(input, configuration, host) {
      const answer = host.callModel({ v: 1, messages: [{ role: "user", content: input.question }] });
      const dispatched = host.dispatchTools({ v: 1, calls: answer.message.tool_calls });
      host.emit({ v: 1, kind: "program_progress" });
      return { answer: answer.message.content, results: dispatched.results, style: configuration.style };
    }`;
    const events: string[] = [];
    const host: HostServices = {
      callModel: async (request) => {
        const { messages } = JSON.parse(request) as { messages: { content: string }[] };
        return JSON.stringify({
          v: 1,
          message: { content: `about ${messages[0]!.content}`, tool_calls: [{ id: "t1", name: "echo", input: { v: 1, echoed: true } }] },
        });
      },
      dispatchTools: async (calls) => {
        const { calls: list } = JSON.parse(calls) as { calls: { id: string; input: unknown }[] };
        const results = [];
        for (const call of list) results.push({ id: call.id, output: output(await run(pool, echo, call.input)) });
        return JSON.stringify({ v: 1, results });
      },
      emit: (event) => events.push(event),
    };
    const receipt = await pool.invoke({
      component: programLoop,
      entrypoint: "turn",
      input: JSON.stringify({ question: "fuel" }),
      configuration: JSON.stringify({ style: "terse" }),
      deadlineMs: Date.now() + 30_000,
      grants: NO_GRANTS,
      host,
      program: { source },
    });
    expect(output(receipt)).toEqual({ answer: "about fuel", results: [{ id: "t1", output: { v: 1, echoed: true } }], style: "terse" });
    expect(events).toEqual([JSON.stringify({ v: 1, kind: "program_progress" })]);
  }, 60_000);

  it("passes on at most 100 progress events of at most 16 KiB each; the rest are dropped in the worker", async () => {
    const source = `function turn(input, configuration, host) {
      for (let i = 0; i < 300; i++) host.emit({ v: 1, i, pad: "x".repeat(i % 3 === 0 ? 20000 : 10) });
      return { emitted: 300 };
    }`;
    const events: string[] = [];
    let dropped = 0;
    const host: HostServices = {
      callModel: async () => "{}",
      dispatchTools: async () => "{}",
      emit: (event) => events.push(event),
      dropped: (count) => (dropped += count),
    };
    // Building 20 KB strings in an interpreted JS engine costs fuel: more than the default.
    const receipt = await pool.invoke({
      component: programLoop,
      entrypoint: "turn",
      input: "{}",
      configuration: "{}",
      deadlineMs: Date.now() + 60_000,
      grants: NO_GRANTS,
      host,
      program: { source },
      fuel: 200_000_000_000,
    });
    expect(output(receipt)).toEqual({ emitted: 300 });
    expect(events).toHaveLength(100);
    expect(events.every((event) => Buffer.byteLength(event) <= 16 * 1024)).toBe(true);
    // The small ones, in order: every third was too large.
    expect(events.slice(0, 3).map((event) => (JSON.parse(event) as { i: number }).i)).toEqual([1, 2, 4]);
    // The host is told how many it did not get, once.
    expect(dropped).toBe(200);
  }, 60_000);

  it("a host failure reaches the agent loop as its failure record", async () => {
    const host: HostServices = {
      callModel: async () => {
        throw { code: "model_unavailable", message: "the provider is down" };
      },
      dispatchTools: async () => "{}",
      emit: () => undefined,
    };
    const receipt = await pool.invoke({
      component: programLoop,
      entrypoint: "turn",
      input: "{}",
      configuration: "{}",
      deadlineMs: Date.now() + 30_000,
      grants: NO_GRANTS,
      host,
      program: { source: "function turn(input, configuration, host) { return host.callModel({ v: 1, messages: [] }); }" },
    });
    expect(receipt).toMatchObject({ outcome: "failure", code: "model_unavailable", message: "the provider is down" });
  }, 60_000);

  it("a turn waiting on the host past its deadline times out without stopping the worker", async () => {
    const before = pool.stats().replacements;
    const host: HostServices = {
      callModel: () => new Promise<string>(() => undefined),
      dispatchTools: async () => "{}",
      emit: () => undefined,
    };
    const receipt = await pool.invoke({
      component: programLoop,
      entrypoint: "turn",
      input: "{}",
      configuration: "{}",
      deadlineMs: Date.now() + 500,
      grants: NO_GRANTS,
      host,
      program: { source: "function turn(input, configuration, host) { return host.callModel({ v: 1, messages: [] }); }" },
    });
    expect(receipt).toMatchObject({ outcome: "failure", code: "timeout" });
    expect(pool.stats().replacements).toBe(before);
  }, 60_000);
});
