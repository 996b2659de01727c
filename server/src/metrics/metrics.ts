import * as http from "node:http";
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from "prom-client";
import type { InvocationKind, PoolStats } from "../engine/index.ts";
import { isErrorCode } from "../errors/index.ts";
import type { RequestRecord } from "../http/index.ts";

/**
 * The service's Prometheus metrics (docs/operations.md, "Metrics"). Names follow Prometheus'
 * conventions (`skillenv_` prefix, base units in the name, `_total` counters); every label has a
 * bounded set of values: protocols, API methods, catalogue codes, kinds, statuses, providers.
 * No label carries an id, a workspace, a path a caller chose, or anything a caller sent.
 */
export class Metrics {
  readonly registry = new Registry();
  /** Gauges brought up to date when scraped. */
  readonly #beforeScrape: Array<() => void> = [];
  readonly #requests: Counter<"protocol" | "service" | "method" | "code">;
  readonly #duration: Histogram<"protocol" | "service" | "method">;
  readonly #storageErrors: Counter;
  readonly #runs: Counter<"status" | "provider">;
  readonly #rounds: Counter<"provider">;
  readonly #toolCalls: Counter<"provider">;
  readonly #tokens: Counter<"provider" | "direction">;
  readonly #operations: Counter<"operation" | "environment_kind" | "outcome" | "code">;
  readonly #operationDuration: Histogram<"operation" | "environment_kind">;
  readonly #modelCalls: Counter<"provider" | "code">;
  readonly #modelDuration: Histogram<"provider">;
  readonly #commitDuration: Histogram;
  readonly #commitWrites: Histogram;
  readonly #storeWrites: Counter;
  readonly #invocations: Counter<"kind" | "outcome">;
  readonly #invocationDuration: Histogram<"kind">;
  readonly #invocationFuel: Histogram<"kind">;

  constructor() {
    collectDefaultMetrics({ register: this.registry, prefix: "skillenv_process_" });
    // Gauges that prom-client names like counters (`_total`), which promtool refuses: left out.
    for (const name of ["active_handles_total", "active_requests_total", "active_resources_total"]) {
      this.registry.removeSingleMetric(`skillenv_process_nodejs_${name}`);
    }
    const registers = [this.registry];
    this.#requests = new Counter({
      name: "skillenv_rpc_requests_total",
      help: "Requests answered, by protocol (grpc, grpc-web, connect, rest, object-store, mcp, http), API service and method, and stable code (ok, or the error catalogue's).",
      labelNames: ["protocol", "service", "method", "code"],
      registers,
    });
    this.#duration = new Histogram({
      name: "skillenv_rpc_duration_seconds",
      help: "Time from a request's arrival until its response is over, by protocol, API service and method.",
      labelNames: ["protocol", "service", "method"],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers,
    });
    this.#storageErrors = new Counter({
      name: "skillenv_storage_errors_total",
      help: "Calls that failed because the metadata or blob store did (answered storage_unavailable).",
      registers,
    });
    this.#runs = new Counter({
      name: "skillenv_runs_total",
      help: "Runs that ended, by status (completed, failed, cancelled) and model provider.",
      labelNames: ["status", "provider"],
      registers,
    });
    this.#rounds = new Counter({
      name: "skillenv_run_rounds_total",
      help: "Model calls of the runs that ended, by provider.",
      labelNames: ["provider"],
      registers,
    });
    this.#toolCalls = new Counter({
      name: "skillenv_run_tool_calls_total",
      help: "Tool calls of the runs that ended, by provider.",
      labelNames: ["provider"],
      registers,
    });
    this.#operations = new Counter({
      name: "skillenv_operations_total",
      help: "Session operations that ended, by operation, environment kind (service, host, extension), outcome (returned, failure, unknown) and a failure's catalogue code (tool: the environment's own).",
      labelNames: ["operation", "environment_kind", "outcome", "code"],
      registers,
    });
    this.#operationDuration = new Histogram({
      name: "skillenv_operation_duration_seconds",
      help: "Session operations from their journaled send to their journaled terminal receipt, by operation and environment kind.",
      labelNames: ["operation", "environment_kind"],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300],
      registers,
    });
    this.#invocations = new Counter({
      name: "skillenv_pool_invocations_total",
      help: "Invocations the worker pool answered, by artifact kind (tool, program, agent_loop) and outcome (returned, failure, unknown).",
      labelNames: ["kind", "outcome"],
      registers,
    });
    this.#invocationDuration = new Histogram({
      name: "skillenv_pool_invocation_duration_seconds",
      help: "Invocations from the pool taking them (a preparation on first use included) to their receipt, by artifact kind.",
      labelNames: ["kind"],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300],
      registers,
    });
    this.#invocationFuel = new Histogram({
      name: "skillenv_pool_invocation_fuel_units",
      help: "Fuel an invocation used (docs/fuel.md; SERVICE_ENV_FUEL per call), by artifact kind; invocations that ended without a count (unknown) are left out.",
      labelNames: ["kind"],
      buckets: [1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10],
      registers,
    });
    this.#modelCalls = new Counter({
      name: "skillenv_model_calls_total",
      help: "Model calls that ended, by provider and code (ok, or the model error's: model_rate_limited, model_timeout, model_cancelled, ...).",
      labelNames: ["provider", "code"],
      registers,
    });
    this.#modelDuration = new Histogram({
      name: "skillenv_model_call_duration_seconds",
      help: "Model calls from the request to the end of the streamed reply (retries before the reply included), by provider.",
      labelNames: ["provider"],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300],
      registers,
    });
    this.#storeWrites = new Counter({
      name: "skillenv_store_writes_total",
      help: "Atomic writes committed to the metadata store (journal appends, run and record updates), each durable before it was acknowledged.",
      registers,
    });
    this.#commitDuration = new Histogram({
      name: "skillenv_store_commit_duration_seconds",
      help: "Group commits of the metadata store (one synced LevelDB batch, or one PostgreSQL transaction), from start until durable.",
      buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1],
      registers,
    });
    this.#commitWrites = new Histogram({
      name: "skillenv_store_commit_writes",
      help: "Writes per group commit of the metadata store (how many callers' batches one sync served).",
      buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256],
      registers,
    });
    this.#tokens = new Counter({
      name: "skillenv_model_tokens_total",
      help: "Tokens the model providers reported for the runs that ended, by provider and direction (input, output).",
      labelNames: ["provider", "direction"],
      registers,
    });
  }

  /**
   * One session operation that ended, by kind (execute, setup, stage, cancel, detach, teardown),
   * its environment's kind and its outcome; a failure's code only when it is the catalogue's (a
   * tool's own codes are any text, so they count as "tool").
   */
  operation(operation: { kind: string; environmentKind: string; receipt: { outcome: string; code?: string }; seconds: number }): void {
    const { kind, environmentKind, receipt } = operation;
    const code = receipt.outcome !== "failure" ? "" : receipt.code !== undefined && isErrorCode(receipt.code) ? receipt.code : "tool";
    this.#operations.inc({ operation: kind, environment_kind: environmentKind, outcome: receipt.outcome, code });
    this.#operationDuration.observe({ operation: kind, environment_kind: environmentKind }, operation.seconds);
  }

  /** One invocation of the worker pool, from its receipt (never its input or output). */
  invocation(invocation: { kind: InvocationKind; receipt: { outcome: string; durationMs: number; fuelUsed?: number } }): void {
    const { kind, receipt } = invocation;
    this.#invocations.inc({ kind, outcome: receipt.outcome });
    this.#invocationDuration.observe({ kind }, receipt.durationMs / 1000);
    if (receipt.fuelUsed !== undefined) this.#invocationFuel.observe({ kind }, receipt.fuelUsed);
  }

  /** One answered request, from its log record. */
  request(record: RequestRecord, durationSeconds: number): void {
    const [service, method] = procedureLabels(record.procedure);
    this.#requests.inc({ protocol: record.protocol, service, method, code: record.code });
    this.#duration.observe({ protocol: record.protocol, service, method }, durationSeconds);
  }

  storageError(): void {
    this.#storageErrors.inc();
  }

  /** One model call that ended; `provider` is one the server is configured with, `code` a model error's (bounded). */
  modelCall(call: { provider: string; code: string; seconds: number }): void {
    this.#modelCalls.inc({ provider: call.provider, code: call.code });
    this.#modelDuration.observe({ provider: call.provider }, call.seconds);
  }

  /** One group the metadata store committed. */
  storeCommit(group: { writes: number; seconds: number }): void {
    this.#storeWrites.inc(group.writes);
    this.#commitWrites.observe(group.writes);
    this.#commitDuration.observe(group.seconds);
  }

  /** One run that ended. `provider` is one the server is configured with, so bounded. */
  runEnded(run: { status: string; provider: string; rounds: number; toolCalls: number; usage: { inputTokens: number; outputTokens: number } }): void {
    const provider = run.provider;
    this.#runs.inc({ status: run.status, provider });
    this.#rounds.inc({ provider }, run.rounds);
    this.#toolCalls.inc({ provider }, run.toolCalls);
    this.#tokens.inc({ provider, direction: "input" }, run.usage.inputTokens);
    this.#tokens.inc({ provider, direction: "output" }, run.usage.outputTokens);
  }

  /** Refusals of workspaces past their share being held before they are answered (WorkspaceRateLimiter), read at each scrape. */
  observeHeldRefusals(held: () => number): void {
    const gauge = new Gauge({
      name: "skillenv_workspace_refusals_held",
      help: "Refusals of workspaces past their share of requests, held before they are answered.",
      registers: [this.registry],
    });
    this.#beforeScrape.push(() => gauge.set(held()));
  }

  /** The worker pool's gauges, read from `stats` at each scrape. */
  observePool(stats: () => PoolStats): void {
    const registers = [this.registry];
    const slots = new Gauge({
      name: "skillenv_pool_slots",
      help: "Invocation slots of the live workers, by kind (tool, agent_loop) and state (busy, free).",
      labelNames: ["kind", "state"],
      registers,
    });
    const waiting = new Gauge({ name: "skillenv_pool_queue_length", help: "Invocations waiting for a slot, by kind.", labelNames: ["kind"], registers });
    const workers = new Gauge({ name: "skillenv_pool_workers", help: "Worker processes, by state.", labelNames: ["state"], registers });
    const prepared = new Gauge({ name: "skillenv_pool_prepared_components", help: "Components prepared and kept compiled on the workers.", registers });
    const replacements = new Gauge({
      name: "skillenv_pool_worker_replacements",
      help: "Workers replaced after a crash or a deadline kill since the server started.",
      registers,
    });
    // One read of the pool per scrape, for every gauge.
    this.#beforeScrape.push(() => {
      const now = stats();
      for (const [kind, busy, capacity, queued] of [
        ["tool", now.inFlight.tools, now.capacity.tools, now.waiting.tools],
        ["agent_loop", now.inFlight.agentLoops, now.capacity.agentLoops, now.waiting.agentLoops],
      ] as const) {
        slots.set({ kind, state: "busy" }, busy);
        slots.set({ kind, state: "free" }, Math.max(0, capacity - busy));
        waiting.set({ kind }, queued);
      }
      workers.reset();
      for (const worker of now.workers) workers.inc({ state: worker.state });
      prepared.set(now.prepared);
      replacements.set(now.replacements);
    });
  }

  /** Sessions this process holds, by lifecycle, their operations in flight, and attached hosts, read at each scrape. */
  observeSessions(census: () => { sessions: Map<string, number>; operationsInFlight: number }, attachedHosts: () => number): void {
    const registers = [this.registry];
    const sessions = new Gauge({
      name: "skillenv_sessions",
      help: "Sessions this process holds in memory (in use, and the most recently used others within SERVICE_SESSION_CACHE_MIB), by lifecycle (active, ending, deleting, ended).",
      labelNames: ["lifecycle"],
      registers,
    });
    const inFlight = new Gauge({ name: "skillenv_operations_in_flight", help: "Session operations sent and not yet answered.", registers });
    const hosts = new Gauge({ name: "skillenv_hosts_attached", help: "Host connections attached to host environments.", registers });
    this.#beforeScrape.push(() => {
      const now = census();
      sessions.reset();
      for (const [lifecycle, count] of now.sessions) sessions.set({ lifecycle }, count);
      inFlight.set(now.operationsInFlight);
      hosts.set(attachedHosts());
    });
  }

  /** The API port's connections and requests, and the request bodies held in memory, read at each scrape. */
  observeHttp(
    listener: () => { connections: number; http2Connections: number; requestsInFlight: number },
    bodies: () => { bytes: number; refusals: number },
  ): void {
    const registers = [this.registry];
    const connections = new Gauge({ name: "skillenv_http_connections", help: "Open connections to the API port (TCP), of all protocols.", registers });
    const http2 = new Gauge({ name: "skillenv_http2_connections", help: "Open connections to the API port speaking HTTP/2.", registers });
    const inFlight = new Gauge({
      name: "skillenv_http_requests_in_flight",
      help: "Requests (HTTP/2 streams and HTTP/1.1 requests) not answered yet.",
      registers,
    });
    const held = new Gauge({ name: "skillenv_request_body_bytes", help: "Request body bytes held in memory (the body budget in use).", registers });
    const refused = new Counter({
      name: "skillenv_request_body_refusals_total",
      help: "Requests refused server_busy because their body would pass the body budget (in all, or of their connection).",
      registers,
    });
    let refusalsSeen = 0;
    this.#beforeScrape.push(() => {
      const port = listener();
      connections.set(port.connections);
      http2.set(port.http2Connections);
      inFlight.set(port.requestsInFlight);
      const budget = bodies();
      held.set(budget.bytes);
      refused.inc(budget.refusals - refusalsSeen);
      refusalsSeen = budget.refusals;
    });
  }

  /** The exposition, in Prometheus' text format. */
  async exposition(): Promise<string> {
    for (const update of this.#beforeScrape) update();
    return this.registry.metrics();
  }
}

const MCP_PREFIX = "mcp/";

/**
 * `pkg.Service/Method` as its service's short name and the method; the MCP endpoint's
 * `mcp/<JSON-RPC method>` as service `mcp` and the method, which the endpoint bounds to a list
 * (or `other`, `response`, `none`); "unknown" for anything else (a 404).
 */
function procedureLabels(procedure: string | undefined): [service: string, method: string] {
  if (procedure?.startsWith(MCP_PREFIX)) return ["mcp", procedure.slice(MCP_PREFIX.length)];
  const match = procedure === undefined ? null : /^\/?(?:[a-z0-9_]+\.)*([A-Za-z0-9_]+)\/([A-Za-z0-9_]+)$/.exec(procedure);
  return match ? [match[1]!, match[2]!] : ["unknown", "unknown"];
}

/**
 * The scrape endpoint: `GET /metrics` on a listener of its own (`SERVICE_METRICS_LISTEN`), apart
 * from the API's port, unauthenticated as scrape ports conventionally are; anything else is 404.
 */
export async function serveMetrics(metrics: Metrics, address: { host: string; port: number }): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer((req, res) => {
    if (req.method !== "GET" || new URL(req.url ?? "/", "http://metrics").pathname !== "/metrics") {
      res.writeHead(404, { "content-type": "text/plain" }).end("not found: the metrics are at GET /metrics\n");
      return;
    }
    metrics.exposition().then(
      (text) => res.writeHead(200, { "content-type": metrics.registry.contentType }).end(text),
      () => res.writeHead(500, { "content-type": "text/plain" }).end("the metrics could not be collected\n"),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(address.port, address.host, () => resolve());
  });
  const { port } = server.address() as { port: number };
  return {
    url: `http://${address.host.includes(":") ? `[${address.host}]` : address.host}:${port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
