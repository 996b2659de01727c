// Unary Presign (dedup hit) over each wire protocol the service speaks, each beside baselines
// measured in the same run, all in interleaved rounds (lib/variants.ts), so that the machine's
// load hits every row alike:
//   - bare connect-node: the same protocol, client and wire format against connect-node's stock
//     adapter answering Presign with a constant (servers/bare-connect.ts), called with
//     connect-node's stock transport. Service minus this is our own cost per call: the HTTP
//     layer, the auth gate, the body budget, the call record and log line, the LevelDB read, and
//     our client's transport options;
//   - bare http2: a node:http2 round trip with a body of about the same size
//     (servers/bare-http2.ts). Bare connect-node over this is connect-node's own cost per call.
// The REST row's baseline is the same fetch client posting Connect JSON to the bare adapter.
// Health.Check, a constant answer that needs no key, in both places separates our HTTP layer
// from Presign's work (the key and the LevelDB read).
import { createHash, randomBytes } from "node:crypto";
import { once } from "node:events";
import * as http2 from "node:http2";
import * as path from "node:path";
import * as v8 from "node:v8";
import * as vm from "node:vm";
import type { DescService } from "@bufbuild/protobuf";
import { createClient, type Client, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { createNodeTransport, createServiceClient, type NodeTransportOptions } from "@skillenv/client/node";
import { Health, HealthCheckResponse_ServingStatus } from "../gen/grpc/health/v1/health_pb.js";
import { AssetService } from "../gen/skillenv/assets/v1/assets_pb.js";
import { endRequestSpan, startRequestSpan } from "../server/src/http/request-span.ts";
import type { NodeRequest, RequestRecord } from "../server/src/http/index.ts";
import { runWithin } from "../server/src/tracing/index.ts";
import { BENCH_API_KEY, spawnServer } from "./lib/child.ts";
import { formatFigures, type Figure } from "./lib/figures.ts";
import { cpuProfileArgv, withChildren } from "./lib/services.ts";
import { MiB } from "./lib/stats.ts";
import type { ResultRow, Suite, SuiteReport } from "./lib/suite.ts";
import { fixed } from "./lib/table.ts";
import { childSide, measureVariants, type Plan, type Side, type Variant } from "./lib/variants.ts";

const PLAN: Plan = { rounds: 10, inFlight: 64, budgetMs: 10_000 };
const COUNTS = { warmup: 300, perRound: 200, concurrent: 5000 };
/** Issue #12: the service beside the bare connect-node handler on the same protocol, and connect binary h2 and gRPC beside bare http2. */
const TARGET_OVER_BARE_CONNECT = 1.1;
const TARGET_OVER_BARE_HTTP2 = 2;
/** Issue 23: metrics on may cost a call at most 3%. */
const METRICS_TARGET = 1.03;

type Call = () => Promise<void>;

/** Content the workspace has already finalized: Presign on it is a dedup hit (auth + one LevelDB read). */
interface Asset {
  sha256: string;
  sizeBytes: number;
}

type ClientOptions = Omit<NodeTransportOptions, "baseUrl" | "apiKey">;

interface Protocol {
  name: string;
  client: ClientOptions;
}

const CONNECT_H2: Protocol = { name: "connect binary (h2)", client: { protocol: "connect", httpVersion: "2", useBinaryFormat: true } };
const GRPC: Protocol = { name: "grpc (h2)", client: { protocol: "grpc", httpVersion: "2" } };
const PROTOCOLS: Protocol[] = [
  CONNECT_H2,
  GRPC,
  { name: "connect json (http/1.1)", client: { protocol: "connect", httpVersion: "1.1", useBinaryFormat: false } },
  { name: "grpc-web binary (http/1.1)", client: { protocol: "grpc-web", httpVersion: "1.1", useBinaryFormat: true } },
];
const REST = "rest json (fetch, http/1.1)";
const HEALTH = "Health.Check";

/** One figure's two rows: the service, and the bare connect-node handler with the same client library. */
interface Pair {
  name: string;
  service: Call;
  bare: Call;
}

interface BareUrls {
  h2: string;
  h1: string;
}

/** Our client, as an application makes it. */
function ourTransport(url: string, client: ClientOptions): Transport {
  return createNodeTransport({ baseUrl: url, apiKey: BENCH_API_KEY, ...client });
}

/** connect-node's transport with its defaults, as the baseline's client. */
function stockTransport(urls: BareUrls, { protocol, httpVersion, useBinaryFormat }: ClientOptions): Transport {
  const baseUrl = protocol === "grpc" || httpVersion === "2" ? urls.h2 : urls.h1;
  if (protocol === "grpc") return createGrpcTransport({ baseUrl, useBinaryFormat });
  if (protocol === "grpc-web") return createGrpcWebTransport({ baseUrl, httpVersion: httpVersion ?? "1.1", useBinaryFormat });
  return createConnectTransport({ baseUrl, httpVersion: httpVersion ?? "1.1", useBinaryFormat });
}

/** A caller of one RPC whose answer `check` must accept: a refusal or a miss would measure the wrong path. */
function rpcCaller<S extends DescService>(service: S, transport: Transport, call: (client: Client<S>) => Promise<boolean>): Call {
  const client = createClient(service, transport);
  return async () => {
    if (!(await call(client))) throw new Error(`${service.typeName}: unexpected answer`);
  };
}

function presignCaller(transport: Transport, asset: Asset): Call {
  const request = { sha256: asset.sha256, sizeBytes: BigInt(asset.sizeBytes) };
  return rpcCaller(AssetService, transport, async (client) => (await client.presign(request)).exists === true);
}

function healthCaller(transport: Transport): Call {
  return rpcCaller(Health, transport, async (client) => (await client.check({})).status === HealthCheckResponse_ServingStatus.SERVING);
}

/** POST of a JSON body with fetch, the answer checked. */
function fetchCaller(url: string, headers: Record<string, string>, asset: Asset): Call {
  const init: RequestInit = {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify({ sha256: asset.sha256, sizeBytes: asset.sizeBytes }),
  };
  return async () => {
    const response = await fetch(url, init);
    const body = (await response.json()) as { exists?: boolean };
    if (!response.ok || body.exists !== true) throw new Error(`${url}: HTTP ${response.status} ${JSON.stringify(body)}`);
  };
}

async function bareHttp2Caller(url: string): Promise<Call> {
  const session = http2.connect(url);
  await once(session, "connect");
  const body = Buffer.from(JSON.stringify({ sha256: "0".repeat(64), sizeBytes: 1024 }));
  return () =>
    new Promise<void>((resolve, reject) => {
      const stream = session.request({ ":method": "POST", ":path": "/", "content-type": "application/octet-stream" });
      stream.on("data", () => {});
      stream.once("end", resolve);
      stream.once("error", reject);
      stream.end(body);
    });
}

function pairs(serviceUrl: string, bare: BareUrls, asset: Asset): Pair[] {
  return [
    ...PROTOCOLS.map(({ name, client }) => ({
      name,
      service: presignCaller(ourTransport(serviceUrl, client), asset),
      bare: presignCaller(stockTransport(bare, client), asset),
    })),
    {
      name: REST,
      service: fetchCaller(`${serviceUrl}/assets/presign`, { authorization: `Bearer ${BENCH_API_KEY}` }, asset),
      bare: fetchCaller(`${bare.h1}/${AssetService.typeName}/Presign`, {}, asset),
    },
    ...[CONNECT_H2, GRPC].map(({ name, client }) => ({
      name: `${HEALTH}, ${name}`,
      service: healthCaller(ourTransport(serviceUrl, client)),
      bare: healthCaller(stockTransport(bare, client)),
    })),
  ];
}

// A forced GC before reading the client heap makes before/after comparable (live data, not
// garbage timing). `npm run bench` runs plain `node`, so expose gc at runtime instead of a flag.
v8.setFlagsFromString("--expose-gc");
const gc = vm.runInNewContext("gc") as () => void;
function clientHeapMiB(): number {
  gc();
  return process.memoryUsage().heapUsed / MiB;
}

async function run(): Promise<SuiteReport> {
  const heapBefore = clientHeapMiB();
  return withChildren(async (started) => {
    // The request log is on in production; here its lines go to /dev/null, written as to a file.
    // One workspace with the whole server (a single-tenant deployment): throughput, not its share.
    const serviceEnv = {
      SERVICE_API_KEYS: `bench=${BENCH_API_KEY}`,
      SERVICE_SHUTDOWN_GRACE_SECS: "1",
      SERVICE_WORKSPACE_REQUESTS_PER_SEC: "0",
      BENCH_REQUEST_LOG: "/dev/null",
    };
    const sink = await spawnServer(path.join(import.meta.dirname, "servers", "otlp-sink.ts")).then(started);
    const [service, metered, traced, bareConnect, bareHttp2] = await Promise.all([
      // No OTEL_* variables: tracing off, as in every other row.
      spawnServer(path.join(import.meta.dirname, "servers", "service.ts"), { env: serviceEnv, execArgv: cpuProfileArgv() }).then(started),
      // The same service with its Prometheus metrics on (SERVICE_METRICS_LISTEN): what they cost a call.
      spawnServer(path.join(import.meta.dirname, "servers", "service.ts"), { env: { ...serviceEnv, SERVICE_METRICS_LISTEN: "127.0.0.1:0" } }).then(started),
      // And with tracing on, every call's span exported to a collector that drops them: what tracing costs a call.
      spawnServer(path.join(import.meta.dirname, "servers", "service.ts"), { env: { ...serviceEnv, OTEL_EXPORTER_OTLP_ENDPOINT: sink.url } }).then(started),
      spawnServer(path.join(import.meta.dirname, "servers", "bare-connect.ts")).then(started),
      spawnServer(path.join(import.meta.dirname, "servers", "bare-http2.ts")).then(started),
    ]);
    const [h2, h1] = bareConnect.url.split(" ") as [string, string];
    const before = await service.stats();

    const bytes = randomBytes(1024);
    const asset = { sha256: createHash("sha256").update(bytes).digest("hex"), sizeBytes: bytes.byteLength };
    for (const server of [service, metered, traced])
      await createServiceClient(createNodeTransport({ baseUrl: server.url, apiKey: BENCH_API_KEY })).uploadAsset(bytes);

    const serviceSide = childSide("service", service);
    const bareSide = childSide("bare connect-node", bareConnect);
    const variant = (name: string, call: Call, side: Side): Variant => ({ name, call, sides: [side], ...COUNTS });
    const measured = pairs(service.url, { h2, h1 }, asset);
    const variants: Variant[] = [
      variant("bare http2 (floor)", await bareHttp2Caller(bareHttp2.url), childSide("bare http2", bareHttp2)),
      ...measured.flatMap((pair) => [
        variant(`${pair.name}: bare connect-node`, pair.bare, bareSide),
        variant(`${pair.name}: service`, pair.service, serviceSide),
      ]),
      variant(
        `${CONNECT_H2.name}: service, metrics on`,
        presignCaller(ourTransport(metered.url, CONNECT_H2.client), asset),
        childSide("service, metrics on", metered),
      ),
      variant(
        `${CONNECT_H2.name}: service, tracing on`,
        presignCaller(ourTransport(traced.url, CONNECT_H2.client), asset),
        childSide("service, tracing on", traced),
      ),
    ];
    const startedAt = performance.now();
    const results = await measureVariants(variants, PLAN);
    process.stderr.write(`  calls: ${((performance.now() - startedAt) / 1000).toFixed(1)} s\n`);

    const after = await service.stats();
    const rows = results.map((result) => result.row);
    const truncated = results.filter((result) => result.truncated).map((result) => result.row.name);
    const mib = (bytes: number) => fixed(bytes / MiB, 1);
    return {
      rows,
      notes: [
        "",
        formatFigures([
          ...figures(
            rows,
            measured.map((pair) => pair.name),
          ),
          untracedRequestCost(rows.find((r) => r.name === `${CONNECT_H2.name}: service`)!),
        ]),
        "",
        `Rows: ${PLAN.rounds} interleaved rounds of ${COUNTS.perRound} sequential calls per variant (order rotated each round, ${COUNTS.warmup} warm-up calls first), ` +
          `then ${COUNTS.concurrent} calls with ${PLAN.inFlight} in flight per variant. Every answer is checked (Presign: exists; Health.Check: SERVING).`,
        `"service" = our client (@skillenv/client/node: createNodeTransport, API key interceptor) -> the service (one-port listener, request listener, auth gate, body budget, ` +
          `call record and log line (to /dev/null), LevelDB read) -> answer. "bare connect-node" = connect-node's stock transport (default options, no interceptor) -> ` +
          `connect-node's stock adapter on node:http2 or node:http answering a constant; REST's baseline: the same fetch client posting Connect JSON to it. ` +
          `${HEALTH} needs no key and reads nothing: its service row is our HTTP layer and call record around a constant answer. ` +
          `"bare http2" = node:http2 client and server, no framework. Each server in its own process; "server" columns are that process (CPU read around every chunk, ` +
          `a forced GC per read subtracted); client CPU = this process's main thread.`,
        `memory (MiB): service RSS ${mib(before.rssBytes)} -> ${mib(after.rssBytes)}, heap after gc ${mib(before.heapUsedBytes)} -> ${mib(after.heapUsedBytes)}; ` +
          `client heap after gc ${fixed(heapBefore, 1)} -> ${fixed(clientHeapMiB(), 1)}`,
        ...(truncated.length > 0 ? [`cut short by the ${PLAN.budgetMs / 1000} s phase budget (fewer calls than planned): ${truncated.join(", ")}`] : []),
      ],
    };
  });
}

function figures(rows: readonly ResultRow[], pairNames: readonly string[]): Figure[] {
  const row = (name: string) => rows.find((r) => r.name === name)!;
  const floor = row("bare http2 (floor)");
  const ratio = (ours: number, baseline: number) => `${fixed(ours / baseline, 2)}x`;
  const overBareConnect = (name: string): Figure[] => {
    const ours = row(`${name}: service`);
    const bare = row(`${name}: bare connect-node`);
    return [
      {
        figure: `${name} p50`,
        ours: `${fixed(ours.medianMs, 3)} ms = ${ratio(ours.medianMs, bare.medianMs)}`,
        baseline: `bare connect-node ${fixed(bare.medianMs, 3)} ms`,
        target: `<= ${TARGET_OVER_BARE_CONNECT}x`,
        met: ours.medianMs <= TARGET_OVER_BARE_CONNECT * bare.medianMs,
      },
      {
        figure: `${name} CPU per call, server / client`,
        ours: `${fixed(ours.serverCpuUs, 0)} / ${fixed(ours.clientCpuUs, 0)} µs`,
        baseline: `bare connect-node ${fixed(bare.serverCpuUs, 0)} / ${fixed(bare.clientCpuUs, 0)} µs`,
        target: "-",
      },
    ];
  };
  const overFloor = ({ name }: Protocol): Figure => {
    const ours = row(`${name}: service`);
    const bare = row(`${name}: bare connect-node`);
    return {
      figure: `${name} p50 over bare http2`,
      ours: `${ratio(ours.medianMs, floor.medianMs)} (bare connect-node ${ratio(bare.medianMs, floor.medianMs)})`,
      baseline: `bare http2 ${fixed(floor.medianMs, 3)} ms`,
      target: `<= ${TARGET_OVER_BARE_HTTP2}x`,
      met: ours.medianMs <= TARGET_OVER_BARE_HTTP2 * floor.medianMs,
    };
  };
  return [
    ...pairNames.flatMap(overBareConnect),
    overFloor(CONNECT_H2),
    overFloor(GRPC),
    {
      figure: "bare http2 CPU per call, server / client",
      ours: `${fixed(floor.serverCpuUs, 0)} / ${fixed(floor.clientCpuUs, 0)} µs`,
      baseline: "-",
      target: "-",
    },
    metricsCost(row(`${CONNECT_H2.name}: service, metrics on`), row(`${CONNECT_H2.name}: service`)),
    tracingCost(row(`${CONNECT_H2.name}: service, tracing on`), row(`${CONNECT_H2.name}: service`)),
  ];
}

/** Issue 23: Presign traced, every span exported (OTLP/protobuf, batched) to a collector that drops them, beside the same service untraced. */
function tracingCost(on: ResultRow, off: ResultRow): Figure {
  return {
    figure: `${CONNECT_H2.name} p50 and server CPU, tracing on`,
    ours: `${fixed(on.medianMs, 3)} ms = ${fixed(on.medianMs / off.medianMs, 3)}x, ${fixed(on.serverCpuUs, 0)} µs`,
    baseline: `tracing off ${fixed(off.medianMs, 3)} ms, ${fixed(off.serverCpuUs, 0)} µs`,
    target: "-",
  };
}

/**
 * Issue 23: what an untraced service (no OTEL_* variables) pays per request for its
 * instrumentation, the OpenTelemetry API's no-op: the request span started from the headers,
 * the call run in its context and the span ended, timed here in a loop (nothing is installed in
 * this process), as a share of the untraced Presign's server CPU.
 */
function untracedRequestCost(off: ResultRow): Figure {
  const calls = 200_000;
  const req = { method: "POST", httpVersion: "2.0", headers: { "content-type": "application/proto" } } as unknown as NodeRequest;
  const url = new URL("http://localhost/skillenv.assets.v1.AssetService/Presign");
  const record: RequestRecord = {
    protocol: "connect",
    method: "POST",
    path: url.pathname,
    procedure: "skillenv.assets.v1.AssetService/Presign",
    code: "ok",
    httpStatus: 200,
  };
  const once = () => {
    const { span, context } = startRequestSpan(req, url);
    runWithin(context, () => undefined);
    endRequestSpan(span, record);
  };
  for (let i = 0; i < calls / 10; i++) once();
  const started = process.cpuUsage();
  for (let i = 0; i < calls; i++) once();
  const { user, system } = process.cpuUsage(started);
  const perCallUs = (user + system) / calls;
  return {
    figure: "tracing off: the no-op request span, CPU per call",
    ours: `${fixed(perCallUs * 1000, 0)} ns = ${fixed((100 * perCallUs) / off.serverCpuUs, 2)}% of Presign's server CPU`,
    baseline: `tracing off Presign ${fixed(off.serverCpuUs, 0)} µs`,
    target: "not measurable (< 1%)",
    met: perCallUs < off.serverCpuUs / 100,
  };
}

/** Issue 23: Presign with the Prometheus metrics on, beside the same service with them off. */
function metricsCost(on: ResultRow, off: ResultRow): Figure {
  return {
    figure: `${CONNECT_H2.name} p50 and server CPU, metrics on`,
    ours: `${fixed(on.medianMs, 3)} ms = ${fixed(on.medianMs / off.medianMs, 3)}x, ${fixed(on.serverCpuUs, 0)} µs`,
    baseline: `metrics off ${fixed(off.medianMs, 3)} ms, ${fixed(off.serverCpuUs, 0)} µs`,
    target: `<= ${METRICS_TARGET}x`,
    met: on.medianMs <= METRICS_TARGET * off.medianMs,
  };
}

export const protocolsSuite: Suite = {
  name: "protocols",
  title: `Unary Presign (dedup hit) per protocol beside bare connect-node and bare http2: ${PLAN.rounds} x ${COUNTS.perRound} sequential round trips, ${COUNTS.concurrent} calls with ${PLAN.inFlight} in flight`,
  run,
};
