// The hostile suite's second part (issue #18): a well-behaved workspace's CallTool latency while
// another workspace of the same service floods it, beside the same calls on the unloaded service.
// The noisy workspace, on its own thread (this file, as a worker), keeps at all times:
//   - guests that compute until their deadline (loop-wat, 5 s): they hold worker threads;
//   - guests blocked on a clock (wasi-probe-js, pollable.block): they hold slots, not threads;
//   - bursts of parallel calls far beyond its share (a fan-out), mostly queued or refused;
//   - custom agent-loop runs that emit 1 MiB progress events as fast as they can;
//   - lists of its largest sessions, a thousand at a time.
// The measured workspace calls echo-wat, paced, checked on every call.
// A tenant's client runs on the tenant's machine; here it shares the service's two cores. So the
// noisy workspace's thread runs at the lowest priority (nice 19): what its client spends parsing
// pages and making requests is the machine's cost, not the service's, and is kept out of what B
// measures. Measured before the service held refusals, at nice 19 A ended as many activities
// (3,200-7,500 a phase, mostly refusals) as at the service's priority (5,060-5,720).
import { randomBytes } from "node:crypto";
import { readlinkSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { setPriority } from "node:os";
import { setTimeout as sleep } from "node:timers/promises";
import { isMainThread, parentPort, workerData } from "node:worker_threads";
import { fromJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { createNodeTransport } from "@skillenv/client/node";
import { createClient } from "@connectrpc/connect";
import { RunService } from "../gen/skillenv/sessions/v1/runs_pb.js";
import { SessionService } from "../gen/skillenv/sessions/v1/sessions_pb.js";
import { loadSettings } from "../server/src/config/index.ts";
import { BENCH_API_KEY } from "./lib/child.ts";
import { admitTool, createEchoSession, echoCaller, sessionClient, connectH2, spawnService } from "./lib/services.ts";
import { summarize } from "./lib/stats.ts";
import type { ResultRow } from "./lib/suite.ts";
import { pacedLatencies, startAttackers } from "./lib/attackers.ts";

const NOISY_KEY = "noisy-key-0123456789abcdef";
const NOISY_ROLE = "noisy-workspace";
const WARMUP_CALLS = 100;
const MEASURED_CALLS = 600;
const PACE_MS = 10;
const PHASE_BUDGET_MS = 90_000;
/** What the noisy workspace keeps going at all times. */
const LOOPS = 8;
const SLEEPERS = 32;
const FAN_OUT = 200;
const EMITTING_RUNS = 2;
const LISTERS = 2;
const RAMP_UP_MS = 3_000;

interface NoisyStats {
  calls: Record<string, number>;
}

if (!isMainThread && (workerData as { role?: string } | null)?.role === NOISY_ROLE) {
  void runNoisyWorkspace((workerData as { url: string }).url);
}

/** The attacker: every activity re-issues itself as soon as it ends, until told to stop. */
async function runNoisyWorkspace(url: string): Promise<void> {
  yieldToTheService();
  const transport = createNodeTransport({ baseUrl: url, apiKey: NOISY_KEY, protocol: "connect", httpVersion: "2", useBinaryFormat: true });
  const sessions = createClient(SessionService, transport);
  const runs = createClient(RunService, transport);
  const admit = async (name: string, kind: "tools" | "agentloops" = "tools") => {
    const body = await readFile(new URL(`../build/components/${name}.wasm`, import.meta.url));
    const response = await fetch(`${url}/v1/${kind}`, {
      method: "POST",
      headers: { authorization: `Bearer ${NOISY_KEY}`, "content-type": "application/wasm" },
      body,
    });
    return ((await response.json()) as { id: string }).id;
  };
  const admitProgram = async (source: string) => {
    const response = await fetch(`${url}/v1/programs`, {
      method: "POST",
      headers: { authorization: `Bearer ${NOISY_KEY}`, "content-type": "text/plain" },
      body: source,
    });
    return ((await response.json()) as { id: string }).id;
  };
  const [loop, probe, echo, runtime] = await Promise.all([
    admit("loop-wat"),
    admit("wasi-probe-js"),
    admit("echo-wat"),
    admit("js-program-agent-loop", "agentloops"),
  ]);
  const program = await admitProgram(
    "function turn(input, configuration, host) { const big = 'x'.repeat(1 << 20); for (let i = 0; i < 100000; i++) host.emit({ i, big }); return { v: 1, message: 'done' }; }",
  );
  const { session } = await sessions.createSession({
    environments: [{ name: "box", kind: { case: "service", value: {} } }],
    tools: [
      { name: "loop", environment: "box", implementation: { kind: { case: "tool", value: loop } } },
      { name: "probe", environment: "box", implementation: { kind: { case: "tool", value: probe } } },
      { name: "echo", environment: "box", implementation: { kind: { case: "tool", value: echo } } },
    ],
  });
  const sessionId = session!.id;
  // Sessions as large as the limits allow, to list a thousand at a time.
  const schema = { type: "object", description: randomBytes(24 * 1024).toString("hex") };
  for (let i = 0; i < 20; i++) {
    await sessions.createSession({
      environments: [{ name: "box", kind: { case: "service", value: {} } }],
      tools: Array.from({ length: 30 }, (_, t) => ({
        name: `t${t}`,
        environment: "box",
        inputSchema: schema,
        implementation: { kind: { case: "tool", value: echo } },
      })),
    });
  }
  // A session runs one run at a time: each emitting run has a session of its own. Made before
  // any activity starts, so that none of A's setup is refused for A's own flood.
  const emittingSessions = await Promise.all(
    Array.from(
      { length: EMITTING_RUNS },
      async () => (await sessions.createSession({ environments: [{ name: "box", kind: { case: "service", value: {} } }] })).session,
    ),
  );
  const stats: NoisyStats = { calls: {} };
  const count = (what: string, outcome: string) => (stats.calls[`${what}: ${outcome}`] = (stats.calls[`${what}: ${outcome}`] ?? 0) + 1);
  let stopping = false;
  const forever = async (what: string, once: () => Promise<string>) => {
    while (!stopping) {
      try {
        count(what, await once());
      } catch (error) {
        count(what, error instanceof Error ? error.message.slice(0, 60) : "error");
      }
    }
  };
  const call = (tool: string, input: unknown, timeoutMs: number) => async () => {
    const { receipt } = await sessions.callTool({
      sessionId,
      tool,
      input: fromJson(ValueSchema, input as never),
      timeout: { seconds: BigInt(Math.floor(timeoutMs / 1000)) },
    });
    return receipt?.outcome.case === "failure" ? receipt.outcome.value.code : (receipt?.outcome.case ?? "none");
  };
  const activities: Promise<void>[] = [];
  for (let i = 0; i < LOOPS; i++) activities.push(forever("loop-wat until its deadline", call("loop", {}, 5_000)));
  for (let i = 0; i < SLEEPERS; i++)
    activities.push(forever("blocked on a clock", call("probe", { v: 1, source: "tools.clock.subscribeDuration(60000000000n).block();" }, 10_000)));
  activities.push(
    forever(`fan-out of ${FAN_OUT}`, async () => {
      const outcomes = await Promise.all(Array.from({ length: FAN_OUT }, () => call("echo", { v: 1 }, 10_000)()));
      return `${outcomes.filter((outcome) => outcome === "returned").length} of ${FAN_OUT} returned`;
    }),
  );
  for (const own of emittingSessions) {
    activities.push(
      forever("emitting run", async () => {
        const { run } = await runs.createRun({
          sessionId: own!.id,
          run: {
            message: "emit",
            model: { provider: "anthropic", name: "unused" },
            providerKeys: { anthropic: "unused-key" },
            agentloop: { environment: "box", implementation: { kind: { case: "program", value: { id: program, runtime } } } },
          } as never,
        });
        for (;;) {
          const { run: now } = await runs.getRun({ sessionId: own!.id, runId: run!.id });
          if (now && !["queued", "running"].includes(now.status)) return now.status;
          await sleep(200);
        }
      }),
    );
  }
  for (let i = 0; i < LISTERS; i++)
    activities.push(forever("ListSessions of 1000", async () => `${(await sessions.listSessions({ pageSize: 1000 })).sessions.length} listed`));
  parentPort!.postMessage("started");
  parentPort!.once("message", async () => {
    stopping = true;
    parentPort!.postMessage(stats);
  });
  await Promise.allSettled(activities);
}

/** Lowers this thread (the noisy workspace's client) to nice 19: Linux sets a thread's nice value by its id. */
function yieldToTheService(): void {
  setPriority(Number(readlinkSync("/proc/thread-self").split("/").at(-1)), 19);
}

function startNoisyWorkspace(url: string): Promise<{ stop(): Promise<NoisyStats> }> {
  return startAttackers<NoisyStats>(new URL(import.meta.url), NOISY_ROLE, url, "the noisy workspace");
}

async function measure(name: string, call: () => Promise<void>): Promise<ResultRow> {
  const { latenciesMs } = await pacedLatencies(call, { warmup: WARMUP_CALLS, measured: MEASURED_CALLS, paceMs: PACE_MS, budgetMs: PHASE_BUDGET_MS });
  const s = summarize(latenciesMs);
  return {
    name,
    n: s.n,
    medianMs: s.medianMs,
    p99Ms: s.p99Ms,
    callsPerSec: Number.NaN,
    serverRssMiB: Number.NaN,
    serverCpuUs: Number.NaN,
    clientCpuUs: Number.NaN,
  };
}

/** Workspace B's CallTool, unloaded and while workspace A floods the same service. */
export async function noisyNeighbour(dataDir: string): Promise<{ rows: ResultRow[]; notes: string[] }> {
  // Two workspaces, each with the share of the server a default deployment gives it.
  const service = await spawnService(dataDir, {
    SERVICE_API_KEYS: `bench=${BENCH_API_KEY},noisy=${NOISY_KEY}`,
    SERVICE_WORKSPACE_REQUESTS_PER_SEC: String(loadSettings({}).workspaceRates.requestsPerSec),
  });
  try {
    const client = sessionClient(connectH2(service.url));
    const call = echoCaller(client, await createEchoSession(client, await admitTool(service.url, "echo-wat")));
    const unloaded = await measure("workspace B's CallTool, unloaded", call);
    const noisy = await startNoisyWorkspace(service.url);
    await sleep(RAMP_UP_MS);
    let loaded: ResultRow;
    let stats: NoisyStats;
    try {
      loaded = await measure("workspace B's CallTool, workspace A flooding", call);
    } finally {
      stats = await noisy.stop();
    }
    const ratio = loaded.p99Ms / unloaded.p99Ms;
    return {
      rows: [unloaded, loaded],
      notes: [
        `noisy neighbour: B's p99 under attack / unloaded ${ratio.toFixed(2)}x (target <= 3x: ${ratio <= 3 ? "met" : "MISSED"}); p50 ${(loaded.medianMs / unloaded.medianMs).toFixed(2)}x`,
        `workspace A kept going: ${LOOPS} loop-wat calls until their 5 s deadline, ${SLEEPERS} guests blocked on a clock (10 s), fan-outs of ${FAN_OUT} echo calls, ${EMITTING_RUNS} runs emitting 1 MiB events, ${LISTERS} listers of its 21 sessions (20 of 30 tools with 48 KB schemas each), a thousand a page`,
        `A's activities ended in all (a call, a fan-out of ${FAN_OUT}, a run, a list): ${Object.values(stats.calls).reduce((sum, n) => sum + n, 0)}, from a client at nice 19 (a tenant's client is not on the service's cores)`,
        `what A's calls got: ${Object.entries(stats.calls)
          .map(([what, n]) => `${what} x${n}`)
          .join("; ")}`,
      ],
    };
  } finally {
    await service.child.stop();
  }
}
