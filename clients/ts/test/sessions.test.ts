import * as fs from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildTestComponents, killWorker, COMPONENTS_DIR } from "../../../server/test/helpers/pool.ts";
import { KEY_A, KEY_B, requestLogSince, startTestService, type TestService } from "../../../server/test/helpers/service.ts";
import {
  createNodeTransport,
  createServiceClient,
  hostEnv,
  PlacementError,
  program,
  serviceEnv,
  serviceErrorCode,
  tool,
  type ComponentBytes,
  type FetchFunction,
  type ServiceClient,
  type SessionEvent,
  type ToolPlacement,
} from "../src/node.ts";

/** A tool program that doubles `n` in the configured unit, and fails with its own code below zero. */
const DOUBLER = `function run(input, configuration) {
  if (input.n < 0) throw { code: "negative_input", message: "n must not be negative" };
  return { doubled: input.n * 2, unit: configuration.unit };
}`;

const components = new Map<string, Uint8Array>();
beforeAll(async () => {
  await buildTestComponents();
  for (const name of ["echo-wat", "workspace-js", "js-program-tool", "loop-wat"])
    components.set(name, await fs.readFile(path.join(COMPONENTS_DIR, `${name}.wasm`)));
}, 600_000);

const component = (name: string): ComponentBytes => ({ kind: "tool", bytes: components.get(name)! });
const doubler = (configuration?: unknown) => program({ runtime: component("js-program-tool"), source: new TextEncoder().encode(DOUBLER), configuration });

/** A real service whose workspace root lies inside its filesystem allow-list. */
async function startService(extra: Record<string, string> = {}): Promise<TestService> {
  const root = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "skillenv-client-sessions-")));
  return startTestService({ SERVICE_ENV_FILESYSTEM_ALLOW: root, SERVICE_ENV_WORKSPACE_ROOT: path.join(root, "workspaces"), ...extra });
}

function clientOf(service: TestService, key = KEY_A, fetch?: FetchFunction): ServiceClient {
  return createServiceClient(createNodeTransport({ baseUrl: service.url, apiKey: key }), fetch ? { fetch } : {});
}

/** The RPCs the service answered since log line `from`, e.g. "skillenv.env.v1.ArtifactService/AdmitTool". */
async function proceduresSince(service: TestService, from: number): Promise<string[]> {
  return (await requestLogSince(service, from)).flatMap((line: { procedure?: string }) => line.procedure ?? []);
}

async function artifactCallsSince(service: TestService, from: number): Promise<string[]> {
  return (await proceduresSince(service, from)).filter((procedure) => procedure.startsWith("skillenv.env.v1.ArtifactService/"));
}

async function refusalOf(call: Promise<unknown>): Promise<ConnectError> {
  const error = await call.then(
    () => undefined,
    (thrown: unknown) => thrown,
  );
  expect(error).toBeInstanceOf(ConnectError);
  return error as ConnectError;
}

async function collect(events: AsyncIterable<SessionEvent>): Promise<SessionEvent[]> {
  const all: SessionEvent[] = [];
  for await (const event of events) all.push(event);
  return all;
}

describe("factories", () => {
  let service: TestService;
  beforeAll(async () => {
    service = await startService();
  });
  afterAll(() => service?.close());

  it("do no I/O: nothing is fetched or called until a session is created", async () => {
    const fetched: string[] = [];
    const offline: FetchFunction = async (input) => {
      fetched.push(input);
      throw new Error("offline");
    };
    const client = clientOf(service, KEY_A, offline);
    const before = service.logs.length;

    const sandbox = serviceEnv({ name: "sandbox", filesystem: { workspace: "write" } });
    const remote = program({ runtime: component("js-program-tool"), source: new URL("https://programs.example.com/double.js") });
    const tools = [
      tool({ name: "remote", environment: sandbox, implementation: remote }),
      tool({ name: "echo", environment: sandbox, implementation: component("echo-wat") }),
    ];
    expect(fetched).toEqual([]);
    expect(await requestLogSince(service, before)).toEqual([]);

    await expect(client.sessions.create({ environments: [sandbox], tools })).rejects.toThrow("offline");
    expect(fetched).toEqual(["https://programs.example.com/double.js"]);
  });

  it("refuse an implementation that cannot run as a tool", () => {
    const sandbox = serviceEnv({ name: "sandbox" });
    const place = (implementation: Parameters<typeof tool>[0]["implementation"]) => () => tool({ name: "t", environment: sandbox, implementation });
    expect(place("not-a-digest")).toThrow(PlacementError);
    expect(place({ kind: "agentloop", bytes: new Uint8Array() })).toThrow(/kind: "tool"/);
    expect(place({ kind: "tool" } as ComponentBytes)).toThrow(/kind: "tool"/);
    expect(place(program({ runtime: { kind: "agentloop", bytes: new Uint8Array() }, source: new Uint8Array() }))).toThrow(/tool runtime/);
    expect(place("a".repeat(64))).not.toThrow();
  });

  it("freeze definitions, and a tool takes its program's configuration unless given its own", () => {
    const sandbox = serviceEnv({ name: "sandbox", network: ["https://api.example.com"] });
    expect(sandbox).toEqual({ kind: "service", name: "sandbox", setup: "automatic", filesystem: {}, network: ["https://api.example.com"], secrets: [] });
    expect(Object.isFrozen(sandbox.network)).toBe(true);
    expect(tool({ name: "t", environment: sandbox, implementation: doubler({ unit: "cm" }) }).configuration).toEqual({ unit: "cm" });
    expect(tool({ name: "t", environment: sandbox, implementation: doubler({ unit: "cm" }), configuration: { unit: "in" } }).configuration).toEqual({
      unit: "in",
    });
  });
});

describe("client.sessions", () => {
  let service: TestService;
  let client: ServiceClient;
  const sandbox = serviceEnv({ name: "sandbox" });
  let echo: ToolPlacement;
  beforeAll(async () => {
    service = await startService();
    client = clientOf(service);
    echo = tool({ name: "echo", description: "Echoes its input.", environment: sandbox, implementation: component("echo-wat") });
  }, 120_000);
  afterAll(() => service?.close());

  it("creates a session with a component given by bytes and calls its tool", async () => {
    const session = await client.sessions.create({ environments: [sandbox], tools: [echo] });
    expect(session.id).toMatch(/^ses_[0-9a-z]{26}$/);
    expect(session.state).toBe("ready");
    expect(session.environments).toEqual([{ name: "sandbox", kind: "service", setup: "automatic", state: "ready" }]);
    expect(session.record.tools).toEqual([{ name: "echo", description: "Echoes its input.", environment: "sandbox", approval: "never" }]);

    const result = await session.callTool("echo", { text: "hello", n: 1 });
    expect(result).toEqual({ outcome: "returned", output: { text: "hello", n: 1 }, operationId: expect.stringMatching(/^op_/) });
  });

  it("creates a session with a program, and returns the tool's own failure as a receipt", async () => {
    const programs = serviceEnv({ name: "programs" });
    const double = tool({ name: "double", environment: "programs", implementation: doubler({ unit: "cm" }) });
    const session = await client.sessions.create({ environments: [programs], tools: [double] });

    expect(await session.callTool("double", { n: 21 })).toMatchObject({ outcome: "returned", output: { doubled: 42, unit: "cm" } });
    const failed = await session.callTool("double", { n: -1 });
    expect(failed).toEqual({
      outcome: "failure",
      code: "negative_input",
      message: "n must not be negative",
      retryable: false,
      details: {},
      operationId: expect.stringMatching(/^op_/),
    });
  }, 60_000);

  it("carries the environment's grants: a file written to /workspace is read by a later call", async () => {
    const files = serviceEnv({ name: "files", filesystem: { workspace: "write" } });
    const session = await client.sessions.create({
      environments: [files],
      tools: [tool({ name: "fs", environment: files, implementation: component("workspace-js") })],
    });

    expect(await session.callTool("fs", { v: 1, op: "write", path: "/workspace/notes.txt", data: "kept" })).toMatchObject({ outcome: "returned" });
    expect(await session.callTool("fs", { v: 1, op: "read", path: "/workspace/notes.txt" })).toMatchObject({
      outcome: "returned",
      output: { v: 1, ok: true, data: "kept" },
    });
    expect(await session.callTool("fs", { v: 1, op: "read", path: "/workspace/missing.txt" })).toMatchObject({ outcome: "failure", code: "no-entry" });
  }, 60_000);

  it("admits each component and program instance once per client, however many sessions use it", async () => {
    const programs = serviceEnv({ name: "programs" });
    const definition = {
      environments: [sandbox, programs],
      tools: [echo, tool({ name: "double", environment: programs, implementation: doubler({ unit: "m" }) })],
    };
    await client.sessions.create(definition);
    const before = service.logs.length;
    const again = await client.sessions.create(definition);
    expect(await artifactCallsSince(service, before)).toEqual([]);
    expect(await again.callTool("double", { n: 1 })).toMatchObject({ outcome: "returned", output: { doubled: 2, unit: "m" } });
  }, 60_000);

  it("refuses, before calling anything, a tool placed in an environment the session does not define", async () => {
    const before = service.logs.length;
    const elsewhere = tool({ name: "echo", environment: "elsewhere", implementation: component("echo-wat") });
    await expect(client.sessions.create({ environments: [sandbox], tools: [elsewhere] })).rejects.toThrow(PlacementError);
    const wider = tool({
      name: "echo",
      environment: serviceEnv({ name: "sandbox", filesystem: { workspace: "write" } }),
      implementation: component("echo-wat"),
    });
    await expect(client.sessions.create({ environments: [sandbox], tools: [wider] })).rejects.toThrow(/differs from the session's/);
    expect(await requestLogSince(service, before)).toEqual([]);
  });

  it("surfaces the server's refusals as ConnectErrors carrying the stable code", async () => {
    const outside = serviceEnv({ name: "net", network: ["https://api.example.com"] });
    const refused = await refusalOf(
      client.sessions.create({ environments: [outside], tools: [tool({ name: "echo", environment: outside, implementation: component("echo-wat") })] }),
    );
    expect(serviceErrorCode(refused)).toBe("grant_not_allowed");

    const unadmitted = tool({ name: "ghost", environment: sandbox, implementation: "0".repeat(64) });
    expect(serviceErrorCode(await refusalOf(client.sessions.create({ environments: [sandbox], tools: [unadmitted] })))).toBe("not_found");

    const session = await client.sessions.create({ environments: [sandbox], tools: [echo] });
    const unknownTool = await refusalOf(session.callTool("missing", {}));
    expect(unknownTool.code).toBe(Code.NotFound);
    expect(serviceErrorCode(unknownTool)).toBe("tool_not_found");
  });

  it("replays the journal as events, from the start or after a position", async () => {
    const session = await client.sessions.create({ environments: [sandbox], tools: [echo] });
    const called = await session.callTool("echo", 7);
    await session.end();

    const events = await collect(session.events());
    expect(events.map((event) => event.type)).toEqual([
      "session.created",
      "operation.sent",
      "operation.receipt",
      "environment.ready",
      "operation.sent",
      "operation.receipt",
      "operation.sent",
      "operation.receipt",
      "session.ended",
    ]);
    expect(events.map((event) => event.seq)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(events.every((event) => event.at instanceof Date && !Number.isNaN(event.at.getTime()))).toBe(true);
    expect(events[4]?.data).toMatchObject({ operationId: called.operationId, kind: "execute", tool: "echo", environment: "sandbox", input: 7 });
    expect(events[5]?.data).toMatchObject({ operationId: called.operationId, receipt: { returned: { output: 7 } } });

    expect((await collect(session.events({ after: 5 }))).map((event) => event.seq)).toEqual([6, 7, 8, 9]);
  });

  it("streams events live, and a stream stopped by its signal ends without an error", async () => {
    const session = await client.sessions.create({ environments: [sandbox], tools: [echo] });
    const stop = new AbortController();
    const seen: string[] = [];
    let calling: Promise<unknown> | undefined;
    for await (const event of session.events({ signal: stop.signal })) {
      seen.push(event.type);
      // The stream is open and has caught up with the journal: what follows is written live.
      if (event.type === "environment.ready") calling = session.callTool("echo", "live");
      if (event.type === "operation.receipt" && event.seq > 4) stop.abort();
    }
    await calling;
    expect(seen).toEqual(["session.created", "operation.sent", "operation.receipt", "environment.ready", "operation.sent", "operation.receipt"]);
  });

  it("sets up a manual environment when asked, then ends and deletes the session", async () => {
    const manual = serviceEnv({ name: "manual", setup: "manual" });
    const session = await client.sessions.create({
      environments: [manual],
      tools: [tool({ name: "echo", environment: manual, implementation: component("echo-wat") })],
    });
    expect(session.environments[0]?.state).toBe("pending");
    expect(serviceErrorCode(await refusalOf(session.callTool("echo", 1)))).toBe("environment_not_ready");

    const setup = await session.setupEnvironment("manual");
    expect(setup).toEqual({ environment: { name: "manual", kind: "service", setup: "manual", state: "ready" }, receipt: { outcome: "returned", output: {} } });
    expect(session.environments[0]?.state).toBe("ready");
    expect((await session.setupEnvironment("manual")).receipt).toBeUndefined();
    expect(await session.callTool("echo", 1)).toMatchObject({ outcome: "returned", output: 1 });

    const ended = await session.end();
    expect(ended.state).toBe("ended");
    expect(ended.endedAt).toBeInstanceOf(Date);
    expect(session.environments[0]?.state).toBe("detached");
    expect(serviceErrorCode(await refusalOf(session.callTool("echo", 1)))).toBe("session_ended");

    await session.delete();
    expect(serviceErrorCode(await refusalOf(session.refresh()))).toBe("session_not_found");
  });

  it("gets a session by id, lists a page at a time and iterates over all of them", async () => {
    const first = await client.sessions.create({ environments: [sandbox], tools: [echo] });
    const second = await client.sessions.create({ environments: [sandbox], tools: [echo] });

    const got = await client.sessions.get(first.id);
    expect(got.record).toEqual(first.record);
    expect(await got.callTool("echo", "via get")).toMatchObject({ outcome: "returned", output: "via get" });

    const page = await client.sessions.list({ pageSize: 1 });
    expect(page.sessions.map((session) => session.id)).toEqual([second.id]);
    const next = await client.sessions.list({ pageSize: 1, pageToken: page.nextPageToken });
    expect(next.sessions.map((session) => session.id)).toEqual([first.id]);

    const all: string[] = [];
    for await (const session of client.sessions.all({ pageSize: 2 })) all.push(session.id);
    expect(all.slice(0, 2)).toEqual([second.id, first.id]);
    expect(new Set(all).size).toBe(all.length);

    await client.sessions.delete(second.id);
    expect(serviceErrorCode(await refusalOf(client.sessions.get(second.id)))).toBe("session_not_found");
  });

  it("keeps workspace A's sessions out of workspace B's reach", async () => {
    const session = await client.sessions.create({ environments: [sandbox], tools: [echo] });
    const b = clientOf(service, KEY_B);
    const refused = await refusalOf(b.sessions.get(session.id));
    expect(refused.code).toBe(Code.NotFound);
    expect(serviceErrorCode(refused)).toBe("session_not_found");
    expect(serviceErrorCode(await refusalOf(b.sessions.delete(session.id)))).toBe("session_not_found");
    const listed: string[] = [];
    for await (const listedSession of b.sessions.all()) listed.push(listedSession.id);
    expect(listed).not.toContain(session.id);
    expect((await session.refresh()).state).toBe("ready");
  });
});

describe("client.prepare", () => {
  let service: TestService;
  beforeAll(async () => {
    service = await startService();
  }, 120_000);
  afterAll(() => service?.close());

  const sandbox = serviceEnv({ name: "sandbox" });

  it("prepares placements on every worker; sessions of several clients reuse them without admitting again", async () => {
    const client = clientOf(service);
    const beforePrepare = service.logs.length;
    const echo = await client.prepare(tool({ name: "echo", environment: sandbox, implementation: component("echo-wat") }));
    const double = await client.prepare(tool({ name: "double", environment: sandbox, implementation: doubler(), configuration: { unit: "mm" } }));
    expect((await artifactCallsSince(service, beforePrepare)).filter((call) => call.endsWith("/Prepare"))).toHaveLength(2);

    expect(echo.implementation).toMatch(/^[0-9a-f]{64}$/);
    expect(double).toMatchObject({
      name: "double",
      environment: sandbox,
      configuration: { unit: "mm" },
      implementation: { type: "service_program", entrypoint: "run" },
    });
    const pool = service.serviceEnv.pool!;
    expect(pool.isPrepared(echo.implementation as string)).toBe(true);
    expect(pool.isPrepared((double.implementation as { runtime: string }).runtime)).toBe(true);

    const before = service.logs.length;
    const sessions = await Promise.all([client, clientOf(service)].map((each) => each.sessions.create({ environments: [sandbox], tools: [echo, double] })));
    expect(await artifactCallsSince(service, before)).toEqual([]);
    for (const session of sessions) {
      expect(await session.callTool("double", { n: 2 })).toMatchObject({ outcome: "returned", output: { doubled: 4, unit: "mm" } });
      expect(await session.callTool("echo", "prepared")).toMatchObject({ outcome: "returned", output: "prepared" });
    }
  }, 120_000);

  it("prepares again by checking readiness only, and prepares a program by itself", async () => {
    const client = clientOf(service);
    const placed = tool({ name: "echo", environment: sandbox, implementation: component("echo-wat") });
    await client.prepare(placed);
    const before = service.logs.length;
    await client.prepare(placed);
    expect(await artifactCallsSince(service, before)).toEqual(["skillenv.env.v1.ArtifactService/Prepare"]);

    const resolved = await client.prepare(doubler({ unit: "km" }));
    expect(resolved).toMatchObject({ type: "service_program", entrypoint: "run", configuration: { unit: "km" } });
    expect(service.serviceEnv.pool!.isPrepared(resolved.runtime)).toBe(true);
  }, 120_000);

  it("refuses placements outside the service environment, calling nothing", async () => {
    const client = clientOf(service);
    const before = service.logs.length;
    const byName = tool({ name: "echo", environment: "sandbox", implementation: component("echo-wat") });
    await expect(client.prepare(byName)).rejects.toThrow(/only placements in the service environment/);
    const laptop = hostEnv({ name: "laptop", tools: { echo: (input) => input } });
    await expect(client.prepare(tool({ name: "echo", environment: laptop }))).rejects.toThrow(
      new PlacementError(
        "cannot prepare tool echo: it is placed in the host environment laptop; only placements in the service environment (serviceEnv) are prepared",
      ),
    );
    expect(await requestLogSince(service, before)).toEqual([]);
  });
});

describe("receipts without a result", () => {
  let service: TestService;
  beforeAll(async () => {
    service = await startService();
  }, 120_000);
  afterAll(() => service?.close());

  it("ends a call at its timeoutMs, and reports a worker lost mid-call as unknown", async () => {
    const sandbox = serviceEnv({ name: "sandbox" });
    const spin = tool({ name: "spin", environment: sandbox, implementation: component("loop-wat") });
    const session = await clientOf(service).sessions.create({ environments: [sandbox], tools: [spin] });
    expect(await session.callTool("spin", {}, { timeoutMs: 200 })).toMatchObject({ outcome: "failure", code: "timeout" });

    const calling = session.callTool("spin", {}, { timeoutMs: 30_000 });
    const pool = service.serviceEnv.pool!;
    // Killed once its guest runs: before that the call did not start, and ends `unavailable`.
    await waitUntil(() => pool.stats().workers.some((worker) => worker.running > 0));
    killWorker(pool, pool.stats().workers.find((worker) => worker.running > 0)!.index);
    expect(await calling).toMatchObject({ outcome: "unknown", message: expect.any(String), operationId: expect.stringMatching(/^op_/) });
  }, 60_000);
});

/** Polls a condition the test cannot await directly (a call reaching a worker). */
async function waitUntil(check: () => boolean): Promise<void> {
  while (!check()) await new Promise((resolve) => setTimeout(resolve, 10));
}
