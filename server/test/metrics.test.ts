/**
 * The Prometheus metrics, scraped by a real Prometheus (Debian's `prometheus`, started here) while
 * a session calls tools and a run completes; the exposition checked by `promtool check metrics`.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import * as fs from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import { once } from "node:events";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startScriptedProvider, type ScriptedProvider } from "../../testing/scripted-provider/index.ts";
import { buildTestComponents } from "./helpers/pool.ts";
import { freePort } from "./helpers/ports.ts";
import { KEY_A, startTestService, type TestService } from "./helpers/service.ts";
import { admitTool, eventsUntil, runClient, runEnded, sessionClient } from "./helpers/sessions.ts";

beforeAll(() => buildTestComponents(), 600_000);

let provider: ScriptedProvider;
let service: TestService;
let prometheus: { url: string; child: ChildProcess; dir: string };

beforeAll(async () => {
  provider = await startScriptedProvider();
  service = await startTestService({ SERVICE_METRICS_LISTEN: "127.0.0.1:0", SERVICE_ANTHROPIC_BASE_URL: provider.anthropicBaseUrl });
  prometheus = await startPrometheus(service.metricsUrl!);
}, 120_000);

afterAll(async () => {
  prometheus?.child.kill("SIGTERM");
  if (prometheus) await once(prometheus.child, "exit");
  await fs.rm(prometheus?.dir ?? "", { recursive: true, force: true });
  await service?.close();
  await provider?.close();
});

/** Prometheus scraping `target` every second, on a free loopback port, ready once /-/ready says so. */
async function startPrometheus(target: string): Promise<{ url: string; child: ChildProcess; dir: string }> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), "skillenv-prometheus-"));
  const config = path.join(dir, "prometheus.yml");
  await fs.writeFile(
    config,
    `global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: skillenv\n    static_configs:\n      - targets: ["${new URL(target).host}"]\n`,
  );
  const port = await freePort();
  const child = spawn(
    "/usr/bin/prometheus",
    [`--config.file=${config}`, `--storage.tsdb.path=${path.join(dir, "data")}`, `--web.listen-address=127.0.0.1:${port}`],
    { stdio: "ignore" },
  );
  const url = `http://127.0.0.1:${port}`;
  await until(async () => (await fetch(`${url}/-/ready`).catch(() => undefined))?.status === 200);
  return { url, child, dir };
}

/** Polls `condition` until it holds (the test's timeout bounds it): Prometheus scrapes on its own clock. */
async function until(condition: () => Promise<boolean>): Promise<void> {
  while (!(await condition())) await new Promise((resolve) => setTimeout(resolve, 100));
}

/** A PromQL instant query's value, or undefined while it has none. */
async function query(promql: string): Promise<number | undefined> {
  const response = await fetch(`${prometheus.url}/api/v1/query?query=${encodeURIComponent(promql)}`);
  const body = (await response.json()) as { data: { result: Array<{ value: [number, string] }> } };
  const value = body.data.result[0]?.value[1];
  return value === undefined ? undefined : Number(value);
}

/** Waits until Prometheus answers `promql` with `expected`, and returns what it answered last. */
async function scraped(promql: string, expected: (value: number) => boolean): Promise<number> {
  let value: number | undefined;
  await until(async () => (value = await query(promql)) !== undefined && expected(value));
  return value!;
}

describe("Prometheus metrics (SERVICE_METRICS_LISTEN)", () => {
  it("are scraped by Prometheus while a session calls tools and a run completes", async () => {
    const sessions = sessionClient(service.url, KEY_A);
    const tool = await admitTool(service.url, KEY_A, "echo-wat");
    const { session } = await sessions.createSession({
      environments: [{ name: "box", kind: { case: "service", value: {} } }],
      tools: [{ name: "echo", environment: "box", implementation: { kind: { case: "tool", value: tool } } }],
    });
    for (let call = 0; call < 3; call++)
      await sessions.callTool({ sessionId: session!.id, tool: "echo", input: { kind: { case: "stringValue", value: "hi" } } });
    provider.script("metrics-model", [{ text: "Done.", usage: { inputTokens: 40, outputTokens: 6 } }]);
    const { run } = await runClient(service.url, KEY_A).createRun({
      sessionId: session!.id,
      run: { model: { provider: "anthropic", name: "metrics-model", maxTokens: 0 }, message: "go", providerKeys: { anthropic: "sk-metrics" } } as never,
    });
    await eventsUntil(sessions, session!.id, runEnded(run!.id));

    expect(await scraped('skillenv_rpc_requests_total{protocol="connect",service="SessionService",method="CallTool",code="ok"}', (n) => n >= 3)).toBe(3);
    expect(await scraped('skillenv_runs_total{status="completed",provider="anthropic"}', (n) => n >= 1)).toBe(1);
    expect(await scraped('skillenv_model_tokens_total{provider="anthropic",direction="input"}', (n) => n >= 40)).toBe(40);
    expect(await scraped('skillenv_pool_slots{kind="tool",state="free"}', (n) => n > 0)).toBeGreaterThan(0);
    expect(await scraped('sum(skillenv_pool_workers{state="ready"})', (n) => n > 0)).toBeGreaterThan(0);
    expect(await scraped('skillenv_operations_total{operation="execute",environment_kind="service",outcome="returned",code=""}', (n) => n >= 3)).toBe(3);
    expect(await scraped('skillenv_operation_duration_seconds_count{operation="execute",environment_kind="service"}', (n) => n >= 3)).toBe(3);
    // The same three calls as the pool saw them: each an invocation of a tool, timed, its fuel counted.
    expect(await scraped('skillenv_pool_invocations_total{kind="tool",outcome="returned"}', (n) => n >= 3)).toBe(3);
    expect(await scraped('skillenv_pool_invocation_duration_seconds_count{kind="tool"}', (n) => n >= 3)).toBe(3);
    expect(await scraped('skillenv_pool_invocation_fuel_units_count{kind="tool"}', (n) => n >= 3)).toBe(3);
    expect(await scraped('skillenv_pool_invocation_fuel_units_sum{kind="tool"}', (n) => n > 0)).toBeGreaterThan(0);
    expect(await scraped('skillenv_sessions{lifecycle="active"}', (n) => n >= 1)).toBeGreaterThanOrEqual(1);
    expect(await scraped("skillenv_operations_in_flight", (n) => n === 0)).toBe(0);
    expect(await scraped("skillenv_hosts_attached", (n) => n === 0)).toBe(0);
    // The run's one model call, and the store's group commits (every journaled event among their writes).
    expect(await scraped('skillenv_model_calls_total{provider="anthropic",code="ok"}', (n) => n >= 1)).toBe(1);
    expect(await scraped('skillenv_model_call_duration_seconds_count{provider="anthropic"}', (n) => n >= 1)).toBe(1);
    const writes = await scraped("skillenv_store_writes_total", (n) => n > 0);
    const commits = await scraped("skillenv_store_commit_duration_seconds_count", (n) => n > 0);
    expect(commits).toBeLessThanOrEqual(writes);
    expect(await scraped("skillenv_store_commit_writes_sum", (n) => n === writes)).toBe(writes);
    // The test's clients hold HTTP/2 connections to the API port; no body is held at rest.
    expect(await scraped("skillenv_http2_connections", (n) => n >= 1)).toBeGreaterThanOrEqual(1);
    expect(await scraped("skillenv_http_connections", (n) => n >= 1)).toBeGreaterThanOrEqual(await scraped("skillenv_http2_connections", () => true));
    expect(await scraped("skillenv_request_body_bytes", (n) => n === 0)).toBe(0);
    // A latency histogram per method: the calls are counted in it too.
    expect(await scraped('skillenv_rpc_duration_seconds_count{service="SessionService",method="CallTool"}', (n) => n >= 3)).toBe(3);
  });

  it("label a refusal with its stable code and an unknown path with no caller-chosen text", async () => {
    const refused = await fetch(`${service.url}/v1/sessions/ses_00000000000000000000000000`, { headers: { authorization: `Bearer ${KEY_A}` } });
    expect(refused.status).toBe(404);
    await fetch(`${service.url}/no/such/path/chosen-by-the-caller`);
    await scraped('skillenv_rpc_requests_total{protocol="rest",service="SessionService",method="GetSession",code="session_not_found"}', (n) => n >= 1);
    const exposition = await (await fetch(`${service.metricsUrl}/metrics`)).text();
    expect(exposition).toContain('service="unknown",method="unknown"');
    expect(exposition).not.toContain("chosen-by-the-caller");
  });

  it("label MCP requests with service mcp and the JSON-RPC method, from a fixed list", async () => {
    const post = (message: object) =>
      fetch(`${service.url}/mcp`, {
        method: "POST",
        headers: { authorization: `Bearer ${KEY_A}`, "content-type": "application/json", accept: "application/json, text/event-stream" },
        body: JSON.stringify({ jsonrpc: "2.0", ...message }),
      });
    expect((await post({ id: 1, method: "tools/list" })).status).toBe(200);
    // A method no MCP client sends: a JSON-RPC error, counted under "other", its name never a label.
    expect((await post({ id: 2, method: "chosen-by-the-caller/x" })).status).toBe(200);
    // Refused before any message is read.
    expect((await fetch(`${service.url}/mcp`, { method: "GET", headers: { authorization: `Bearer ${KEY_A}` } })).status).toBe(405);
    await scraped('skillenv_rpc_requests_total{protocol="mcp",service="mcp",method="tools/list",code="ok"}', (n) => n >= 1);
    await scraped('skillenv_rpc_requests_total{protocol="mcp",service="mcp",method="other"}', (n) => n >= 1);
    await scraped('skillenv_rpc_requests_total{protocol="mcp",service="mcp",method="none",code="mcp_method_not_allowed"}', (n) => n >= 1);
    const exposition = await (await fetch(`${service.metricsUrl}/metrics`)).text();
    expect(exposition).not.toContain("chosen-by-the-caller");
    expect(exposition).not.toMatch(/protocol="mcp",service="unknown"/);
  });

  it("pass promtool check metrics, and are served on their own port only", async () => {
    const exposition = await (await fetch(`${service.metricsUrl}/metrics`)).text();
    const check = spawnSync("/usr/bin/promtool", ["check", "metrics"], { input: exposition, encoding: "utf8" });
    expect({ status: check.status, output: `${check.stdout}${check.stderr}` }).toEqual({ status: 0, output: "" });
    expect((await fetch(`${service.url}/metrics`)).status).toBe(404);
    expect((await fetch(`${service.metricsUrl}/v1/sessions`)).status).toBe(404);
  });
});
