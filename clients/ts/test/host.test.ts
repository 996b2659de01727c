import * as fs from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../../../server/test/helpers/ports.ts";
import { spawnService, type ServiceProcess } from "../../../server/test/helpers/process.ts";
import type { ReportRequest } from "../gen/skillenv/env/v1/host_pb.js";
import { KEY_A, requestLogSince, startTestService, type TestService } from "../../../server/test/helpers/service.ts";
import { startScriptedProvider, type ScriptedProvider } from "../../../testing/scripted-provider/index.ts";
import { DEFAULT_RECONNECT, reconnectDelay } from "../src/hosts/backoff.ts";
import {
  apiKeyInterceptor,
  createNodeTransport,
  createServiceClient,
  HostClosedError,
  hostEnv,
  PlacementError,
  serviceEnv,
  tool,
  type HostConnection,
  type HostState,
  type HostStreaming,
  type HostToolContext,
  type ServiceClient,
  type Session,
  type SessionEvent,
} from "../src/node.ts";

/** Fast reconnects, so that a test waiting for one does not wait long. */
const RECONNECT = { initialDelayMs: 20, maxDelayMs: 200 };

/**
 * The two forms of the command stream, each as a client would pick it: createNodeTransport over
 * HTTP/2 streams both ways; a connect-node transport over HTTP/1.1, told to, takes the form
 * browsers use (a server stream plus unary reports), which is what connect-web does in Chromium.
 */
const FORMS: Array<{ streaming: HostStreaming; client: (baseUrl: string, key?: string) => ServiceClient }> = [
  {
    streaming: "bidirectional",
    client: (baseUrl, key = KEY_A) => createServiceClient(createNodeTransport({ baseUrl, apiKey: key, httpVersion: "2" }), { hosts: { reconnect: RECONNECT } }),
  },
  {
    streaming: "server-streaming",
    client: (baseUrl, key = KEY_A) =>
      createServiceClient(createConnectTransport({ baseUrl, httpVersion: "1.1", interceptors: [apiKeyInterceptor(key)] }), {
        hosts: { streaming: "server-streaming", reconnect: RECONNECT },
      }),
  },
];

/** Resolves when called: lets a test wait for a handler to reach a point, without timers. */
function latch<T = void>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((done) => (resolve = done));
  return { promise, resolve };
}

/** Every state `host` goes through from now on. */
function statesOf(host: HostConnection): HostState[] {
  const states: HostState[] = [];
  host.onStateChange((state) => states.push(state));
  return states;
}

/** Resolves once `host` is in `state`. */
function reaches(host: HostConnection, state: HostState): Promise<void> {
  return new Promise((resolve) => {
    const check = () => {
      if (host.state !== state) return;
      unsubscribe();
      resolve();
    };
    const unsubscribe = host.onStateChange(check);
    check();
  });
}

/** The session's events from the start until one satisfies `until`. */
async function eventsUntil(session: Session, until: (event: SessionEvent) => boolean): Promise<SessionEvent[]> {
  const abort = new AbortController();
  const events: SessionEvent[] = [];
  for await (const event of session.events({ signal: abort.signal })) {
    events.push(event);
    if (until(event)) abort.abort();
  }
  return events;
}

const receiptOf = (operationId: string) => (event: SessionEvent) => event.type === "operation.receipt" && event.data.operationId === operationId;

/** The RPCs the service answered since log line `from`, e.g. "skillenv.env.v1.HostService/Report". */
async function proceduresSince(service: TestService, from: number): Promise<string[]> {
  return (await requestLogSince(service, from)).flatMap((line: { procedure?: string }) => line.procedure ?? []);
}

let provider: ScriptedProvider;
let service: TestService;
beforeAll(async () => {
  provider = await startScriptedProvider();
  service = await startTestService({ SERVICE_ANTHROPIC_BASE_URL: provider.anthropicBaseUrl, SERVICE_MODEL_MAX_RETRIES: "0" });
});
afterAll(async () => {
  await service?.close();
  await provider?.close();
});

/** The journaled receipt of the session's last `wait` call, once it has one. */
async function waitReceipt(session: Session): Promise<unknown> {
  const sent = (await eventsUntil(session, (event) => event.type === "operation.sent" && event.data.tool === "wait")).at(-1)!;
  return (await eventsUntil(session, receiptOf(sent.data.operationId as string))).at(-1)!.data.receipt;
}

/**
 * A host environment whose one tool, `wait`, waits until the service cancels it: `started` once
 * it runs, `aborted` with its signal's reason.
 */
function waitingLaptop() {
  const started = latch();
  const aborted = latch<unknown>();
  const laptop = hostEnv({
    name: "laptop",
    tools: {
      wait: (_input, { signal }) =>
        new Promise((_resolve, reject) => {
          signal.addEventListener("abort", () => (aborted.resolve(signal.reason), reject(signal.reason)));
          started.resolve();
        }),
    },
  });
  return { laptop, started, aborted };
}

describe.each(FORMS)("a host over the $streaming command stream", ({ streaming, client: clientFor }) => {
  let client: ServiceClient;
  beforeAll(() => {
    client = clientFor(service.url);
  });

  it("serves a tool to CallTool: accepted at once, progress journaled, the output returned", async () => {
    const contexts: HostToolContext[] = [];
    const laptop = hostEnv({
      name: "laptop",
      tools: {
        lookup: async (input: { key: string }, context) => {
          contexts.push(context);
          context.progress(`looking up ${input.key}`);
          return { value: input.key.toUpperCase() };
        },
      },
    });
    const from = service.logs.length;
    const session = await client.sessions.create({
      environments: [laptop],
      tools: [tool({ name: "lookup", environment: laptop, implementation: { opaque: { handler: "lookup-v2" } }, configuration: { table: "users" } })],
    });
    expect(session.hosts.get("laptop")?.state).toBe("connected");

    const result = await session.callTool("lookup", { key: "ada" });

    expect(result).toMatchObject({ outcome: "returned", output: { value: "ADA" } });
    expect(contexts[0]).toMatchObject({
      operationId: result.operationId,
      implementation: { handler: "lookup-v2" },
      configuration: { table: "users" },
      sessionId: session.id,
      tool: "lookup",
    });
    expect(contexts[0]?.deadline.getTime()).toBeGreaterThan(Date.now());
    const events = await eventsUntil(session, receiptOf(result.operationId));
    const operation = events.filter((event) => event.data.operationId === result.operationId);
    expect(operation.map((event) => event.type)).toEqual(["operation.sent", "operation.accepted", "operation.progress", "operation.receipt"]);
    expect(operation[2]?.data.data).toBe("looking up ada");
    const host = (await proceduresSince(service, from)).filter((procedure) => procedure.startsWith("skillenv.env.v1.HostService/"));
    // Receipts travel on the stream itself, or as one Report each.
    expect(host.includes("skillenv.env.v1.HostService/Report")).toBe(streaming === "server-streaming");
    await session.delete();
  });

  it("answers a thrown failure with its code, anything else thrown as tool_error, an unserved tool as tool_not_served", async () => {
    const laptop = hostEnv({
      name: "laptop",
      tools: {
        strict: () => {
          throw { code: "invalid_date", message: "no such day", retryable: true, details: { field: "date", ignored: 3 } };
        },
        broken: () => {
          throw new Error("the handler broke");
        },
        silent: () => undefined,
      },
    });
    const session = await client.sessions.create({
      environments: [laptop],
      tools: ["strict", "broken", "silent", "ghost"].map((name) => tool({ name, environment: "laptop" })),
    });

    expect(await session.callTool("strict", {})).toMatchObject({
      outcome: "failure",
      code: "invalid_date",
      message: "no such day",
      retryable: true,
      details: { field: "date" },
    });
    expect(await session.callTool("broken", {})).toMatchObject({ outcome: "failure", code: "tool_error", message: "the handler broke", retryable: false });
    expect(await session.callTool("silent", {})).toMatchObject({ outcome: "returned", output: null });
    expect(await session.callTool("ghost", {})).toMatchObject({
      outcome: "failure",
      code: "tool_not_served",
      message: "this host does not serve tool ghost; it serves strict, broken, silent",
    });
    await session.delete();
  });

  it("runs handlers concurrently", async () => {
    const secondStarted = latch();
    const laptop = hostEnv({
      name: "laptop",
      tools: {
        // Returns only once the second call has started: run one at a time, this would never end.
        first: async () => (await secondStarted.promise, "first"),
        second: () => (secondStarted.resolve(), "second"),
      },
    });
    const session = await client.sessions.create({
      environments: [laptop],
      tools: [tool({ name: "first", environment: laptop }), tool({ name: "second", environment: laptop })],
    });
    const first = session.callTool("first", {});
    const second = session.callTool("second", {});
    expect(await Promise.all([first, second])).toMatchObject([{ output: "first" }, { output: "second" }]);
    await session.delete();
  });

  it("serves a run's tool call, the run submitted once the host is connected", async () => {
    provider.script(`host-run-${streaming}`, [{ toolCalls: [{ id: "c1", name: "clock", input: { zone: "UTC" } }] }, { text: "It is noon." }]);
    const laptop = hostEnv({ name: "laptop", tools: { clock: (input: { zone: string }) => ({ time: "12:00", zone: input.zone }) } });
    const { session, run } = await client.sessions.create({
      environments: [laptop],
      tools: [tool({ name: "clock", description: "Tells the time.", environment: laptop })],
      run: { message: "What time is it?", model: { provider: "anthropic", name: `host-run-${streaming}` }, providerKeys: { anthropic: "k" } },
    });

    expect(await run.result()).toMatchObject({ status: "completed", outputText: "It is noon.", toolCalls: 1 });
    const results = [];
    for await (const event of run.events()) if (event.type === "tool.result") results.push(event.data);
    expect(results).toMatchObject([{ name: "clock", outcome: "returned", output: { time: "12:00", zone: "UTC" } }]);
    await session.delete();
  });

  it("aborts the handler's signal when its run is cancelled, and answers cancelled", async () => {
    const { laptop, started, aborted } = waitingLaptop();
    provider.script(`host-cancel-${streaming}`, [{ toolCalls: [{ id: "w1", name: "wait", input: {} }] }, { text: "never" }]);
    const session = await client.sessions.create({ environments: [laptop], tools: [tool({ name: "wait", environment: laptop })] });
    const run = await session.run({ message: "Wait.", model: { provider: "anthropic", name: `host-cancel-${streaming}` }, providerKeys: { anthropic: "k" } });
    await started.promise;

    expect((await run.cancel()).status).toBe("cancelled");

    expect(await aborted.promise).toMatchObject({ name: "AbortError", message: "the service cancelled the operation" });
    expect(await waitReceipt(session)).toMatchObject({ failure: { code: "cancelled" } });
    await session.delete();
  });

  it("aborts the handler's signal when the caller withdraws its callTool, and answers cancelled", async () => {
    const { laptop, started, aborted } = waitingLaptop();
    const session = await client.sessions.create({ environments: [laptop], tools: [tool({ name: "wait", environment: laptop })] });
    const withdraw = new AbortController();
    const call = session.callTool("wait", {}, { signal: withdraw.signal }).catch((error: unknown) => ConnectError.from(error));
    await started.promise;

    withdraw.abort();

    expect(await call).toMatchObject({ code: Code.Canceled });
    expect(await aborted.promise).toMatchObject({ name: "AbortError", message: "the service cancelled the operation" });
    expect(await waitReceipt(session)).toMatchObject({ failure: { code: "cancelled" } });
    await session.delete();
  });

  it("aborts the handler's signal when its session is deleted, and stops serving", async () => {
    const started = latch();
    const aborted = latch();
    const laptop = hostEnv({
      name: "laptop",
      tools: {
        wait: (_input, { signal }) =>
          new Promise((_resolve, reject) => {
            signal.addEventListener("abort", () => (aborted.resolve(), reject(signal.reason)));
            started.resolve();
          }),
      },
    });
    const session = await client.sessions.create({ environments: [laptop], tools: [tool({ name: "wait", environment: laptop })] });
    const host = session.hosts.get("laptop")!;
    const call = session.callTool("wait", {}).catch((error: unknown) => error);
    await started.promise;

    await session.delete();

    await aborted.promise;
    expect(host.state).toBe("closed");
    await call;
  });

  it("goes connecting -> connected -> closed, and is served on demand when asked to", async () => {
    const laptop = hostEnv({ name: "laptop", tools: { echo: (input) => input } });
    const session = await client.sessions.create({ environments: [laptop], tools: [tool({ name: "echo", environment: laptop })], serveHosts: false });
    expect(session.hosts.size).toBe(0);
    expect(session.environments[0]).toMatchObject({ kind: "host", hostAttached: false });
    expect(await session.callTool("echo", "nobody home")).toMatchObject({ outcome: "failure", code: "host_unavailable" });

    const host = session.serve(laptop);
    const states = statesOf(host);
    expect(host.state).toBe("connecting");
    expect(session.serve(laptop)).toBe(host);
    await host.connected();
    expect((await session.refresh()).environments[0]).toMatchObject({ kind: "host", hostAttached: true });
    expect(await session.callTool("echo", "hello")).toMatchObject({ outcome: "returned", output: "hello" });
    await host.stop();

    expect(states).toEqual(["connected", "closed"]);
    expect(host.error).toBeUndefined();
    await expect(host.connected()).rejects.toThrow("the host of environment laptop was stopped");
    expect(await session.callTool("echo", "gone")).toMatchObject({ outcome: "failure", code: "host_unavailable" });
    await session.delete();
  });

  it("refuses to serve a definition the session does not bind as a host environment", async () => {
    const sandbox = serviceEnv({ name: "laptop" });
    const session = await client.sessions.create({ environments: [sandbox] });
    expect(() => session.serve(hostEnv({ name: "laptop" }))).toThrow(new PlacementError(`session ${session.id} has no host environment named laptop`));
    await session.delete();
  });

  it("closes when a newer host takes the environment over, which then serves it", async () => {
    const older = hostEnv({ name: "laptop", tools: { who: () => "older" } });
    const newer = hostEnv({ name: "laptop", tools: { who: () => "newer" } });
    const session = await client.sessions.create({ environments: [older], tools: [tool({ name: "who", environment: "laptop" })] });
    const first = session.hosts.get("laptop")!;

    const second = (await client.sessions.get(session.id)).serve(newer);
    await second.connected();

    await reaches(first, "closed");
    expect(first.error?.message).toMatch(/replaced by a newer connection/);
    expect(await session.callTool("who", {})).toMatchObject({ output: "newer" });
    await second.stop();
    await session.delete();
  });

  it("closes for good when the session ends, with the service's refusal as the reason", async () => {
    const laptop = hostEnv({ name: "laptop", tools: {} });
    const session = await client.sessions.create({ environments: [laptop] });
    const host = session.hosts.get("laptop")!;

    // Ended through another handle: this one's host learns it from the service.
    await (await client.sessions.get(session.id)).end();

    await reaches(host, "closed");
    expect(host.error).toBeInstanceOf(HostClosedError);
    expect((host.error as HostClosedError).code).toBe("session_ended");
    await session.delete();
  });
});

describe("placing tools in a host environment", () => {
  it("takes no implementation or an opaque one, and only the definition the session serves", async () => {
    const laptop = hostEnv({ name: "laptop", tools: { echo: (input) => input } });
    expect(tool({ name: "echo", environment: laptop }).implementation).toBeUndefined();
    expect(() => tool({ name: "echo", environment: laptop, implementation: "a".repeat(64) })).toThrow(
      new PlacementError("tool echo is placed in the host environment laptop, which takes an opaque implementation ({ opaque: <any JSON> }) or none"),
    );
    expect(() => tool({ name: "echo", environment: laptop, implementation: { opaque: 1n } })).toThrow(/an opaque implementation must be a JSON value/);
    expect(() => hostEnv({ name: "laptop", tools: { echo: "not a function" as never } })).toThrow(
      new TypeError("host environment laptop: the handler of tool echo is not a function"),
    );

    // Another definition of the same name has other handlers: which would serve the tool?
    const other = hostEnv({ name: "laptop", tools: { echo: () => "other" } });
    const client = createServiceClient(createNodeTransport({ baseUrl: service.url, apiKey: KEY_A }));
    const from = service.logs.length;
    await expect(client.sessions.create({ environments: [laptop], tools: [tool({ name: "echo", environment: other })] })).rejects.toThrow(
      new PlacementError("tool echo is placed in a definition of environment laptop that differs from the session's"),
    );
    expect(await requestLogSince(service, from)).toEqual([]);
  });
});

describe("the wait before reconnecting", () => {
  it("doubles from the initial delay up to the cap, drawn from the upper half of each step", () => {
    for (let attempt = 0; attempt < 40; attempt++) {
      const ceiling = Math.min(DEFAULT_RECONNECT.maxDelayMs, DEFAULT_RECONNECT.initialDelayMs * 2 ** attempt);
      const delay = reconnectDelay(attempt, DEFAULT_RECONNECT);
      expect(delay).toBeGreaterThanOrEqual(ceiling / 2);
      expect(delay).toBeLessThanOrEqual(ceiling);
    }
    expect(reconnectDelay(1000, DEFAULT_RECONNECT)).toBeLessThanOrEqual(DEFAULT_RECONNECT.maxDelayMs);
  });
});

describe("the form of the command stream", () => {
  it.each([
    { transport: "HTTP/1.1 (createNodeTransport's default)", options: {}, reports: true },
    { transport: "HTTP/2", options: { httpVersion: "2" as const }, reports: false },
    { transport: "gRPC", options: { protocol: "grpc" as const }, reports: false },
  ])("follows createNodeTransport over $transport: receipts as Reports only when it cannot stream a request", async ({ options, reports }) => {
    const client = createServiceClient(createNodeTransport({ baseUrl: service.url, apiKey: KEY_A, ...options }));
    const laptop = hostEnv({ name: "laptop", tools: { echo: (input) => input } });
    const session = await client.sessions.create({ environments: [laptop], tools: [tool({ name: "echo", environment: laptop })] });
    const from = service.logs.length;

    const result = await session.callTool("echo", "which way?");

    expect(result).toMatchObject({ outcome: "returned", output: "which way?" });
    await eventsUntil(session, receiptOf(result.operationId));
    expect((await proceduresSince(service, from)).includes("skillenv.env.v1.HostService/Report")).toBe(reports);
    await session.delete();
  });
});

describe("Reports on the server-streaming form", () => {
  /**
   * A client whose first Report of a tool's result fails as over a dropped connection: before the
   * service got it ("request"), or after the service took it and before its answer arrived
   * ("answer"). Every other call goes through.
   */
  function clientLosingFirstResult(lost: "request" | "answer"): ServiceClient {
    let lostOne = false;
    const loseFirstResult: Interceptor = (next) => async (request) => {
      const receipt = request.method.name === "Report" ? (request.message as ReportRequest).receipt : undefined;
      if (lostOne || receipt?.receipt.case !== "returned") return next(request);
      lostOne = true;
      if (lost === "answer") await next(request);
      throw new ConnectError("the connection was reset", Code.Unavailable);
    };
    const transport = createConnectTransport({ baseUrl: service.url, httpVersion: "1.1", interceptors: [apiKeyInterceptor(KEY_A), loseFirstResult] });
    return createServiceClient(transport, { hosts: { streaming: "server-streaming", reconnect: RECONNECT } });
  }

  it.each(["request", "answer"] as const)("delivers a tool's result whose first Report lost its %s, and records it once", async (lost) => {
    const laptop = hostEnv({ name: "laptop", tools: { echo: (input) => input } });
    const session = await clientLosingFirstResult(lost).sessions.create({ environments: [laptop], tools: [tool({ name: "echo", environment: laptop })] });
    const from = service.logs.length;

    const result = await session.callTool("echo", "still here", { timeoutMs: 20_000 });

    expect(result).toMatchObject({ outcome: "returned", output: "still here" });
    const events = await eventsUntil(session, receiptOf(result.operationId));
    expect(events.filter(receiptOf(result.operationId))).toHaveLength(1);
    // accepted, returned; and when the answer was lost, the copy sent again after a backoff,
    // which the service refuses: the operation had ended.
    if (lost === "answer") await service.logged((line) => line.includes('"skillenv.env.v1.HostService/Report"') && line.includes('"operation_not_found"'));
    const reportCodes = (await requestLogSince(service, from))
      .filter((line) => line.procedure === "skillenv.env.v1.HostService/Report")
      .map((line) => line.code);
    expect(reportCodes).toEqual(lost === "answer" ? ["ok", "ok", "operation_not_found"] : ["ok", "ok"]);
    await session.delete();
  });
});

describe.each(FORMS)("a host over the $streaming command stream, when the server restarts", ({ client: clientFor }) => {
  let root: string;
  let env: Record<string, string>;
  const services: ServiceProcess[] = [];

  beforeAll(async () => {
    root = await fs.mkdtemp(path.join(os.tmpdir(), "skillenv-client-host-restart-"));
    env = { SERVICE_LISTEN: `127.0.0.1:${await freePort()}`, SERVICE_DATA_DIR: path.join(root, "data"), SERVICE_API_KEYS: `a=${KEY_A}` };
  });
  afterAll(async () => {
    for (const running of services) running.child.kill("SIGKILL");
    await fs.rm(root, { recursive: true, force: true });
  });

  async function start(): Promise<ServiceProcess> {
    const running = await spawnService(env);
    services.push(running);
    return running;
  }

  it("reconnects once the service is back, and serves again; the dropped command is not sent again", async () => {
    const first = await start();
    const calls: unknown[] = [];
    const started = latch();
    const aborted = latch();
    const laptop = hostEnv({
      name: "laptop",
      tools: {
        echo: (input, { signal }) => {
          calls.push(input);
          if (input !== "before the restart") return input;
          started.resolve();
          return new Promise((_resolve, reject) => signal.addEventListener("abort", () => (aborted.resolve(), reject(signal.reason))));
        },
      },
    });
    const client = clientFor(first.url);
    const session = await client.sessions.create({ environments: [laptop], tools: [tool({ name: "echo", environment: laptop })] });
    const host = session.hosts.get("laptop")!;
    const states = statesOf(host);
    void session.callTool("echo", "before the restart").catch(() => undefined);
    await started.promise;

    first.child.kill("SIGKILL");
    await first.exited;
    await aborted.promise;
    await reaches(host, "connecting");
    await start();
    await host.connected();

    expect(await session.callTool("echo", "after the restart")).toMatchObject({ outcome: "returned", output: "after the restart" });
    expect(calls).toEqual(["before the restart", "after the restart"]);
    expect(states[0]).toBe("connecting");
    expect(states.at(-1)).toBe("connected");
    await session.delete();
    expect(host.state).toBe("closed");
  }, 60_000);
});
