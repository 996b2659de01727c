// MCP (issue 22): what the journal adds to an MCP server's tool call. The reference server
// (@modelcontextprotocol/server-everything over Streamable HTTP, in a process of its own) and
// the service (in another) serve three variants, interleaved (lib/variants.ts):
//   - direct tools/call (baseline): the official SDK's client in this process calls the server's
//     echo tool, sending the same request the service sends (with a progress token);
//   - CallTool -> mcp environment: CallTool (Connect, binary, HTTP/2) of the session's placement
//     of that tool, which the service journals (operation.sent, operation.receipt) and sends as
//     that tools/call with its own SDK client;
//   - MCP endpoint -> mcp environment: the same session's tool called by the SDK's client at the
//     service's /mcp/sessions/{id}, each call a new stateless MCP server inside the service, then
//     the CallTool path above.
import { spawn, type ChildProcess } from "node:child_process";
import * as fs from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import { fromJson, toJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CallToolResultSchema } from "@modelcontextprotocol/sdk/types.js";
import type { SessionService } from "../gen/skillenv/sessions/v1/sessions_pb.js";
import type { Client as ConnectClient } from "@connectrpc/connect";
import { BENCH_API_KEY } from "./lib/child.ts";
import { formatFigures } from "./lib/figures.ts";
import { cpuOf, memoryOf } from "./lib/processes.ts";
import { connectH2, sessionClient, spawnService, withChildren } from "./lib/services.ts";
import type { Suite, SuiteReport } from "./lib/suite.ts";
import { fixed } from "./lib/table.ts";
import { childSide, measureVariants, type Plan, type Side, type Variant, type VariantResult } from "./lib/variants.ts";

/** A tool call through the service costs several times a direct one: its phases get twice the other suites' budget. */
const PLAN: Plan = { rounds: 8, inFlight: 64, budgetMs: 30_000 };
const COUNTS = { warmup: 200, perRound: 150, concurrent: 3000 };
const EVERYTHING = path.resolve(import.meta.dirname, "../node_modules/@modelcontextprotocol/server-everything/dist/index.js");
const MESSAGE = "hello from the bench";
const EXPECTED = `Echo: ${MESSAGE}`;

async function run(): Promise<SuiteReport> {
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "skillenv-bench-mcp-"));
  try {
    return await withChildren(async (started) => {
      const everything = started(await startEverything());
      const service = await spawnService(dataDir, { SERVICE_MCP_ALLOW: everything.origin });
      started(service.child);
      const sessions = sessionClient(connectH2(service.url));
      const sessionId = await mcpSession(sessions, everything.url);
      const direct = await connectMcp(everything.url, {});
      const endpoint = await connectMcp(new URL(`/mcp/sessions/${sessionId}`, service.url).href, { authorization: `Bearer ${BENCH_API_KEY}` });
      const server = childSide("service", service.child);
      const mcpServer = everything.side;
      try {
        const startedAt = performance.now();
        const results = await measureVariants(
          [
            { name: "mcp: direct tools/call (baseline)", call: toolsCaller(direct, "echo"), sides: [mcpServer], ...COUNTS },
            { name: "mcp: CallTool -> mcp environment", call: callToolCaller(sessions, sessionId), sides: [server, mcpServer], ...COUNTS },
            { name: "mcp: MCP endpoint -> mcp environment", call: toolsCaller(endpoint, "ev__echo"), sides: [server, mcpServer], ...COUNTS },
          ] satisfies Variant[],
          PLAN,
        );
        process.stderr.write(`  calls: ${((performance.now() - startedAt) / 1000).toFixed(1)} s\n`);
        return report(results);
      } finally {
        await Promise.all([direct.close(), endpoint.close()]);
      }
    });
  } finally {
    await fs.rm(dataDir, { recursive: true, force: true, maxRetries: 5, retryDelay: 50 });
  }
}

function report(results: VariantResult[]): SuiteReport {
  const rows = results.map((result) => result.row);
  const [direct, callTool, endpoint] = [rows[0]!, rows[1]!, rows[2]!];
  const ratio = (ours: number, baseline: number) => `${fixed(ours / baseline, 2)}x`;
  const mcpServerCpu = (index: number) => fixed(results[index]!.cpuUsPerCall.get("mcp server")!, 0);
  const truncated = results.filter((result) => result.truncated).map((result) => result.row.name);
  return {
    rows,
    notes: [
      "",
      formatFigures([
        {
          figure: "MCP tool call p50 through a session (CallTool)",
          ours: `${fixed(callTool.medianMs, 3)} ms = ${ratio(callTool.medianMs, direct.medianMs)}`,
          baseline: `direct ${fixed(direct.medianMs, 3)} ms`,
          target: "-",
        },
        {
          figure: "what the session adds p50 (CallTool - direct)",
          ours: `${fixed(callTool.medianMs - direct.medianMs, 3)} ms`,
          baseline: "-",
          target: "-",
        },
        {
          figure: "MCP tool call p99 through a session (CallTool)",
          ours: `${fixed(callTool.p99Ms, 3)} ms`,
          baseline: `direct ${fixed(direct.p99Ms, 3)} ms`,
          target: "-",
        },
        {
          figure: "MCP tool call p50 through the service's MCP endpoint",
          ours: `${fixed(endpoint.medianMs, 3)} ms = ${ratio(endpoint.medianMs, direct.medianMs)}`,
          baseline: `direct ${fixed(direct.medianMs, 3)} ms`,
          target: "-",
        },
        {
          figure: `calls/s, ${PLAN.inFlight} in flight, CallTool`,
          ours: fixed(callTool.callsPerSec, 0),
          baseline: `direct ${fixed(direct.callsPerSec, 0)}`,
          target: "-",
        },
        {
          figure: `calls/s, ${PLAN.inFlight} in flight, MCP endpoint`,
          ours: fixed(endpoint.callsPerSec, 0),
          baseline: `direct ${fixed(direct.callsPerSec, 0)}`,
          target: "-",
        },
      ]),
      "",
      `Rows: ${PLAN.rounds} interleaved rounds of ${COUNTS.perRound} sequential calls per variant (order rotated each round, ${COUNTS.warmup} warm-up calls first), ` +
        `then ${COUNTS.concurrent} calls with ${PLAN.inFlight} in flight per variant. Each call is server-everything's echo of ${JSON.stringify(MESSAGE)}, its text checked.`,
      `"direct" = the official SDK's client (@modelcontextprotocol/sdk, one MCP session over Streamable HTTP) -> tools/call with a progress token -> the server's answer. ` +
        `"CallTool -> mcp environment" = Connect binary h2 -> the service's HTTP layer and auth gate -> session checks -> journal operation.sent (synced) -> ` +
        `the binding's SDK client (one MCP session per binding) -> the same tools/call -> journal operation.receipt (synced) -> response. ` +
        `"MCP endpoint" = the SDK's client at /mcp/sessions/{id} (bearer key; stateless: a server made per request, the answer as server-sent events when a progress token is sent) -> the CallTool path.`,
      `"server" columns: the service for the session rows, the MCP server for direct (from /proc: RSS, and CPU in 10 ms ticks); the MCP server's own CPU per call: ` +
        `direct ${mcpServerCpu(0)} µs, through CallTool ${mcpServerCpu(1)} µs, through the endpoint ${mcpServerCpu(2)} µs. Client CPU = this process's main thread.`,
      ...(truncated.length > 0 ? [`cut short by the ${PLAN.budgetMs / 1000} s phase budget (fewer calls than planned): ${truncated.join(", ")}`] : []),
    ],
  };
}

/** server-everything over Streamable HTTP in a process of its own, read through /proc. */
async function startEverything(): Promise<{ url: string; origin: string; side: Side; stop(): Promise<void> }> {
  const child: ChildProcess = spawn(process.execPath, [EVERYTHING, "streamableHttp"], {
    // Port 0 is not taken: the server logs the port it was given, so pick one the kernel frees.
    env: { PATH: process.env.PATH ?? "", PORT: String(await freePort()) },
    stdio: ["ignore", "ignore", "pipe"],
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  let stderr = "";
  const port = await new Promise<string>((resolve, reject) => {
    child.stderr!.on("data", (chunk: Buffer) => {
      stderr += chunk.toString();
      const listening = /listening on port (\d+)/.exec(stderr);
      if (listening) resolve(listening[1]!);
    });
    void exited.then(() => reject(new Error(`server-everything exited before listening:\n${stderr}`)));
  });
  const pid = child.pid!;
  const origin = `http://127.0.0.1:${port}`;
  return {
    url: `${origin}/mcp`,
    origin,
    side: { name: "mcp server", stats: async () => ({ rssBytes: memoryOf([pid]).rss, heapUsedBytes: 0, cpuMicros: cpuOf([pid]) }) },
    stop: async () => {
      child.kill("SIGKILL");
      await exited;
    },
  };
}

async function freePort(): Promise<number> {
  const { createServer } = await import("node:net");
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** A session binding the server with only its echo tool, set up at creation. */
async function mcpSession(sessions: ConnectClient<typeof SessionService>, url: string): Promise<string> {
  const { session } = await sessions.createSession({ environments: [{ name: "ev", kind: { case: "mcp", value: { url, tools: ["echo"] } } }] });
  if (session?.state !== "ready") throw new Error(`session ${session?.id}: state ${session?.state}, expected ready`);
  return session.id;
}

async function connectMcp(url: string, headers: Record<string, string>): Promise<Client> {
  const client = new Client({ name: "skillenv-bench", version: "0.1.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }));
  return client;
}

/** tools/call of `tool` with a progress token (as the service sends it), checked: the echo's text must come back. */
function toolsCaller(client: Client, tool: string): () => Promise<void> {
  return async () => {
    const result = await client.request({ method: "tools/call", params: { name: tool, arguments: { message: MESSAGE } } }, CallToolResultSchema, {
      onprogress: () => undefined,
    });
    const text = result.content[0]?.type === "text" ? result.content[0].text : undefined;
    if (result.isError || (text !== EXPECTED && !text?.includes(EXPECTED))) throw new Error(`tools/call ${tool}: unexpected result ${JSON.stringify(result)}`);
  };
}

/** CallTool of the session's placement of echo, checked: returned with the echo's text. */
function callToolCaller(sessions: ConnectClient<typeof SessionService>, sessionId: string): () => Promise<void> {
  const input = fromJson(ValueSchema, { message: MESSAGE });
  return async () => {
    const { receipt } = await sessions.callTool({ sessionId, tool: "ev__echo", input });
    const outcome = receipt?.outcome;
    const output = outcome?.case === "returned" ? (toJson(ValueSchema, outcome.value.output!) as { content?: string }) : undefined;
    if (output?.content !== EXPECTED) throw new Error(`CallTool ev__echo: unexpected receipt ${JSON.stringify(outcome?.value)}`);
  };
}

export const mcpSuite: Suite = {
  name: "mcp",
  title: `An MCP tool call through a session (CallTool, and the service's MCP endpoint) beside a direct call with the SDK's client: sequential round trips, calls/s with ${PLAN.inFlight} in flight`,
  run,
};
