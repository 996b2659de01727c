import { fromJson, toJson, toJsonString } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import type { Client } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createNodeTransport, createServiceClient, mcpEnv } from "@skillenv/client/node";
import { RunSchema } from "../../gen/skillenv/sessions/v1/runs_pb.js";
import { SessionSchema, type SessionEvent, type SessionService } from "../../gen/skillenv/sessions/v1/sessions_pb.js";
import { startScriptedProvider, type ScriptedProvider } from "../../testing/scripted-provider/index.ts";
import { startEverything, startRecordingProxy, type EverythingServer, type RecordingProxy } from "./helpers/mcp.ts";
import { KEY_A, startTestService, type TestService } from "./helpers/service.ts";
import { eventsUntil, filesContaining, refusedWith, runClient, runEnded, sessionClient } from "./helpers/sessions.ts";

const CREDENTIAL = "mcp-credential-9f3e21-do-not-leak";
const LONG = "trigger-long-running-operation";

describe("MCP environments (server-everything over Streamable HTTP)", () => {
  let everything: EverythingServer;
  let proxy: RecordingProxy;
  /** A second server, killed by one test. */
  let doomed: EverythingServer;
  let provider: ScriptedProvider;
  let service: TestService;
  let sessions: Client<typeof SessionService>;

  beforeAll(async () => {
    [everything, doomed, provider] = await Promise.all([startEverything(), startEverything(), startScriptedProvider()]);
    proxy = await startRecordingProxy(everything);
    service = await startTestService({
      SERVICE_MCP_ALLOW: `${proxy.origin},${doomed.origin}`,
      SERVICE_ANTHROPIC_BASE_URL: provider.anthropicBaseUrl,
      SERVICE_OPENAI_BASE_URL: provider.openaiBaseUrl,
      SERVICE_OPENAI_API: "responses",
    });
    sessions = sessionClient(service.url, KEY_A);
  });
  afterAll(async () => {
    await service?.close();
    await proxy?.close();
    await Promise.all([everything?.kill(), doomed?.kill(), provider?.close()]);
  });

  async function mcpSession(options: { url?: string; tools?: string[]; name?: string } = {}): Promise<string> {
    const { session } = await sessions.createSession({
      environments: [
        { name: options.name ?? "ev", kind: { case: "mcp", value: { url: options.url ?? proxy.url, credential: CREDENTIAL, tools: options.tools ?? [] } } },
      ],
    });
    return session!.id;
  }

  const call = (sessionId: string, tool: string, input: object = {}, seconds = 60n) =>
    sessions.callTool({ sessionId, tool, input: fromJson(ValueSchema, input as never), timeout: { seconds, nanos: 0 } });

  const outputOf = (receipt: Awaited<ReturnType<typeof call>>["receipt"]) =>
    receipt?.outcome.case === "returned" ? toJson(ValueSchema, receipt.outcome.value.output!) : receipt?.outcome;

  it("mounts the server: setup lists its tools, each placed as <environment>__<tool> with its input schema", async () => {
    const sessionId = await mcpSession();
    const { session } = await sessions.getSession({ sessionId });
    expect(session?.state).toBe("ready");
    const names = session!.tools.map((tool) => tool.name);
    expect(names).toEqual(expect.arrayContaining(["ev__echo", "ev__get-sum", `ev__${LONG}`]));
    const sum = session!.tools.find((tool) => tool.name === "ev__get-sum")!;
    expect(sum.environment).toBe("ev");
    expect(sum.description).toBe("Returns the sum of two numbers");
    expect(sum.implementation?.kind).toEqual({ case: "mcpTool", value: "get-sum" });
    expect(sum.inputSchema).toMatchObject({ type: "object", properties: { a: { type: "number" }, b: { type: "number" } }, required: ["a", "b"] });
    const ready = (await eventsUntil(sessions, sessionId, (event) => event.type === "environment.ready")).at(-1)!;
    expect(ready.data?.tools).toEqual(names);
    // Every request carried the credential as a bearer token; tools/list was answered.
    expect(proxy.seen.some((request) => request.message?.method === "tools/list")).toBe(true);
    expect(proxy.seen.every((request) => request.authorization === `Bearer ${CREDENTIAL}`)).toBe(true);
  });

  it("narrows the tools to those named, and fails the setup when the server lacks one", async () => {
    const narrowed = await mcpSession({ tools: ["echo", "get-sum"] });
    expect((await sessions.getSession({ sessionId: narrowed })).session!.tools.map((tool) => tool.name)).toEqual(["ev__echo", "ev__get-sum"]);

    const missing = await mcpSession({ tools: ["echo", "no-such-tool"] });
    const { session } = await sessions.getSession({ sessionId: missing });
    expect(session?.state).toBe("failed");
    expect(session?.tools).toEqual([]);
    const receipt = (await eventsUntil(sessions, missing, (event) => event.type === "environment.failed")).find(
      (event) => event.type === "operation.receipt" && event.data?.kind === "setup",
    );
    expect(receipt?.data?.receipt).toMatchObject({ failure: { code: "mcp_tool_not_offered", message: expect.stringContaining("no-such-tool") } });
  });

  it("calls echo and get-sum through CallTool, each tools/call journaled and sent once", async () => {
    const sessionId = await mcpSession();
    const echoed = await call(sessionId, "ev__echo", { message: "hello mcp" });
    expect(outputOf(echoed.receipt)).toEqual({ content: "Echo: hello mcp" });
    const summed = await call(sessionId, "ev__get-sum", { a: 2, b: 40 });
    expect(outputOf(summed.receipt)).toEqual({ content: "The sum of 2 and 40 is 42." });
    const sent = proxy.seen.filter((request) => request.message?.method === "tools/call" && request.message.params?.name === "get-sum");
    expect(sent.at(-1)?.message?.params?.arguments).toEqual({ a: 2, b: 40 });
    const events = await eventsUntil(sessions, sessionId, (event) => event.type === "operation.receipt" && event.data?.operationId === summed.operationId);
    expect(events.filter((event) => event.data?.operationId === summed.operationId).map((event) => event.type)).toEqual([
      "operation.sent",
      "operation.receipt",
    ]);
  });

  it("ends a result with isError as a failure carrying its content, and describes non-text content", async () => {
    const sessionId = await mcpSession();
    const invalid = await call(sessionId, "ev__get-sum", { a: "two", b: 2 });
    expect(invalid.receipt?.outcome).toMatchObject({ case: "failure", value: { code: "mcp_tool_error", message: expect.stringContaining("a") } });
    const image = await call(sessionId, "ev__get-tiny-image");
    const { content, images } = outputOf(image.receipt) as { content: string; images: unknown };
    expect(content).toMatch(/\[image: image\/png, \d+ bytes, attached\]/);
    expect(images).toEqual([{ mimeType: "image/png", data: expect.stringMatching(/^[A-Za-z0-9+/]+=*$/) }]);
  });

  it("turns the long-running tool's progress notifications into progress events", async () => {
    const sessionId = await mcpSession({ tools: [LONG] });
    const { receipt, operationId } = await call(sessionId, `ev__${LONG}`, { duration: 0.3, steps: 3 });
    expect(outputOf(receipt)).toEqual({ content: expect.stringContaining("Long running operation completed") });
    const events = await eventsUntil(sessions, sessionId, (event) => event.type === "operation.receipt" && event.data?.operationId === operationId);
    const progress = events.filter((event) => event.type === "operation.progress" && event.data?.operationId === operationId);
    // The last notification comes just before the result, often in the same read: the SDK then
    // handles the result first and drops that notification as one for a request that has ended.
    const numbers = progress.map((event) => JSON.parse(event.data?.data as string));
    expect(numbers.slice(0, 2)).toEqual([
      { progress: 1, total: 3 },
      { progress: 2, total: 3 },
    ]);
    expect(numbers.slice(2)).toEqual(numbers.length === 3 ? [{ progress: 3, total: 3 }] : []);
  });

  it("lets a run call the server's tools, and sends notifications/cancelled when the run is cancelled", async () => {
    const client = createServiceClient(createNodeTransport({ baseUrl: service.url, apiKey: KEY_A }));
    const session = await client.sessions.create({ environments: [mcpEnv({ name: "ev", url: proxy.url, credential: CREDENTIAL })] });
    expect(session.record.tools.map((tool) => tool.name)).toEqual(expect.arrayContaining(["ev__echo", "ev__get-sum"]));
    const sessionId = session.id;
    const runs = runClient(service.url, KEY_A);
    const runInput = (model: string) =>
      ({ model: { provider: "anthropic", name: model, maxTokens: 0 }, message: "go", providerKeys: { anthropic: "k" } }) as never;

    provider.script("mcp-model", [
      {
        toolCalls: [
          { id: "e1", name: "ev__echo", input: { message: "from the model" } },
          { id: "s1", name: "ev__get-sum", input: { a: 20, b: 22 } },
        ],
      },
      { text: "done" },
    ]);
    const first = provider.requests.length;
    const { run } = await runs.createRun({ sessionId, run: runInput("mcp-model") });
    expect((await eventsUntil(sessions, sessionId, runEnded(run!.id))).at(-1)?.type).toBe("turn.completed");
    // The model was offered the server's tools under their placement names, with the server's input schemas.
    const offered = (provider.requests[first]?.body.tools ?? []) as Array<{ name: string; input_schema: unknown }>;
    expect(offered.find((tool) => tool.name === "ev__get-sum")?.input_schema).toMatchObject({
      type: "object",
      properties: { a: { type: "number" }, b: { type: "number" } },
      required: ["a", "b"],
    });
    const toolResults = JSON.stringify(provider.requests.slice(first).at(-1)?.body);
    expect(toolResults).toContain("Echo: from the model");
    expect(toolResults).toContain("The sum of 20 and 22 is 42.");

    provider.script("mcp-slow-model", [{ toolCalls: [{ id: "l1", name: `ev__${LONG}`, input: { duration: 60, steps: 60 } }] }, { text: "never" }]);
    const { run: slow } = await runs.createRun({ sessionId, run: runInput("mcp-slow-model") });
    // Synchronised on the call's first progress: the server is running it.
    const progressed = await eventsUntil(sessions, sessionId, (event) => event.type === "operation.progress" && event.data?.runId === slow!.id);
    const execute = progressed.findLast((event) => event.type === "operation.sent" && event.data?.kind === "execute")!;
    const cancelled = await runs.cancelRun({ sessionId, runId: slow!.id });
    expect(cancelled.run?.status).toBe("cancelled");
    const stopped = await eventsUntil(
      sessions,
      sessionId,
      (event) => event.type === "operation.receipt" && event.data?.operationId === execute.data?.operationId,
    );
    expect(stopped.at(-1)?.data?.receipt).toMatchObject({ failure: { code: "cancelled" } });
    const cancelOperation = stopped.find((event) => event.type === "operation.sent" && event.data?.kind === "cancel")!;
    expect(cancelOperation.data?.targetOperationId).toBe(execute.data?.operationId);
    const cancelReceipt = await eventsUntil(
      sessions,
      sessionId,
      (event) => event.type === "operation.receipt" && event.data?.operationId === cancelOperation.data?.operationId,
    );
    expect(cancelReceipt.at(-1)?.data?.receipt).toMatchObject({ returned: { output: { sent: true } } });
    // The server received the protocol's cancellation of that very tools/call.
    const toolsCall = proxy.seen.findLast((request) => request.message?.method === "tools/call" && request.message.params?.name === LONG)!;
    const notification = await proxy.whenSeen((request) => request.message?.method === "notifications/cancelled");
    expect(notification.message?.params?.requestId).toBe(toolsCall.message?.id);
    const { run: record } = await runs.getRun({ sessionId, runId: slow!.id });
    expect(toJsonString(RunSchema, record!)).not.toContain(CREDENTIAL);
    await session.delete();
  });

  it("shows a run's model the server's images in the provider's form: Anthropic's image blocks, the Responses API's input_image", async () => {
    const sessionId = await mcpSession({ tools: ["get-tiny-image"] });
    const runs = runClient(service.url, KEY_A);
    provider.script("mcp-image-model", [{ toolCalls: [{ id: "i1", name: "ev__get-tiny-image", input: {} }] }, { text: "a tiny image" }]);
    const first = provider.requests.length;
    const { run } = await runs.createRun({
      sessionId,
      run: { model: { provider: "anthropic", name: "mcp-image-model", maxTokens: 0 }, message: "show me", providerKeys: { anthropic: "k" } } as never,
    });
    expect((await eventsUntil(sessions, sessionId, runEnded(run!.id))).at(-1)?.type).toBe("turn.completed");
    const messages = provider.requests.slice(first).at(-1)?.body.messages as Array<{ role: string; content: unknown }>;
    const [result] = messages.at(-1)!.content as Array<{ type: string; content: Array<Record<string, unknown>> }>;
    expect(result?.type).toBe("tool_result");
    // The text without the image's data, then the image as Anthropic takes it.
    expect(result?.content[0]).toEqual({ type: "text", text: expect.stringMatching(/^\{"content":".*\[image: image\/png, \d+ bytes, attached\]/) });
    expect(String(result?.content[0]?.text)).not.toContain('"images"');
    expect(result?.content[1]).toEqual({
      type: "image",
      source: { type: "base64", media_type: "image/png", data: expect.stringMatching(/^[A-Za-z0-9+/]+=*$/) },
    });

    // The OpenAI Responses API takes them too: the function call's output is its text and an input_image.
    provider.script("mcp-image-openai", [{ toolCalls: [{ id: "i2", name: "ev__get-tiny-image", input: {} }] }, { text: "a tiny image" }]);
    const before = provider.requests.length;
    const { run: openai } = await runs.createRun({
      sessionId,
      run: { model: { provider: "openai", name: "mcp-image-openai", maxTokens: 0 }, message: "show me", providerKeys: { openai: "k" } } as never,
    });
    expect((await eventsUntil(sessions, sessionId, runEnded(openai!.id))).at(-1)?.type).toBe("turn.completed");
    const input = provider.requests.slice(before).at(-1)?.body.input as Array<Record<string, unknown>>;
    const output = input.find((item) => item.type === "function_call_output")?.output as Array<Record<string, unknown>>;
    expect(output[0]).toEqual({ type: "input_text", text: expect.stringContaining("attached") });
    expect(output[1]).toEqual({ type: "input_image", image_url: expect.stringMatching(/^data:image\/png;base64,[A-Za-z0-9+/]+=*$/) });
  });

  it("with approval always, holds a run's call of the server's tools until a person approves it (docs/runs.md, Approvals)", async () => {
    const client = createServiceClient(createNodeTransport({ baseUrl: service.url, apiKey: KEY_A }));
    const session = await client.sessions.create({
      environments: [mcpEnv({ name: "gated", url: proxy.url, credential: CREDENTIAL, tools: ["get-sum"], approval: "always" })],
    });
    expect(session.record.tools.map((tool) => [tool.name, tool.approval])).toEqual([["gated__get-sum", "always"]]);
    provider.script("mcp-approval-model", [{ toolCalls: [{ id: "g1", name: "gated__get-sum", input: { a: 1, b: 2 } }] }, { text: "done" }]);
    const run = await session.run({ message: "add", model: { provider: "anthropic", name: "mcp-approval-model" }, providerKeys: { anthropic: "k" } });
    const sentBefore = () =>
      proxy.seen.filter((request) => request.message?.method === "tools/call" && (request.message.params?.arguments as { a?: number } | undefined)?.a === 1)
        .length;
    for await (const approval of run.pendingApprovals()) {
      expect(approval).toMatchObject({ tool: "gated__get-sum", input: { a: 1, b: 2 } });
      // Nothing reached the server while the call waited.
      expect(sentBefore()).toBe(0);
      await run.approve(approval, { label: "mcp-test" });
    }
    expect((await run.result()).status).toBe("completed");
    expect(sentBefore()).toBe(1);
    const results = (await eventsUntil(sessions, session.id, runEnded(run.id))).filter((event) => event.type === "tool.result");
    expect(results.map((event) => event.data?.output)).toEqual([{ content: "The sum of 1 and 2 is 3." }]);
    expect(
      await refusedWith(
        sessions.createSession({
          environments: [{ name: "bad", kind: { case: "mcp", value: { url: proxy.url, tools: [], credential: "", approval: "maybe" } } }],
        }),
      ),
    ).toBe("invalid_argument");
  });

  it("ends a call past its deadline as timeout, having sent notifications/cancelled for it", async () => {
    const sessionId = await mcpSession({ tools: [LONG] });
    const { receipt } = await call(sessionId, `ev__${LONG}`, { duration: 60, steps: 60, marker: "deadline" }, 1n);
    expect(receipt?.outcome).toMatchObject({ case: "failure", value: { code: "timeout", message: expect.stringContaining("notifications/cancelled") } });
    const sent = proxy.seen.find(
      (request) => request.message?.method === "tools/call" && (request.message.params?.arguments as { marker?: string })?.marker === "deadline",
    )!;
    const notification = await proxy.whenSeen(
      (request) => request.message?.method === "notifications/cancelled" && request.message.params?.requestId === sent.message?.id,
    );
    expect(notification.authorization).toBe(`Bearer ${CREDENTIAL}`);
  });

  it("sets a manual environment up on SetupEnvironment, and only then places its tools", async () => {
    const { session } = await sessions.createSession({
      environments: [{ name: "later", setup: "manual", kind: { case: "mcp", value: { url: proxy.url, tools: ["echo"] } } }],
    });
    expect(session?.tools).toEqual([]);
    expect(await refusedWith(call(session!.id, "later__echo", { message: "too soon" }))).toBe("tool_not_found");
    const setup = await sessions.setupEnvironment({ sessionId: session!.id, environment: "later" });
    expect(setup.environment?.state).toBe("ready");
    const echoed = await call(session!.id, "later__echo", { message: "now" });
    expect(outputOf(echoed.receipt)).toEqual({ content: "Echo: now" });
  });

  it("ends a call as unknown when the server dies while running it", async () => {
    const sessionId = await mcpSession({ url: doomed.url, tools: [LONG] });
    const pending = call(sessionId, `ev__${LONG}`, { duration: 60, steps: 60 });
    await eventsUntil(sessions, sessionId, (event) => event.type === "operation.progress");
    await doomed.kill();
    const { receipt } = await pending;
    expect(receipt?.outcome).toMatchObject({ case: "unknown", value: { message: expect.stringContaining("lost") } });
    // Nothing was sent again: the next call finds no server, and says the call was not sent.
    const next = await call(sessionId, `ev__${LONG}`, { duration: 1, steps: 1 });
    expect(next.receipt?.outcome).toMatchObject({ case: "failure", value: { code: "mcp_unavailable", retryable: true } });
  });

  it("keeps the placements across a restart, and the first call after it starts a new MCP session", async () => {
    const settings = { SERVICE_MCP_ALLOW: proxy.origin };
    const first = await startTestService(settings);
    const before = sessionClient(first.url, KEY_A);
    const { session } = await before.createSession({ environments: [{ name: "ev", kind: { case: "mcp", value: { url: proxy.url, tools: ["echo"] } } }] });
    await first.close();
    const initializes = proxy.seen.filter((request) => request.message?.method === "initialize").length;
    const second = await startTestService({ ...settings, SERVICE_DATA_DIR: first.dataDir });
    try {
      const after = sessionClient(second.url, KEY_A);
      const { session: restarted } = await after.getSession({ sessionId: session!.id });
      expect(restarted?.tools.map((tool) => [tool.name, tool.implementation?.kind.value])).toEqual([["ev__echo", "echo"]]);
      const { receipt } = await after.callTool({ sessionId: session!.id, tool: "ev__echo", input: fromJson(ValueSchema, { message: "again" }) });
      expect(outputOf(receipt)).toEqual({ content: "Echo: again" });
      expect(proxy.seen.filter((request) => request.message?.method === "initialize").length).toBe(initializes + 1);
    } finally {
      await second.close();
    }
  });

  it("lets go of a session's MCP session when the session leaves memory, and its next call starts a new one", async () => {
    // SERVICE_SESSION_CACHE_MIB=0: a session no request uses leaves memory at once. A proxy of
    // its own, whose open streams are this service's alone.
    const own = await startRecordingProxy(everything);
    const lean = await startTestService({ SERVICE_MCP_ALLOW: own.origin, SERVICE_SESSION_CACHE_MIB: "0" });
    try {
      const client = sessionClient(lean.url, KEY_A);
      const initializes = () => own.seen.filter((request) => request.message?.method === "initialize").length;
      const { session } = await client.createSession({ environments: [{ name: "ev", kind: { case: "mcp", value: { url: own.url, tools: ["echo"] } } }] });
      const created = initializes();
      for (const message of ["one", "two"]) {
        const { receipt } = await client.callTool({ sessionId: session!.id, tool: "ev__echo", input: fromJson(ValueSchema, { message }) });
        expect(outputOf(receipt)).toEqual({ content: `Echo: ${message}` });
      }
      expect(initializes()).toBe(created + 2);
      // Each MCP session opened its event stream (GET); each was closed as its session left memory.
      expect(own.seen.filter((request) => request.method === "GET").length).toBeGreaterThanOrEqual(3);
      for (const until = Date.now() + 10_000; own.open("GET") > 0; ) {
        if (Date.now() > until) throw new Error(`${own.open("GET")} event streams of MCP sessions left open`);
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    } finally {
      await lean.close();
      await own.close();
    }
  });

  it("fails an environment whose tools would pass the session's limits, and places none of them", async () => {
    const small = await startTestService({ SERVICE_MCP_ALLOW: proxy.origin, SERVICE_SESSION_MAX_BYTES: "4000" });
    try {
      const client = sessionClient(small.url, KEY_A);
      const create = (tools: string[]) => client.createSession({ environments: [{ name: "ev", kind: { case: "mcp", value: { url: proxy.url, tools } } }] });
      const { session } = await create([]);
      expect(session?.state).toBe("failed");
      expect(session?.tools).toEqual([]);
      const failed = (await eventsUntil(client, session!.id, (event) => event.type === "environment.failed")).at(-1);
      expect(failed?.data?.error).toMatchObject({ code: "field_too_large", message: expect.stringContaining("SERVICE_SESSION_MAX_BYTES") });
      const { session: narrowed } = await create(["echo"]);
      expect(narrowed?.state).toBe("ready");
      expect(narrowed?.tools.map((tool) => tool.name)).toEqual(["ev__echo"]);
    } finally {
      await small.close();
    }
  });

  it("refuses a URL outside SERVICE_MCP_ALLOW with its code and creates nothing", async () => {
    const before = (await sessions.listSessions({})).sessions.length;
    const outside = { environments: [{ name: "x", kind: { case: "mcp" as const, value: { url: "http://127.0.0.1:9/mcp" } } }] };
    expect(await refusedWith(sessions.createSession(outside))).toBe("mcp_url_not_allowed");
    const badName = { environments: [{ name: "a__b", kind: { case: "mcp" as const, value: { url: proxy.url } } }] };
    expect(await refusedWith(sessions.createSession(badName))).toBe("invalid_argument");
    const placed = {
      environments: [{ name: "ev", kind: { case: "mcp" as const, value: { url: proxy.url } } }],
      tools: [{ name: "mine", environment: "ev" }],
    };
    expect(await refusedWith(sessions.createSession(placed))).toBe("invalid_argument");
    expect((await sessions.listSessions({})).sessions.length).toBe(before);
  });

  it("never shows, journals, logs or stores the credential, and ends the MCP session when the session ends", async () => {
    const sessionId = await mcpSession();
    await call(sessionId, "ev__echo", { message: "x" });
    const { session } = await sessions.getSession({ sessionId });
    const shown = toJsonString(SessionSchema, session!);
    expect(shown).not.toContain(CREDENTIAL);
    expect(shown).toContain(proxy.url);
    const deletes = proxy.seen.filter((request) => request.method === "DELETE").length;
    await sessions.endSession({ sessionId });
    const events: SessionEvent[] = await eventsUntil(sessions, sessionId, (event) => event.type === "session.ended");
    const detach = events.find((event) => event.type === "operation.receipt" && event.data?.kind === "detach");
    expect(detach?.data?.receipt).toMatchObject({ returned: { output: { terminated: true } } });
    expect(proxy.seen.filter((request) => request.method === "DELETE").length).toBe(deletes + 1);
    expect(JSON.stringify(events.map((event) => event.data))).not.toContain(CREDENTIAL);
    expect(await filesContaining(service.dataDir, CREDENTIAL)).toEqual([]);
    expect(service.logs.join("\n")).not.toContain(CREDENTIAL);
  });
});
