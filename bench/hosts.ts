// Host and extension environments (issue #10 §3): CallTool of a tool placed in a host or an
// extension environment, from this process to the service in a child process (Connect, binary
// protobuf, HTTP/2, as in the sessions suite), each beside a baseline measured in the same run,
// all in interleaved rounds (lib/variants.ts):
//   - host: the tool is served by a host in this process, on its own HTTP/2 connection to the
//     service (HostService.Connect, bidirectional). Two hosts, each on a session of its own: one
//     that answers `returned` at once and nothing else (lib/host-streams.ts), and the TypeScript
//     client's hostEnv with a handler returning its input (it answers `accepted`, then
//     `returned`). Baseline: a ping-pong on the same kind of stream (connect-node's Connect
//     client, binary, HTTP/2, from this process) with a bare HostService.Connect server inside
//     the service's process that answers each message at once with one message carrying the same
//     payload back (servers/service-beside-echo-stream.ts): the stream itself, without the
//     unary CallTool, the service's HTTP layer, the session, the journal and the host hub.
//     Beside them, CallTool of the host tool of a session no host serves: the whole path but the
//     stream (the service journals the call and answers host_unavailable, nothing sent), so that
//     the host leg inside a CallTool is the difference of two rows;
//   - extension: the tool is served by a minimal extension in a third process
//     (servers/echo-extension.ts: Execute answers one `returned` at once). Baseline: the same
//     Execute RPC called by this process on the same extension, with the client the service
//     uses (connect-node's Connect transport, binary, HTTP/1.1).
import * as path from "node:path";
import { fromJson, toJsonString, type MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromMs, ValueSchema } from "@bufbuild/protobuf/wkt";
import { createClient, type Client } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { DEFAULT_RECONNECT, HostConnection, hostEnv } from "../clients/ts/src/hosts/index.ts";
import { ExtensionEnvironmentService } from "../gen/skillenv/extension/v1/extension_pb.js";
import { HostService } from "../gen/skillenv/env/v1/host_pb.js";
import type { CreateSessionRequestSchema, SessionService } from "../gen/skillenv/sessions/v1/sessions_pb.js";
import { BENCH_API_KEY, spawnServer } from "./lib/child.ts";
import { formatFigures } from "./lib/figures.ts";
import { attachInstantHost, EchoStream } from "./lib/host-streams.ts";
import { connectH2, cpuProfileArgv, ECHO, ECHO_INPUT, echoCaller, sessionClient, withChildren } from "./lib/services.ts";
import type { Suite, SuiteReport } from "./lib/suite.ts";
import { fixed } from "./lib/table.ts";
import { childSide, measureVariants, type Plan, type Variant, type VariantResult } from "./lib/variants.ts";

const PLAN: Plan = { rounds: 8, inFlight: 64, budgetMs: 15_000 };
const COUNTS = { warmup: 200, perRound: 150, concurrent: 4000 };
/**
 * Commands one host connection may have in flight (the default is 64 too): a command leaves the
 * connection when its receipt arrives, before CallTool answers, so 64 CallTools in flight never
 * hold more than 64 commands. Stated here so that the figure does not move with the default; a
 * call refused host_busy would fail the suite, not pass for a fast one.
 */
const HOST_MAX_IN_FLIGHT = PLAN.inFlight;
const HOST_TARGET_RATIO = 2;

const HOST_ENV = "laptop";
const EXTENSION_ENV = "extension";
/** The binding of the bare Execute calls, in the form the service names its own. */
const BARE_BINDING = { id: `ses_bench/${EXTENSION_ENV}`, workspace: "bench" };

type Sessions = Client<typeof SessionService>;

async function run(): Promise<SuiteReport> {
  return withChildren(async (started) => {
    const extension = started(await spawnServer(path.join(import.meta.dirname, "servers", "echo-extension.ts"), { execArgv: cpuProfileArgv() }));
    const service = started(
      await spawnServer(path.join(import.meta.dirname, "servers", "service-beside-echo-stream.ts"), {
        env: {
          SERVICE_API_KEYS: `bench=${BENCH_API_KEY}`,
          SERVICE_SHUTDOWN_GRACE_SECS: "1",
          // One workspace with the whole server: throughput, not its share.
          SERVICE_WORKSPACE_REQUESTS_PER_SEC: "0",
          SERVICE_HOST_MAX_IN_FLIGHT: String(HOST_MAX_IN_FLIGHT),
          SERVICE_ENV_NETWORK_ALLOW: extension.url,
        },
        execArgv: cpuProfileArgv(),
        startTimeoutMs: 60_000,
      }),
    );
    const [serviceUrl, echoStreamUrl] = service.url.split(" ") as [string, string];
    const sessions = sessionClient(connectH2(serviceUrl));
    const hostRpc = () => createClient(HostService, connectH2(serviceUrl));

    const instantSession = await createSession(sessions, hostSession());
    const instantHost = await attachInstantHost(hostRpc(), instantSession, HOST_ENV);
    const clientSession = await createSession(sessions, hostSession());
    const echoHost = hostEnv({ name: HOST_ENV, tools: { [ECHO]: (input: unknown) => input } });
    const clientHost = new HostConnection({ rpc: hostRpc(), streaming: "bidirectional", reconnect: DEFAULT_RECONNECT }, clientSession, echoHost);
    await clientHost.connected();
    const unservedSession = await createSession(sessions, hostSession());
    const echoStream = new EchoStream(createClient(HostService, connectH2(echoStreamUrl)));
    const extensionSession = await createSession(sessions, extensionSessionOf(extension.url));

    const server = childSide("service", service);
    const extensionSide = childSide("extension", extension);
    try {
      const startedAt = performance.now();
      const results = await measureVariants(
        [
          { name: "host: bare bidi ping-pong (baseline)", call: echoStreamCaller(echoStream), sides: [server], ...COUNTS },
          { name: "host: CallTool, no host attached", call: unavailableCaller(sessions, unservedSession), sides: [server], ...COUNTS },
          { name: "host: CallTool -> instant host", call: echoCaller(sessions, instantSession), sides: [server], ...COUNTS },
          { name: "host: CallTool -> client hostEnv", call: echoCaller(sessions, clientSession), sides: [server], ...COUNTS },
          { name: "extension: bare Execute (baseline)", call: executeCaller(extension.url), sides: [extensionSide], ...COUNTS },
          { name: "extension: CallTool -> Execute", call: echoCaller(sessions, extensionSession), sides: [server, extensionSide], ...COUNTS },
        ] satisfies Variant[],
        PLAN,
      );
      process.stderr.write(`  calls: ${((performance.now() - startedAt) / 1000).toFixed(1)} s\n`);
      return report(results);
    } finally {
      echoStream.close();
      instantHost.close();
      await clientHost.stop();
    }
  });
}

function report(results: VariantResult[]): SuiteReport {
  const rows = results.map((result) => result.row);
  const [pingPong, unserved, instant, client, execute, extension] = [rows[0]!, rows[1]!, rows[2]!, rows[3]!, rows[4]!, rows[5]!];
  const ratio = (ours: number, baseline: number) => `${fixed(ours / baseline, 2)}x`;
  const extensionCpu = (index: number) => fixed(results[index]!.cpuUsPerCall.get("extension")!, 0);
  const hostLegMs = instant.medianMs - unserved.medianMs;
  const truncated = results.filter((result) => result.truncated).map((result) => result.row.name);
  return {
    rows,
    notes: [
      "",
      formatFigures([
        {
          figure: "host tool round trip p50, instant host",
          ours: `${fixed(instant.medianMs, 3)} ms = ${ratio(instant.medianMs, pingPong.medianMs)}`,
          baseline: `ping-pong ${fixed(pingPong.medianMs, 3)} ms`,
          target: `<= ${HOST_TARGET_RATIO}x`,
          met: instant.medianMs <= HOST_TARGET_RATIO * pingPong.medianMs,
        },
        {
          figure: "host tool round trip p50, client hostEnv",
          ours: `${fixed(client.medianMs, 3)} ms = ${ratio(client.medianMs, pingPong.medianMs)}`,
          baseline: `ping-pong ${fixed(pingPong.medianMs, 3)} ms`,
          target: `<= ${HOST_TARGET_RATIO}x`,
          met: client.medianMs <= HOST_TARGET_RATIO * pingPong.medianMs,
        },
        {
          figure: "host leg inside CallTool p50, instant host",
          ours: `${fixed(hostLegMs, 3)} ms = ${ratio(hostLegMs, pingPong.medianMs)}`,
          baseline: `ping-pong ${fixed(pingPong.medianMs, 3)} ms`,
          target: "-",
        },
        {
          figure: "host tool round trip p99, instant host",
          ours: `${fixed(instant.p99Ms, 3)} ms`,
          baseline: `ping-pong ${fixed(pingPong.p99Ms, 3)} ms`,
          target: "-",
        },
        {
          figure: `host calls/s, ${PLAN.inFlight} in flight, instant host`,
          ours: fixed(instant.callsPerSec, 0),
          baseline: `ping-pong ${fixed(pingPong.callsPerSec, 0)}`,
          target: "-",
        },
        {
          figure: `host calls/s, ${PLAN.inFlight} in flight, client hostEnv`,
          ours: fixed(client.callsPerSec, 0),
          baseline: `ping-pong ${fixed(pingPong.callsPerSec, 0)}`,
          target: "-",
        },
        {
          figure: "extension execute round trip p50",
          ours: `${fixed(extension.medianMs, 3)} ms = ${ratio(extension.medianMs, execute.medianMs)}`,
          baseline: `bare Execute ${fixed(execute.medianMs, 3)} ms`,
          target: "-",
        },
        {
          figure: `extension calls/s, ${PLAN.inFlight} in flight`,
          ours: fixed(extension.callsPerSec, 0),
          baseline: `bare Execute ${fixed(execute.callsPerSec, 0)}`,
          target: "-",
        },
      ]),
      "",
      `Rows: ${PLAN.rounds} interleaved rounds of ${COUNTS.perRound} sequential calls per variant (order rotated each round, ${COUNTS.warmup} warm-up calls first), ` +
        `then ${COUNTS.concurrent} calls with ${PLAN.inFlight} in flight per variant. Payload ${JSON.stringify(ECHO_INPUT)} each way, checked on every call.`,
      `What each row includes: "CallTool -> ... host" = client -> Connect binary h2 -> the service's HTTP layer and auth gate -> session lookup and checks -> journal operation.sent (synced) -> ` +
        `host hub -> command on the host's stream (its own h2 connection) -> the host in this process -> receipt back on that stream -> journal operation.receipt (synced) -> response. ` +
        `The instant host answers \`returned\` only; the client's hostEnv answers \`accepted\` (journaled as operation.accepted, a third synced write) and then \`returned\`, through its handler. ` +
        `"no host attached" = the same CallTool on a session whose host environment nobody serves: everything up to the host hub, both synced journal writes included, ` +
        `answered host_unavailable (checked) without anything sent; "host leg inside CallTool" = instant host p50 - this p50. ` +
        `"bare bidi ping-pong" = one message from this process and one back on an open HostService.Connect stream (connect-node client, binary, h2, same message types and payload), ` +
        `answered by connect-node's stock adapter on node:http2 in the service's process and event loop: no unary RPC, no auth, no session, no journal, no hub.`,
      `"CallTool -> Execute" = the same path to the session as above, then the service's extension client (connect-node, binary, HTTP/1.1, a deadline timer per call) -> ` +
        `Execute on the extension process -> one \`returned\` -> journal operation.receipt -> response. "bare Execute" = the same Execute RPC with the same client library and settings, from this process.`,
      `"server" columns: the service process for the host and CallTool rows, the extension process for bare Execute (CPU read around every chunk, a forced GC per read subtracted); ` +
        `the extension's own CPU per call: bare Execute ${extensionCpu(4)} µs, through the service ${extensionCpu(5)} µs. ` +
        `Client CPU = this process's main thread: the CallTool client and, for the host rows, the host too.`,
      `The service: default settings but SERVICE_HOST_MAX_IN_FLIGHT=${HOST_MAX_IN_FLIGHT} and SERVICE_ENV_NETWORK_ALLOW=<the extension>. One connection carries every CallTool; each host has its own.`,
      ...(truncated.length > 0 ? [`cut short by the ${PLAN.budgetMs / 1000} s phase budget (fewer calls than planned): ${truncated.join(", ")}`] : []),
    ],
  };
}

/** A session with one host environment and "echo" placed in it (no implementation: the host gets the tool's name). */
function hostSession(): MessageInitShape<typeof CreateSessionRequestSchema> {
  return {
    environments: [{ name: HOST_ENV, kind: { case: "host", value: {} } }],
    tools: [{ name: ECHO, description: "Echoes its input.", environment: HOST_ENV }],
  };
}

/** A session with the extension as an environment (set up at creation) and "echo" placed in it. */
function extensionSessionOf(url: string): MessageInitShape<typeof CreateSessionRequestSchema> {
  return {
    environments: [{ name: EXTENSION_ENV, kind: { case: "extension", value: { url } } }],
    tools: [{ name: ECHO, description: "Echoes its input.", environment: EXTENSION_ENV }],
  };
}

async function createSession(client: Sessions, request: MessageInitShape<typeof CreateSessionRequestSchema>): Promise<string> {
  const { session } = await client.createSession(request);
  if (session?.state !== "ready") throw new Error(`session ${session?.id}: state ${session?.state}, expected ready`);
  return session.id;
}

/** One ping-pong on the bare echo stream, checked: the payload must come back as sent. */
function echoStreamCaller(stream: EchoStream): () => Promise<void> {
  const output = fromJson(ValueSchema, ECHO_INPUT);
  const expected = toJsonString(ValueSchema, output);
  return async () => {
    const input = await stream.send(output);
    if (!input || toJsonString(ValueSchema, input) !== expected) throw new Error("echo stream: the payload came back changed");
  };
}

/** CallTool of the host tool of a session no host serves, checked: host_unavailable, nothing sent. */
function unavailableCaller(client: Sessions, sessionId: string): () => Promise<void> {
  const input = fromJson(ValueSchema, ECHO_INPUT);
  return async () => {
    const { receipt } = await client.callTool({ sessionId, tool: ECHO, input });
    const outcome = receipt?.outcome;
    if (outcome?.case !== "failure" || outcome.value.code !== "host_unavailable")
      throw new Error(`CallTool with no host attached: unexpected receipt ${outcome?.case}`);
  };
}

/** Execute on the extension as the service sends it (binding, operation id, tool, input, configuration, deadline), checked. */
function executeCaller(extensionUrl: string): () => Promise<void> {
  const client = createClient(ExtensionEnvironmentService, createConnectTransport({ baseUrl: extensionUrl, httpVersion: "1.1" }));
  const input = fromJson(ValueSchema, ECHO_INPUT);
  const configuration = fromJson(ValueSchema, null);
  const expected = toJsonString(ValueSchema, input);
  let sent = 0;
  return async () => {
    const operationId = `op_${String(sent++).padStart(26, "0")}`;
    const request = { binding: BARE_BINDING, operationId, tool: ECHO, input, configuration, deadline: timestampFromMs(Date.now() + 300_000) };
    for await (const { receipt } of client.execute(request)) {
      if (receipt.case === "returned" && toJsonString(ValueSchema, receipt.value.output!) === expected) return;
      throw new Error(`Execute: unexpected receipt ${receipt.case}`);
    }
    throw new Error("Execute: the stream ended without a receipt");
  };
}

export const hostsSuite: Suite = {
  name: "hosts",
  title: `CallTool of a host tool vs a bare bidi ping-pong, and of an extension tool vs a bare Execute: sequential round trips, calls/s with ${PLAN.inFlight} in flight`,
  run,
};
