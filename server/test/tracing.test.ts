/**
 * Traces (docs/operations.md, "Traces"): a real service exporting OTLP/protobuf to a receiver on
 * loopback that decodes the requests with the OpenTelemetry protos, a run driven by the scripted
 * provider through a tool in the worker pool and a tool of an extension on loopback. Tracing is
 * process-wide (the OpenTelemetry API's globals), so the untraced services run first and each
 * traced one is closed before the next starts.
 */
import { randomBytes } from "node:crypto";
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import { fromJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { trace } from "@opentelemetry/api";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SessionService } from "../../gen/skillenv/sessions/v1/sessions_pb.js";
import { Span_SpanKind, Status_StatusCode } from "./gen/opentelemetry/proto/trace/v1/trace_pb.js";
import { startScriptedProvider, type ScriptedProvider } from "../../testing/scripted-provider/index.ts";
import { TestExtension } from "./helpers/extension.ts";
import { startEverything, startRecordingProxy } from "./helpers/mcp.ts";
import { OtlpReceiver, type ReceivedSpan } from "./helpers/otlp-receiver.ts";
import { buildTestComponents } from "./helpers/pool.ts";
import { KEY_A, startTestService, type TestService } from "./helpers/service.ts";
import { admitTool, eventsUntil, runClient, runEnded, sessionClient } from "./helpers/sessions.ts";

beforeAll(() => buildTestComponents(), 600_000);

const PROVIDER_KEY = "sk-trace-provider-key-0001";
const CREDENTIAL = "extension-credential-0002";
const PROMPT = "prompt text that stays out of traces";
const TOOL_INPUT = "tool input that stays out of traces";
const EXTENSION_INPUT = "extension input that stays out of traces";

let provider: ScriptedProvider;
let extension: TestExtension;
let receiver: OtlpReceiver;

beforeAll(async () => {
  provider = await startScriptedProvider();
  extension = await new TestExtension().start();
  receiver = await new OtlpReceiver().start();
});

afterAll(async () => {
  await provider?.close();
  await extension?.close();
  await receiver?.close();
});

/** A W3C traceparent of a client's own (sampled) span: its trace id and span id. */
function clientTraceparent(): { header: string; traceId: string; spanId: string } {
  const traceId = randomBytes(16).toString("hex");
  const spanId = randomBytes(8).toString("hex");
  return { header: `00-${traceId}-${spanId}-01`, traceId, spanId };
}

/**
 * A session with a WAT echo in the worker pool (`pool_echo`) and the test extension's `echo`
 * (with a credential), and a run whose model calls both, then answers: the run's id.
 */
async function runThroughBothTools(service: TestService, model: string, traceparent?: string): Promise<{ sessionId: string; runId: string }> {
  const sessions = sessionClient(service.url, KEY_A);
  const tool = await admitTool(service.url, KEY_A, "echo-wat");
  const { session } = await sessions.createSession({
    environments: [
      { name: "box", kind: { case: "service", value: {} } },
      { name: "remote", kind: { case: "extension", value: { url: extension.url, credential: CREDENTIAL } } },
    ],
    tools: [
      { name: "pool_echo", environment: "box", implementation: { kind: { case: "tool", value: tool } } },
      { name: "echo", environment: "remote", implementation: { kind: { case: "opaque", value: fromJson(ValueSchema, { kind: "echo" }) } } },
    ],
  });
  provider.script(model, [
    {
      toolCalls: [
        { name: "pool_echo", input: { text: TOOL_INPUT } },
        { name: "echo", input: { text: EXTENSION_INPUT } },
      ],
      usage: { inputTokens: 30, outputTokens: 8 },
    },
    { text: "Done.", usage: { inputTokens: 50, outputTokens: 2 } },
  ]);
  const { run } = await runClient(service.url, KEY_A).createRun(
    {
      sessionId: session!.id,
      run: { model: { provider: "anthropic", name: model, maxTokens: 0 }, message: PROMPT, providerKeys: { anthropic: PROVIDER_KEY } } as never,
    },
    traceparent ? { headers: { traceparent } } : {},
  );
  const events = await eventsUntil(sessions, session!.id, runEnded(run!.id));
  expect(events.at(-1)?.type).toBe("turn.completed");
  return { sessionId: session!.id, runId: run!.id };
}

describe("without OTEL_* variables", () => {
  it("installs nothing, sends no traceparent on and exports nothing", async () => {
    const service = await startTestService({ SERVICE_ANTHROPIC_BASE_URL: provider.anthropicBaseUrl, SERVICE_ENV_NETWORK_ALLOW: extension.url });
    const client = clientTraceparent();
    try {
      // The API's own no-op provider: no SDK behind it.
      expect(trace.getTracerProvider().getTracer("probe").startSpan("probe").isRecording()).toBe(false);
      const { runId } = await runThroughBothTools(service, "untraced-model", client.header);
      const executed = await extension.called("execute", (request) => request.operationId !== undefined && request.tool === "echo");
      expect(executed.traceparent).toBeUndefined();
      const toModel = provider.requests.filter((request) => JSON.stringify(request.body).includes(PROMPT));
      expect(toModel.length).toBeGreaterThan(0);
      for (const request of toModel) expect(request.headers.traceparent).toBeUndefined();
      expect(runId).toMatch(/^run_/);
    } finally {
      // Were tracing installed, closing would flush its spans to an exporter before resolving.
      await service.close();
    }
    expect(receiver.requests).toBe(0);
  });

  it("exports nothing when OTEL_TRACES_EXPORTER=none, even with an endpoint set", async () => {
    const service = await startTestService({ OTEL_TRACES_EXPORTER: "none", OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url });
    try {
      const answer = await fetch(`${service.url}/v1/sessions`, { headers: { authorization: `Bearer ${KEY_A}` } });
      expect(answer.status).toBe(200);
    } finally {
      await service.close();
    }
    expect(receiver.requests).toBe(0);
  });
});

describe("with OTEL_EXPORTER_OTLP_ENDPOINT", () => {
  let service: TestService;
  const client = clientTraceparent();
  let spans: readonly ReceivedSpan[];
  let ids: { sessionId: string; runId: string };

  beforeAll(async () => {
    service = await startTestService({
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_SERVICE_NAME: "skillenv-under-test",
      // Exported as soon as they end, so that the receiver has them while the test waits.
      OTEL_BSP_SCHEDULE_DELAY: "20",
      SERVICE_ANTHROPIC_BASE_URL: provider.anthropicBaseUrl,
      SERVICE_ENV_NETWORK_ALLOW: extension.url,
    });
    ids = await runThroughBothTools(service, "traced-model", client.header);
    // The turn's span ends after every span of the run (its rounds, model calls, tool calls).
    spans = await receiver.until((received) =>
      received.some((span) => span.name === "invoke_agent skillenv" && span.attributes["skillenv.run.id"] === ids.runId),
    );
  }, 120_000);

  afterAll(async () => {
    await service?.close();
  });

  const one = (predicate: (span: ReceivedSpan) => boolean): ReceivedSpan => {
    const found = spans.filter(predicate);
    expect(found).toHaveLength(1);
    return found[0]!;
  };
  const named = (name: string) => one((span) => span.name === name && span.traceId === client.traceId);
  const childrenOf = (parent: ReceivedSpan) => spans.filter((span) => span.parentSpanId === parent.spanId);

  it("exports OTLP/protobuf with the service's resource", () => {
    expect(receiver.contentTypes.every((type) => type === "application/x-protobuf")).toBe(true);
    expect(named("skillenv.sessions.v1.RunService/CreateRun").resource["service.name"]).toBe("skillenv-under-test");
  });

  it("makes the client's traceparent the parent of the CreateRun span, with the RPC conventions' attributes", () => {
    const rpc = named("skillenv.sessions.v1.RunService/CreateRun");
    expect(rpc.parentSpanId).toBe(client.spanId);
    expect(rpc.kind).toBe(Span_SpanKind.SERVER);
    expect(rpc.attributes).toMatchObject({
      "rpc.system": "connect_rpc",
      "rpc.service": "skillenv.sessions.v1.RunService",
      "rpc.method": "CreateRun",
      "skillenv.protocol": "connect",
      "http.response.status_code": 200,
    });
    expect(rpc.status).not.toBe(Status_StatusCode.ERROR);
  });

  it("forms one tree: RPC -> turn -> run round -> model call", () => {
    const rpc = named("skillenv.sessions.v1.RunService/CreateRun");
    const turn = named("invoke_agent skillenv");
    expect(turn.parentSpanId).toBe(rpc.spanId);
    expect(turn.attributes).toMatchObject({ "skillenv.run.id": ids.runId, "skillenv.run.status": "completed", "gen_ai.usage.input_tokens": 80 });
    const rounds = childrenOf(turn).filter((span) => span.name === "run round");
    expect(rounds.map((round) => round.attributes["skillenv.run.round"]).sort()).toEqual([1, 2]);
    for (const round of rounds) {
      const calls = childrenOf(round).filter((span) => span.name === "chat traced-model");
      expect(calls).toHaveLength(1);
      expect(calls[0]!.kind).toBe(Span_SpanKind.CLIENT);
    }
    const first = rounds.find((round) => round.attributes["skillenv.run.round"] === 1)!;
    expect(childrenOf(first).find((span) => span.name === "chat traced-model")!.attributes).toMatchObject({
      "gen_ai.operation.name": "chat",
      "gen_ai.provider.name": "anthropic",
      "gen_ai.system": "anthropic",
      "gen_ai.request.model": "traced-model",
      "gen_ai.usage.input_tokens": 30,
      "gen_ai.usage.output_tokens": 8,
      "gen_ai.response.finish_reasons": ["tool_use"],
    });
  });

  it("forms one tree: tool call -> journal writes and the pool", () => {
    const round = one((span) => span.name === "run round" && span.traceId === client.traceId && span.attributes["skillenv.run.round"] === 1);
    const toolCall = named("execute_tool pool_echo");
    expect(toolCall.parentSpanId).toBe(round.spanId);
    expect(toolCall.attributes).toMatchObject({
      "gen_ai.operation.name": "execute_tool",
      "gen_ai.tool.name": "pool_echo",
      "skillenv.environment.kind": "service",
      "skillenv.operation.outcome": "returned",
      "skillenv.run.id": ids.runId,
      "skillenv.session.id": ids.sessionId,
    });
    const children = childrenOf(toolCall);
    // operation.sent before the dispatch, operation.receipt after it.
    expect(children.filter((span) => span.name === "journal write").map((span) => span.attributes["skillenv.journal.event"])).toEqual(
      expect.arrayContaining(["operation.sent", "operation.receipt"]),
    );
    expect(children.find((span) => span.name === "pool invoke")?.attributes).toMatchObject({
      "skillenv.pool.kind": "tool",
      "skillenv.operation.outcome": "returned",
    });
  });

  it("sends the trace on to the extension and to the model provider", async () => {
    const toolCall = named("execute_tool echo");
    const clientSpan = one((span) => span.name === "skillenv.extension.v1.ExtensionEnvironmentService/Execute" && span.parentSpanId === toolCall.spanId);
    expect(clientSpan.kind).toBe(Span_SpanKind.CLIENT);
    const executed = await extension.called("execute", (request) => request.operationId === toolCall.attributes["skillenv.operation.id"]);
    expect(executed.traceparent).toBe(`00-${client.traceId}-${clientSpan.spanId}-01`);

    const modelCalls = spans.filter((span) => span.name === "chat traced-model");
    const sent = provider.requests.filter((request) => JSON.stringify(request.body).includes(PROMPT)).map((request) => request.headers.traceparent);
    expect(sent).toEqual(expect.arrayContaining(modelCalls.map((call) => `00-${client.traceId}-${call.spanId}-01`)));
  });

  it("keeps a custom agent loop's model calls in the run's trace, under the loop's operation", async () => {
    const loop = await admitTool(service.url, KEY_A, "agent-loop-js", "agentloops");
    const sessions = sessionClient(service.url, KEY_A);
    const { session } = await sessions.createSession({ environments: [{ name: "box", kind: { case: "service", value: {} } }] });
    provider.script("loop-model", [{ text: "loop done" }]);
    const loopClient = clientTraceparent();
    const agentloop = { environment: "box", implementation: { kind: { case: "agentloop", value: loop } } };
    const { run } = await runClient(service.url, KEY_A).createRun(
      {
        sessionId: session!.id,
        run: {
          model: { provider: "anthropic", name: "loop-model", maxTokens: 0 },
          message: PROMPT,
          providerKeys: { anthropic: PROVIDER_KEY },
          agentloop,
        } as never,
      },
      { headers: { traceparent: loopClient.header } },
    );
    await eventsUntil(sessions, session!.id, runEnded(run!.id));
    const received = await receiver.until((all) => all.some((span) => span.name === "invoke_agent skillenv" && span.attributes["skillenv.run.id"] === run!.id));
    const inTrace = new Map(received.filter((span) => span.traceId === loopClient.traceId).map((span) => [span.spanId, span]));
    // The loop's host calls arrive as a worker process's messages: still spans of this run.
    const chat = [...inTrace.values()].find((span) => span.name === "chat loop-model")!;
    const ancestors: string[] = [];
    for (let span = inTrace.get(chat.parentSpanId); span; span = inTrace.get(span.parentSpanId)) ancestors.push(span.name);
    expect(ancestors).toEqual(["pool invoke", "execute agent_loop", "invoke_agent skillenv", "skillenv.sessions.v1.RunService/CreateRun"]);
  });

  it("gives a gRPC call and a JSON API call their RPC span, under the client's traceparent", async () => {
    const grpc = clientTraceparent();
    const sessions = createClient(
      SessionService,
      createGrpcTransport({
        baseUrl: service.url,
        interceptors: [(next) => (request) => (request.header.set("authorization", `Bearer ${KEY_A}`), next(request))],
      }),
    );
    await sessions.listSessions({}, { headers: { traceparent: grpc.header } });
    const rest = clientTraceparent();
    const missing = await fetch(`${service.url}/v1/sessions/ses_00000000000000000000000000`, {
      headers: { authorization: `Bearer ${KEY_A}`, traceparent: rest.header },
    });
    expect(missing.status).toBe(404);
    const received = await receiver.until((all) =>
      [grpc, rest].every((client) => all.some((span) => span.traceId === client.traceId && span.kind === Span_SpanKind.SERVER)),
    );
    const rootOf = (client: { traceId: string; spanId: string }) =>
      received.find((span) => span.traceId === client.traceId && span.parentSpanId === client.spanId)!;
    expect(rootOf(grpc)).toMatchObject({
      name: "skillenv.sessions.v1.SessionService/ListSessions",
      attributes: { "rpc.system": "grpc", "rpc.service": "skillenv.sessions.v1.SessionService", "rpc.method": "ListSessions", "rpc.grpc.status_code": 0 },
    });
    // A refusal is the caller's, not a fault: its code, and no error status.
    const refused = rootOf(rest);
    expect(refused).toMatchObject({
      name: "skillenv.sessions.v1.SessionService/GetSession",
      attributes: { "skillenv.protocol": "rest", "rpc.method": "GetSession", "http.response.status_code": 404, "error.type": "session_not_found" },
    });
    expect(refused.attributes["rpc.system"]).toBeUndefined();
    expect(refused.status).not.toBe(Status_StatusCode.ERROR);
  });

  it("sends the trace on to an MCP server, from a CallTool through its tools/call span", async () => {
    const everything = await startEverything();
    const proxy = await startRecordingProxy(everything);
    try {
      // The MCP allow-list is a setting: this session's server is allowed by a service of its own.
      await service.close();
      service = await startTestService({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_BSP_SCHEDULE_DELAY: "20", SERVICE_MCP_ALLOW: proxy.origin });
      const sessions = sessionClient(service.url, KEY_A);
      const { session } = await sessions.createSession({ environments: [{ name: "ev", kind: { case: "mcp", value: { url: proxy.url, tools: [] } } }] });
      const mcpClient = clientTraceparent();
      const { receipt } = await sessions.callTool(
        { sessionId: session!.id, tool: "ev__echo", input: fromJson(ValueSchema, { message: TOOL_INPUT }) },
        { headers: { traceparent: mcpClient.header } },
      );
      expect(receipt?.outcome.case).toBe("returned");
      // The call's span ends last, once its answer is out.
      const received = await receiver.until((all) => all.some((span) => span.traceId === mcpClient.traceId && span.parentSpanId === mcpClient.spanId));
      const rpc = received.find((span) => span.traceId === mcpClient.traceId && span.parentSpanId === mcpClient.spanId)!;
      expect(rpc.name).toBe("skillenv.sessions.v1.SessionService/CallTool");
      const toolCall = received.find((span) => span.traceId === mcpClient.traceId && span.name === "execute_tool ev__echo")!;
      expect(toolCall.parentSpanId).toBe(rpc.spanId);
      const mcpCall = received.find((span) => span.parentSpanId === toolCall.spanId && span.name === "tools/call echo")!;
      expect(mcpCall).toMatchObject({ kind: Span_SpanKind.CLIENT, attributes: { "mcp.method.name": "tools/call", "gen_ai.tool.name": "echo" } });
      const sent = await proxy.whenSeen((request) => request.message?.method === "tools/call" && request.traceparent?.includes(mcpClient.traceId) === true);
      expect(sent.traceparent).toBe(`00-${mcpClient.traceId}-${mcpCall.spanId}-01`);
      expect(JSON.stringify(received.filter((span) => span.traceId === mcpClient.traceId).map((span) => span.attributes))).not.toContain(TOOL_INPUT);
    } finally {
      await proxy.close();
      await everything.kill();
    }
  });

  it("records no key, credential, prompt, tool input or output in any attribute", () => {
    const recorded = JSON.stringify(spans.map((span) => [span.name, span.attributes, span.resource]));
    for (const secret of [KEY_A, PROVIDER_KEY, CREDENTIAL, PROMPT, TOOL_INPUT, EXTENSION_INPUT, "Done."]) expect(recorded).not.toContain(secret);
  });
});

describe("with a collector that refuses the exports", () => {
  const TOKEN = "otel-collector-token-0003";
  let refusing: http.Server;
  let service: TestService;

  beforeAll(async () => {
    // A collector that refuses the credentials: 401, which the exporter does not retry.
    refusing = http.createServer((request, response) => {
      request.resume();
      request.on("end", () => response.writeHead(401, { "content-type": "text/plain" }).end("unauthorized"));
    });
    await new Promise<void>((resolve) => refusing.listen(0, "127.0.0.1", resolve));
    service = await startTestService({
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${(refusing.address() as AddressInfo).port}`,
      OTEL_EXPORTER_OTLP_HEADERS: `authorization=Bearer ${TOKEN}`,
      OTEL_BSP_SCHEDULE_DELAY: "20",
    });
  });

  afterAll(async () => {
    await service?.close();
    await new Promise<void>((resolve) => refusing?.close(() => resolve()));
  });

  it("says in the service log that spans were dropped, with the exporter's words and never its headers", async () => {
    await sessionClient(service.url, KEY_A).listSessions({});
    const line = JSON.parse(await service.logged((entry) => entry.includes('"trace.export_failed"')));
    expect(line).toMatchObject({ event: "trace.export_failed", spans: expect.any(Number), suppressed: 0 });
    expect(line.spans).toBeGreaterThan(0);
    expect(line.error).toEqual(expect.any(String));
    expect(service.logs.join("\n")).not.toContain(TOKEN);
  });
});
