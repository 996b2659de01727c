import { fromJson, type JsonValue } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { ConnectError, type Client } from "@connectrpc/connect";
import { ErrorInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SessionService } from "../../gen/skillenv/sessions/v1/sessions_pb.js";
import { startScriptedProvider, type ScriptedProvider } from "../../testing/scripted-provider/index.ts";
import { hostClient, inputOf, TestBrowserHost, TestHost, type HostClient } from "./helpers/hosts.ts";
import { KEY_A, KEY_B, startTestService, type TestService } from "./helpers/service.ts";
import { eventsUntil, refusedWith, runClient, runEnded, sessionClient } from "./helpers/sessions.ts";

describe("host environments", () => {
  let service: TestService;
  let provider: ScriptedProvider;
  let sessions: Client<typeof SessionService>;
  let hosts: HostClient;

  beforeAll(async () => {
    provider = await startScriptedProvider();
    service = await startTestService({ SERVICE_HOST_MAX_IN_FLIGHT: "3", SERVICE_HOST_MAX_QUEUED: "8", SERVICE_ANTHROPIC_BASE_URL: provider.anthropicBaseUrl });
    sessions = sessionClient(service.url, KEY_A);
    hosts = hostClient(service.url, KEY_A);
  });
  afterAll(async () => {
    await service?.close();
    await provider?.close();
  });

  async function hostSession(): Promise<string> {
    const { session } = await sessions.createSession({
      environments: [{ name: "laptop", kind: { case: "host", value: {} } }],
      tools: [
        { name: "greet", description: "Greets.", environment: "laptop" },
        { name: "lookup", environment: "laptop", implementation: { kind: { case: "opaque", value: fromJson(ValueSchema, { handler: "lookup-v2" }) } } },
      ],
    });
    expect(session?.state).toBe("ready");
    return session!.id;
  }

  const call = (sessionId: string, tool: string, input: object, seconds = 30n) =>
    sessions.callTool({ sessionId, tool, input: fromJson(ValueSchema, input as never), timeout: { seconds, nanos: 0 } });

  it("fails a call clearly when no host is connected, sending nothing", async () => {
    const sessionId = await hostSession();
    const { receipt } = await call(sessionId, "greet", { name: "x" });
    expect(receipt?.outcome).toMatchObject({ case: "failure", value: { code: "host_unavailable", retryable: true } });
  });

  it("shows in the session whether a host is attached to each host environment", async () => {
    const sessionId = await hostSession();
    const attached = async () => {
      const { session } = await sessions.getSession({ sessionId });
      const kind = session!.environments[0]!.kind;
      return kind.case === "host" ? kind.value.attached : undefined;
    };
    expect(await attached()).toBe(false);
    const host = new TestHost(hosts, sessionId, "laptop");
    await host.attached();
    expect(await attached()).toBe(true);
    host.close();
    // The server learns of it when the stream ends; only the test's timeout bounds the wait.
    await expect.poll(attached, { timeout: 25_000 }).toBe(false);
  });

  it("sends each command once, after journaling it, and returns the host's receipts", async () => {
    const sessionId = await hostSession();
    const host = new TestHost(hosts, sessionId, "laptop");
    await host.attached();
    const calling = call(sessionId, "lookup", { key: "k1" });
    const command = await host.command("lookup");
    expect(inputOf(command)).toEqual({ key: "k1" });
    expect(command.sessionId).toBe(sessionId);
    expect(command.implementation).toBeDefined();
    expect(Number(command.deadline!.seconds) * 1000).toBeGreaterThan(Date.now());
    // Already journaled when it reached the host, at the seq the command names.
    const journaled = await eventsUntil(sessions, sessionId, (event) => event.type === "operation.sent" && event.data?.operationId === command.operationId);
    expect(journaled.at(-1)?.seq).toBe(command.seq);

    host.accepted(command.operationId);
    host.progress(command.operationId, "half way");
    host.returned(command.operationId, { value: 42 });
    const { receipt } = await calling;
    expect(receipt?.outcome).toMatchObject({ case: "returned" });
    const events = await eventsUntil(sessions, sessionId, (event) => event.type === "operation.receipt" && event.data?.operationId === command.operationId);
    expect(events.map((event) => event.type).slice(-3)).toEqual(["operation.accepted", "operation.progress", "operation.receipt"]);
    expect(host.commands).toHaveLength(1);
    host.close();
  });

  it("serves a host over gRPC the same way", async () => {
    const sessionId = await hostSession();
    const host = new TestHost(hostClient(service.url, KEY_A, "grpc"), sessionId, "laptop");
    await host.attached();
    const calling = call(sessionId, "greet", { over: "grpc" });
    const command = await host.command("greet");
    host.returned(command.operationId, { ok: true });
    expect((await calling).receipt?.outcome.case).toBe("returned");
    host.close();
  });

  it("ends every command in flight unknown when the stream drops, and never sends them again", async () => {
    const sessionId = await hostSession();
    const first = new TestHost(hosts, sessionId, "laptop");
    await first.attached();
    const calls = [call(sessionId, "greet", { n: 1 }), call(sessionId, "greet", { n: 2 })];
    await first.command("greet", 1);
    first.drop();
    for (const { receipt } of await Promise.all(calls)) expect(receipt?.outcome.case).toBe("unknown");

    const again = new TestHost(hosts, sessionId, "laptop");
    await again.attached();
    const fresh = call(sessionId, "greet", { n: 3 });
    const command = await again.command("greet");
    expect(inputOf(command)).toEqual({ n: 3 });
    again.returned(command.operationId, "hi");
    expect((await fresh).receipt?.outcome.case).toBe("returned");
    expect(again.commands).toHaveLength(1);
    again.close();
  });

  it("replaces an attached host with a newer one; the older one's commands end unknown", async () => {
    const sessionId = await hostSession();
    const older = new TestHost(hosts, sessionId, "laptop");
    await older.attached();
    const pending = call(sessionId, "greet", {});
    await older.command("greet");
    const newer = new TestHost(hosts, sessionId, "laptop");
    await newer.attached();
    expect((await pending).receipt?.outcome.case).toBe("unknown");
    expect(await older.closing()).toMatch(/replaced/);
    const next = call(sessionId, "greet", {});
    newer.returned((await newer.command("greet")).operationId, "from newer");
    expect((await next).receipt?.outcome.case).toBe("returned");
    newer.close();
  });

  it("refuses and logs receipts for operations that are unknown or not this connection's", async () => {
    const sessionId = await hostSession();
    const host = new TestHost(hosts, sessionId, "laptop");
    await host.attached();
    host.returned("op_made_up", "nope");
    const refused = await host.next((message) => (message.message.case === "refused" ? message.message.value : undefined));
    expect(refused.operationId).toBe("op_made_up");
    expect(service.logs.some((line) => line.includes("host.receipt_refused") && line.includes("op_made_up"))).toBe(true);

    const other = await hostSession();
    const foreign = new TestHost(hosts, other, "laptop");
    await foreign.attached();
    const pending = call(sessionId, "greet", {});
    const command = await host.command("greet");
    foreign.returned(command.operationId, "stolen");
    await foreign.next((message) => (message.message.case === "refused" && message.message.value.operationId === command.operationId ? true : undefined));
    host.returned(command.operationId, "mine");
    expect((await pending).receipt?.outcome).toMatchObject({ case: "returned" });
    host.close();
    foreign.close();
  });

  it("keeps no output nested deeper than SERVICE_JOURNAL_MAX_JSON_DEPTH, so the session's events stay readable", async () => {
    const sessionId = await hostSession();
    const host = new TestHost(hosts, sessionId, "laptop");
    await host.attached();
    // 47 levels pass every decoder on the way in, but an event carrying them could not be read.
    const calling = call(sessionId, "greet", {});
    host.returned((await host.command("greet")).operationId, nested(47));
    const { receipt } = await calling;
    expect(receipt?.outcome).toMatchObject({ case: "failure", value: { code: "output_too_deep", details: { depth: "47", maxDepth: "32" } } });
    const events = await eventsUntil(sessions, sessionId, (event) => event.type === "operation.receipt" && event.data?.kind === "execute");
    expect(events.at(-1)?.data).toMatchObject({ receipt: { failure: { code: "output_too_deep" } } });
    host.close();
  });

  it("bounds what refused receipts add to the log: ids cut, lines bounded, repeated refusals counted", async () => {
    const flooded = await startTestService({ SERVICE_LOG_MAX_LINE_BYTES: "600", SERVICE_LOG_HOST_REFUSALS_PER_MIN: "5" });
    try {
      const client = sessionClient(flooded.url, KEY_A);
      const { session } = await client.createSession({
        environments: [{ name: "laptop", kind: { case: "host", value: {} } }],
        tools: [{ name: "greet", environment: "laptop" }],
      });
      const host = new TestHost(hostClient(flooded.url, KEY_A), session!.id, "laptop");
      await host.attached();
      const startedAt = Date.now();
      const receipts = 300;
      for (let i = 0; i < receipts; i++) host.returned(`op_${i}_${"x".repeat(20_000)}`, null);
      const refused = await host.next(() => {
        const all = host.messages.filter((each) => each.message.case === "refused");
        return all.length === receipts ? all.map((each) => each.message.value as { operationId: string }) : undefined;
      }, `${receipts} refusals`);
      const elapsedMinutes = (Date.now() - startedAt) / 60_000;
      // What the host sent is repeated no longer than an operation id of the service.
      for (const { operationId } of refused) expect(operationId.length).toBeLessThanOrEqual(30);
      const lines = flooded.logs.filter((line) => line.includes("host.receipt_refused"));
      // A burst of 5, and 5 more a minute, however many the host sends.
      expect(lines.length).toBeGreaterThanOrEqual(5);
      expect(lines.length).toBeLessThanOrEqual(5 + Math.ceil(elapsedMinutes * 5));
      for (const line of lines) expect(JSON.parse(line)).toMatchObject({ event: "host.receipt_refused", operationId: expect.stringMatching(/^op_\d+_x+…$/) });

      // A request line whose path a caller made long is cut to the bound too, and keeps its code.
      const longPath = `/v1/sessions/ses_${"y".repeat(8000)}`;
      expect((await fetch(flooded.url + longPath, { headers: { authorization: `Bearer ${KEY_A}` } })).status).toBe(404);
      const logged = await flooded.logged((line) => line.includes("ses_yyyy"));
      expect(JSON.parse(logged)).toMatchObject({
        code: "session_not_found",
        httpStatus: 404,
        path: expect.stringMatching(/^\/v1\/sessions\/ses_y+…\(\d+ more\)$/),
      });
      for (const line of flooded.logs) expect(Buffer.byteLength(line)).toBeLessThanOrEqual(600);
      host.close();
    } finally {
      await flooded.close();
    }
  });

  it("enforces the deadline on the server: timeout, and a cancel to the host", async () => {
    const sessionId = await hostSession();
    const host = new TestHost(hosts, sessionId, "laptop");
    await host.attached();
    const { receipt } = await call(sessionId, "greet", {}, 1n);
    expect(receipt?.outcome).toMatchObject({ case: "failure", value: { code: "timeout" } });
    const command = await host.command("greet");
    await host.cancelled(command.operationId);
    host.returned(command.operationId, "too late");
    await host.next((message) => (message.message.case === "refused" && message.message.value.operationId === command.operationId ? true : undefined));
    host.close();
  });

  it("caps the commands in flight per host, and closes a host that does not read", async () => {
    const sessionId = await hostSession();
    const host = new TestHost(hosts, sessionId, "laptop");
    await host.attached();
    const calls = [1, 2, 3].map((n) => call(sessionId, "greet", { n }));
    await host.command("greet", 2);
    const { receipt } = await call(sessionId, "greet", { n: 4 });
    expect(receipt?.outcome).toMatchObject({ case: "failure", value: { code: "host_busy", retryable: true } });
    for (const command of host.commands) host.returned(command.operationId, "ok");
    await Promise.all(calls);
    host.close();

    const stuck = new TestHost(hosts, sessionId, "laptop");
    await stuck.attached();
    stuck.stopReading();
    const inFlight = call(sessionId, "greet", {});
    // Receipts nobody asked for make the server answer "refused" on a stream the host does not read.
    for (let i = 0; i < 5000; i++) stuck.returned(`op_bogus_${i}`, null);
    expect((await inFlight).receipt?.outcome.case).toBe("unknown");
    const after = await call(sessionId, "greet", {});
    expect(after.receipt?.outcome).toMatchObject({ case: "failure", value: { code: "host_unavailable" } });
    stuck.drop();
  });

  it("serves browsers through Commands and Report, with the same semantics", async () => {
    const sessionId = await hostSession();
    const abort = new AbortController();
    const stream = hosts.commands({ attach: { sessionId, environment: "laptop" } }, { signal: abort.signal })[Symbol.asyncIterator]();
    const attached = (await stream.next()).value!.message!.message;
    expect(attached.case).toBe("attached");
    const connectionId = (attached.value as { connectionId: string }).connectionId;
    const calling = call(sessionId, "greet", { via: "browser" });
    const command = (await stream.next()).value!.message!.message;
    expect(command.case).toBe("command");
    const operationId = (command.value as { operationId: string }).operationId;
    await hosts.report({ connectionId, receipt: { operationId, receipt: { case: "returned", value: { output: fromJson(ValueSchema, "from the tab") } } } });
    expect((await calling).receipt?.outcome).toMatchObject({ case: "returned" });
    expect(await refusedWith(hosts.report({ connectionId, receipt: { operationId, receipt: { case: "returned", value: {} } } }))).toBe("operation_not_found");
    expect(
      await refusedWith(hostClient(service.url, KEY_B).report({ connectionId, receipt: { operationId: "x", receipt: { case: "accepted", value: {} } } })),
    ).toBe("host_connection_not_found");

    const dropped = call(sessionId, "greet", { via: "browser" });
    await stream.next();
    abort.abort();
    expect((await dropped).receipt?.outcome.case).toBe("unknown");
  });

  it("enforces the deadline on a browser host too: timeout, a cancel on Commands, and its late Report refused", async () => {
    const sessionId = await hostSession();
    const tab = new TestBrowserHost(hosts, sessionId, "laptop");
    await tab.attached();
    const { receipt } = await call(sessionId, "greet", {}, 1n);
    expect(receipt?.outcome).toMatchObject({ case: "failure", value: { code: "timeout" } });
    const command = await tab.command("greet");
    await tab.cancelled(command.operationId);
    expect(await refusedWith(tab.returned(command.operationId, "too late"))).toBe("operation_not_found");
    tab.drop();
  });

  it("caps the commands in flight of a browser host too", async () => {
    const sessionId = await hostSession();
    const tab = new TestBrowserHost(hosts, sessionId, "laptop");
    await tab.attached();
    const calls = [1, 2, 3].map((n) => call(sessionId, "greet", { n }));
    await tab.command("greet", 2);
    const { receipt } = await call(sessionId, "greet", { n: 4 });
    expect(receipt?.outcome).toMatchObject({ case: "failure", value: { code: "host_busy", retryable: true } });
    expect(tab.commands).toHaveLength(3);
    for (const command of tab.commands) await tab.returned(command.operationId, "ok");
    for (const { receipt } of await Promise.all(calls)) expect(receipt?.outcome.case).toBe("returned");
    tab.drop();
  });

  it("replaces a browser host with a newer one; the older one's commands end unknown and its Reports are refused", async () => {
    const sessionId = await hostSession();
    const older = new TestBrowserHost(hosts, sessionId, "laptop");
    await older.attached();
    const pending = call(sessionId, "greet", {});
    const command = await older.command("greet");
    const newer = new TestBrowserHost(hosts, sessionId, "laptop");
    await newer.attached();
    expect((await pending).receipt?.outcome.case).toBe("unknown");
    expect(await older.closing()).toMatch(/replaced/);
    expect(await refusedWith(older.returned(command.operationId, "from older"))).toBe("host_connection_not_found");
    const next = call(sessionId, "greet", {});
    await newer.returned((await newer.command("greet")).operationId, "from newer");
    expect((await next).receipt?.outcome).toMatchObject({ case: "returned" });
    expect(older.commands).toHaveLength(1);
    newer.drop();
  });

  it("lets only the session's workspace attach, and only to a host environment", async () => {
    const sessionId = await hostSession();
    const stranger = new TestHost(hostClient(service.url, KEY_B), sessionId, "laptop");
    expect(codeOf(await stranger.done)).toBe("session_not_found");
    const wrongName = new TestHost(hosts, sessionId, "nowhere");
    expect(codeOf(await wrongName.done)).toBe("environment_not_found");
  });

  it("serves a run's model calls of host tools", async () => {
    const sessionId = await hostSession();
    const host = new TestHost(hosts, sessionId, "laptop");
    await host.attached();
    provider.script("host-model", [{ toolCalls: [{ id: "t1", name: "greet", input: { name: "Ada" } }] }, { text: "greeted" }]);
    const { run } = await runClient(service.url, KEY_A).createRun({
      sessionId,
      run: { model: { provider: "anthropic", name: "host-model", maxTokens: 0 }, message: "greet Ada", providerKeys: { anthropic: "k" } } as never,
    });
    const command = await host.command("greet");
    host.returned(command.operationId, { greeting: "Hello, Ada" });
    const events = await eventsUntil(sessions, sessionId, runEnded(run!.id));
    expect(events.at(-1)?.type).toBe("turn.completed");
    expect(JSON.stringify((provider.requests.at(-1)!.body as { messages: unknown[] }).messages.at(-1))).toContain("Hello, Ada");
    host.close();
  });
});

/** `depth` arrays around 0. */
function nested(depth: number): JsonValue {
  let value: JsonValue = 0;
  for (let i = 0; i < depth; i++) value = [value];
  return value;
}

/** The stable code of the error a stream ended with. */
function codeOf(error: unknown): string | undefined {
  return ConnectError.from(error).findDetails(ErrorInfoSchema)[0]?.reason;
}
