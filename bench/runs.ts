// Runs (issue #9) with the scripted provider (testing/scripted-provider) answering instantly, in
// its own process; the service in another; this process is the client (Connect, binary
// protobuf, HTTP/2). Each figure beside a baseline measured in the same run, in interleaved
// rounds (lib/variants.ts):
//   - a complete text turn: from CreateRun until the session's turn.completed event arrives on a
//     WatchSession stream the client keeps open; baseline: a bare POST /v1/messages to the
//     provider, read to the end (one model call on its own, no service);
//   - turns/s with 64 sessions running turns back to back (one run at a time per session, so 64
//     turns in flight); baseline: POSTs/s to the provider with 64 in flight;
//   - a tool loop: per turn 2 rounds of 4 echo-wat calls, then the final text (3 model calls, 8
//     tool calls), with 64 sessions; baseline: CallTool of the same tool with 64 in flight (the
//     sessions suite's measurement, on this service);
//   - memory per resident idle session: growth of the service's live heap (after a forced GC) and
//     RSS over N sessions created, then again after one text turn in each, divided by N (the
//     second of two batches: see memoryPerSession).
// The reference implementation's published figures (NOTES.md) are printed beside ours for
// context only: another machine (4 vCPU), another implementation.
import * as fs from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { Client } from "@connectrpc/connect";
import type { RunInputSchema, RunService } from "../gen/skillenv/sessions/v1/runs_pb.js";
import type { SessionEvent, SessionService } from "../gen/skillenv/sessions/v1/sessions_pb.js";
import type { ServerChild } from "./lib/child.ts";
import { formatFigures } from "./lib/figures.ts";
import { measureResume, type ResumeFigures } from "./run-resume.ts";
import {
  admitTool,
  connectH2,
  createEchoSession,
  ECHO,
  ECHO_INPUT,
  echoCaller,
  runClient,
  sessionClient,
  spawnProvider,
  spawnService,
  withChildren,
  type ServiceChild,
} from "./lib/services.ts";
import { MiB } from "./lib/stats.ts";
import type { Suite, SuiteReport } from "./lib/suite.ts";
import { fixed } from "./lib/table.ts";
import { measure } from "./lib/timing.ts";
import { childSide, measureVariants, type Plan } from "./lib/variants.ts";

const ROOT = path.resolve(import.meta.dirname, "..");
const PLAN: Plan = { rounds: 6, inFlight: 64, budgetMs: 20_000 };
/** Sessions running turns concurrently: one run at a time each, so as many as calls in flight. */
const SESSIONS = PLAN.inFlight;
const TOOL_ROUNDS = 2;
const TOOLS_PER_ROUND = 4;
const TOOL_CALLS_PER_TURN = TOOL_ROUNDS * TOOLS_PER_ROUND;
const COUNTS = {
  provider: { warmup: 200, perRound: 100, concurrent: 4000 },
  text: { warmup: SESSIONS, perRound: 60, concurrent: 3000 },
  callTool: { warmup: 200, perRound: 100, concurrent: 4000 },
  toolLoop: { warmup: SESSIONS, perRound: 20, concurrent: 640 },
};
/** Runs in flight when the resumption figure's service is killed. */
const RESUMED_RUNS = 64;
/** Sessions per batch of the memory figure (each one a CreateSession with a service environment set up). */
const IDLE_SESSIONS = 2000;
/** Connections for short-lived watch streams (see memoryPerSession). */
const WATCH_CONNECTIONS = 4;
const KiB = 1024;

const TARGETS = { turnP50Ms: 3, turnsPerSec: 1000, toolCallsPerSec: 1500, bytesPerSession: 64 * KiB };
const REFERENCE_HEADER = "reference impl. (4 vCPU, measured elsewhere)";
const REFERENCE = { turnP50: "2.3 ms", turnsPerSec: "2,000", toolCallsPerSec: "~3,400", perSession: "21-31 KiB" };

const PROVIDER_KEY = "sk-bench-scripted-provider";
const MESSAGE = "Say hello.";
const REPLY = "Hello from the scripted model.";
/** Model names, each with its own script in the provider: a script's position is per model, not per session. */
export const MODELS = {
  baseline: "bench-baseline",
  text: "bench-text",
  tools: (session: number) => `bench-tools-${session}`,
  loops: (session: number) => `bench-loops-${session}`,
};
/**
 * The pool's default 2 workers x 4 tool slots has no queue: 64 sessions with 4 calls each would
 * be refused with pool_saturated. 2 x 128 slots hold them all.
 */
export const serviceEnv = (provider: ServerChild) => ({
  SERVICE_ANTHROPIC_BASE_URL: provider.url,
  SERVICE_MODEL_MAX_RETRIES: "0",
  SERVICE_ENV_TOOL_SLOTS: String((SESSIONS * TOOLS_PER_ROUND) / 2),
  // The custom-loop sessions hold one agent-loop invocation each.
  SERVICE_ENV_AGENT_LOOP_SLOTS: String(SESSIONS / 2),
  // One workspace with the whole pool (two workers), as a single-tenant deployment sets it: the
  // default share, half the pool, would queue and then refuse half of these calls.
  SERVICE_ENV_WORKSPACE_TOOL_SLOTS: String(SESSIONS * TOOLS_PER_ROUND),
  SERVICE_ENV_WORKSPACE_AGENT_LOOP_SLOTS: String(SESSIONS),
  SERVICE_ENV_WORKSPACE_WORKERS: "2",
});

type Sessions = Client<typeof SessionService>;
type Runs = Client<typeof RunService>;

async function run(): Promise<SuiteReport> {
  const { buildComponents } = await import("../scripts/build-components.ts");
  const dirs = ["echo-wat", "agent-loop-js"].map((name) => path.join(ROOT, "components", name));
  await buildComponents({ dirs, log: (line) => process.stderr.write(`  ${line}\n`) });
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "skillenv-bench-runs-"));
  try {
    return await withChildren(async (started) => {
      const provider = started(await spawnProvider());
      const service = await spawnService(dataDir, serviceEnv(provider));
      started(service.child);
      await loadScripts(provider.url);
      const toolId = await admitTool(service.url, "echo-wat");
      const loopId = await admitTool(service.url, "agent-loop-js", "agentloops");
      const calls = connectH2(service.url);
      const sessions = sessionClient(calls);
      const runs = runClient(calls);

      // Memory first, on a service that has seen nothing but a warm-up.
      let startedAt = performance.now();
      const memory = await memoryPerSession(service, sessions, runs, toolId);
      phase("memory per session", startedAt);

      // Two groups of sessions, each with its watch streams on a connection of its own (the
      // server allows 100 streams per connection; turns' unary calls go on `calls`).
      startedAt = performance.now();
      const textSessions = await SessionPool.open(sessions, sessionClient(connectH2(service.url)), toolId, () => MODELS.text);
      const toolSessions = await SessionPool.open(sessions, sessionClient(connectH2(service.url)), toolId, (index) => MODELS.tools(index));
      const loopSessions = await SessionPool.open(sessions, sessionClient(connectH2(service.url)), toolId, (index) => MODELS.loops(index));
      const server = childSide("service", service.child);
      const model = childSide("provider", provider);
      try {
        const results = await measureVariants(
          [
            { name: "provider: bare POST /v1/messages (baseline)", call: providerPost(provider.url), sides: [model], ...COUNTS.provider },
            { name: "text turn: CreateRun -> turn.completed", call: textSessions.turnCaller(runs, 0), sides: [server, model], ...COUNTS.text },
            {
              name: "CallTool echo-wat (baseline for the tool loop)",
              call: echoCaller(sessions, await createEchoSession(sessions, toolId)),
              sides: [server],
              ...COUNTS.callTool,
            },
            {
              name: `tool loop turn: ${TOOL_ROUNDS} rounds x ${TOOLS_PER_ROUND} echo-wat`,
              call: toolSessions.turnCaller(runs, TOOL_CALLS_PER_TURN),
              sides: [server, model],
              ...COUNTS.toolLoop,
            },
            {
              name: `the same, custom loop (agent-loop-js component)`,
              call: loopSessions.turnCaller(runs, TOOL_CALLS_PER_TURN, loopId),
              sides: [server, model],
              ...COUNTS.toolLoop,
            },
          ],
          PLAN,
        );
        phase("turns", startedAt);
        startedAt = performance.now();
        const resume = await measureResume(provider, serviceEnv(provider), RESUMED_RUNS);
        phase("resumption", startedAt);
        return report(results, memory, [textSessions, toolSessions], resume);
      } finally {
        textSessions.close();
        toolSessions.close();
        loopSessions.close();
      }
    });
  } finally {
    await fs.rm(dataDir, { recursive: true, force: true, maxRetries: 5, retryDelay: 50 });
  }
}

function phase(name: string, startedAt: number): void {
  process.stderr.write(`  ${name}: ${((performance.now() - startedAt) / 1000).toFixed(1)} s\n`);
}

function report(results: Awaited<ReturnType<typeof measureVariants>>, memory: [Batch, Batch], pools: SessionPool[], resume: ResumeFigures): SuiteReport {
  const rows = results.map((result) => result.row);
  const [post, text, callTool, toolLoop, customLoop] = [rows[0]!, rows[1]!, rows[2]!, rows[3]!, rows[4]!];
  const providerCpu = (index: number) => fixed(results[index]!.cpuUsPerCall.get("provider") ?? Number.NaN, 0);
  const toolCallsPerSec = toolLoop.callsPerSec * TOOL_CALLS_PER_TURN;
  const kib = (bytes: number) => `${fixed(bytes / KiB, 1)} KiB`;
  const truncated = results.filter((result) => result.truncated).map((result) => result.row.name);
  const [texts, tools] = pools.map((pool) => pool.turnsPerSession());
  const [first, marginal] = memory;
  const mib = (bytes: readonly number[]) => bytes.map((b) => fixed(b / MiB, 1)).join(" -> ");
  return {
    rows,
    notes: [
      "",
      formatFigures(
        [
          {
            figure: "complete text turn, p50",
            ours: `${fixed(text.medianMs, 3)} ms`,
            baseline: `provider POST ${fixed(post.medianMs, 3)} ms`,
            target: `<= ${TARGETS.turnP50Ms} ms`,
            met: text.medianMs <= TARGETS.turnP50Ms,
            reference: REFERENCE.turnP50,
          },
          {
            figure: `text turns/s, ${SESSIONS} sessions`,
            ours: fixed(text.callsPerSec, 0),
            baseline: `provider POSTs/s ${fixed(post.callsPerSec, 0)}`,
            target: `>= ${TARGETS.turnsPerSec}`,
            met: text.callsPerSec >= TARGETS.turnsPerSec,
            reference: REFERENCE.turnsPerSec,
          },
          {
            figure: `tool loop: tool calls/s, ${SESSIONS} sessions`,
            ours: fixed(toolCallsPerSec, 0),
            baseline: `CallTool calls/s ${fixed(callTool.callsPerSec, 0)}`,
            target: `>= ${TARGETS.toolCallsPerSec}`,
            met: toolCallsPerSec >= TARGETS.toolCallsPerSec,
            reference: REFERENCE.toolCallsPerSec,
          },
          ...(["heap", "rss"] as const).flatMap((what) =>
            ([1, 2] as const).map((point) => {
              const bytes = perSession(marginal, what, point);
              return {
                figure: `memory per idle session, ${what === "heap" ? "live heap" : "RSS"}, ${point === 1 ? "created" : "after 1 turn"}`,
                ours: kib(bytes),
                baseline: "-",
                target: `<= ${kib(TARGETS.bytesPerSession)}`,
                met: bytes <= TARGETS.bytesPerSession,
                reference: REFERENCE.perSession,
              };
            }),
          ),
        ],
        REFERENCE_HEADER,
      ),
      "",
      `Default loop (native) vs custom loop (agent-loop-js, one guest per turn on the pool, its model and tool calls through host imports), ` +
        `same tool loop turn: p50 ${fixed(toolLoop.medianMs, 3)} vs ${fixed(customLoop.medianMs, 3)} ms, turns/s ${fixed(toolLoop.callsPerSec, 0)} vs ${fixed(customLoop.callsPerSec, 0)}, ` +
        `service CPU per turn ${fixed(toolLoop.serverCpuUs, 0)} vs ${fixed(customLoop.serverCpuUs, 0)} µs (docs/runs.md: why the default loop is native).`,
      `Rows: ${PLAN.rounds} interleaved rounds of sequential calls per variant (order rotated each round; provider and CallTool ${COUNTS.provider.perRound} a round, ` +
        `text turns ${COUNTS.text.perRound}, tool loop turns ${COUNTS.toolLoop.perRound}), then a closed loop with ${PLAN.inFlight} in flight per variant ` +
        `(${COUNTS.text.concurrent} text turns, ${COUNTS.toolLoop.concurrent} tool loop turns = ${COUNTS.toolLoop.concurrent * TOOL_CALLS_PER_TURN} tool calls). ` +
        `Turns take the next free session of ${SESSIONS} in turn, so sequential turns rotate over them too; every turn is checked: turn.completed, and in the tool loop ${TOOL_CALLS_PER_TURN} tool calls all returned.`,
      `Conversation history grows as sessions take turns: by the end each text session had run ~${texts} turns, each tool loop session ~${tools} ` +
        `(${TOOL_ROUNDS * 2 + 2} messages a turn), and every turn sends the session's whole history to the model.`,
      `"server" columns are the service process (CPU read around every chunk, a forced GC per read subtracted); the provider's own CPU per call: ` +
        `POST ${providerCpu(0)} µs, text turn ${providerCpu(1)} µs (1 model call), tool loop turn ${providerCpu(3)} µs (${TOOL_ROUNDS + 1} model calls). ` +
        `Service CPU per turn: text ${fixed(text.serverCpuUs, 0)} µs, tool loop ${fixed(toolLoop.serverCpuUs, 0)} µs (${fixed(toolLoop.serverCpuUs / TOOL_CALLS_PER_TURN, 0)} µs per tool call, ` +
        `CallTool alone ${fixed(callTool.serverCpuUs, 0)} µs). Client CPU = this process's main thread.`,
      `The service: default settings but SERVICE_ENV_TOOL_SLOTS=${(SESSIONS * TOOLS_PER_ROUND) / 2} (2 workers; the default 4 slots each would refuse the tool loop's ${SESSIONS * TOOLS_PER_ROUND} concurrent calls ` +
        `with pool_saturated), SERVICE_MODEL_MAX_RETRIES=0. Text reply ${JSON.stringify(REPLY)} in one piece; tool input ${JSON.stringify(ECHO_INPUT)}.`,
      `Memory: two batches of ${IDLE_SESSIONS} sessions (a service environment set up, echo-wat placed), each created with ${PLAN.inFlight} CreateSessions in flight, ` +
        `then one text turn in each (its watch stream closed after), after a warm-up of ${SESSIONS} sessions with a turn each. The figures are the second batch's: ` +
        `live heap after a forced GC ${mib(marginal.heap)} MiB, RSS ${mib(marginal.rss)} MiB (before, created, after one turn). The first batch, on a fresh server, ` +
        `also grew the heap, the allocator's arenas and LevelDB's memtable and caches to their working size: per session ` +
        `heap ${kib(perSession(first, "heap", 1))} / ${kib(perSession(first, "heap", 2))}, RSS ${kib(perSession(first, "rss", 1))} / ${kib(perSession(first, "rss", 2))} (created / after 1 turn).`,
      `Resumption (docs/runs.md): the service killed (SIGKILL) with ${resume.runs} runs waiting on their first model reply, each in a session of its own, ` +
        `then started again on the same data: listening after ${fixed(resume.listeningMs, 0)} ms (recovery included; ${fixed(resume.baselineListeningMs, 0)} ms ` +
        `for a start with nothing to resume), every resumed run completed ${fixed(resume.completedMs, 0)} ms after the start ` +
        `(${fixed((resume.completedMs - resume.listeningMs) / resume.runs, 2)} ms a run after listening; a text turn's p50 above: ${fixed(text.medianMs, 3)} ms).`,
      ...(truncated.length > 0 ? [`cut short by the ${PLAN.budgetMs / 1000} s phase budget (fewer calls than planned): ${truncated.join(", ")}`] : []),
    ],
  };
}

/** Loads every model's script through the provider's control endpoint; all loop, for benchmarks. */
export async function loadScripts(providerUrl: string): Promise<void> {
  const toolRound = { toolCalls: Array.from({ length: TOOLS_PER_ROUND }, () => ({ name: ECHO, input: ECHO_INPUT })) };
  const scripts: Record<string, object[]> = {
    [MODELS.baseline]: [{ text: REPLY }],
    [MODELS.text]: [{ text: REPLY }],
  };
  for (let i = 0; i < SESSIONS; i++) {
    scripts[MODELS.tools(i)] = [...Array.from({ length: TOOL_ROUNDS }, () => toolRound), { text: "Done." }];
    scripts[MODELS.loops(i)] = scripts[MODELS.tools(i)]!;
  }
  for (const [model, steps] of Object.entries(scripts)) {
    const response = await fetch(`${providerUrl}/_scripts/${encodeURIComponent(model)}`, { method: "PUT", body: JSON.stringify({ steps, loop: true }) });
    if (response.status !== 204) throw new Error(`loading the script of ${model}: HTTP ${response.status} ${await response.text()}`);
  }
}

/** One model call as the service makes it, without the service: POST, read the event stream to its end. */
function providerPost(providerUrl: string): () => Promise<void> {
  const body = JSON.stringify({
    model: MODELS.baseline,
    max_tokens: 4096,
    stream: true,
    messages: [{ role: "user", content: [{ type: "text", text: MESSAGE }] }],
    tools: [{ name: ECHO, description: "Echoes its input.", input_schema: { type: "object" } }],
  });
  const headers = { "content-type": "application/json", "x-api-key": PROVIDER_KEY, "anthropic-version": "2023-06-01" };
  return async () => {
    const response = await fetch(`${providerUrl}/v1/messages`, { method: "POST", headers, body });
    const events = await response.text();
    if (!response.ok || !events.includes(REPLY) || !events.includes("message_stop"))
      throw new Error(`provider POST: HTTP ${response.status} ${events.slice(0, 200)}`);
  };
}

/** A run of `model`; with `agentLoop` (an admitted agent-loop id), driven by that custom loop in the session's sandbox. */
function runInput(model: string, agentLoop?: string): MessageInitShape<typeof RunInputSchema> {
  const loop = agentLoop ? { agentloop: { environment: "sandbox", implementation: { kind: { case: "agentloop" as const, value: agentLoop } } } } : {};
  return { model: { provider: "anthropic", name: model }, message: MESSAGE, providerKeys: { anthropic: PROVIDER_KEY }, ...loop };
}

const TERMINAL = new Set(["turn.completed", "turn.failed", "run.cancelled"]);

/**
 * One WatchSession stream, kept open: how the client learns that its runs ended. A run's end can
 * arrive before CreateRun's answer does, so ends nobody waits for yet are kept until asked for.
 */
class SessionWatcher {
  readonly sessionId: string;
  readonly #abort = new AbortController();
  readonly #ended = new Map<string, SessionEvent>();
  readonly #waiting = new Map<string, { resolve(event: SessionEvent): void; reject(error: Error): void }>();
  /** tool.result events that were not `returned`, by run. */
  readonly #toolFailures = new Map<string, string>();
  #broken: Error | undefined;

  constructor(client: Sessions, sessionId: string) {
    this.sessionId = sessionId;
    void this.#read(client);
  }

  /** Submits a run and waits for its end: a completed turn with `toolCalls` tool calls, all returned, or an error. */
  async turn(submit: () => Promise<{ run?: { id: string } }>, toolCalls: number): Promise<void> {
    const { run } = await submit();
    const end = await this.#endOf(run!.id);
    const failure = this.#toolFailures.get(run!.id);
    this.#toolFailures.delete(run!.id);
    if (end.type !== "turn.completed") throw new Error(`run ${run!.id}: ${end.type} ${JSON.stringify(end.data)}`);
    if (failure !== undefined) throw new Error(`run ${run!.id}: a tool call did not return: ${failure}`);
    if (end.data?.toolCalls !== toolCalls) throw new Error(`run ${run!.id}: ${String(end.data?.toolCalls)} tool calls, expected ${toolCalls}`);
  }

  close(): void {
    this.#abort.abort();
  }

  #endOf(runId: string): Promise<SessionEvent> {
    const ended = this.#ended.get(runId);
    if (ended) {
      this.#ended.delete(runId);
      return Promise.resolve(ended);
    }
    if (this.#broken) return Promise.reject(this.#broken);
    return new Promise((resolve, reject) => this.#waiting.set(runId, { resolve, reject }));
  }

  async #read(client: Sessions): Promise<void> {
    try {
      for await (const { event } of client.watchSession({ sessionId: this.sessionId }, { signal: this.#abort.signal })) this.#see(event!);
      throw new Error("the stream ended");
    } catch (error) {
      if (this.#abort.signal.aborted) return;
      this.#broken = new Error(`watching session ${this.sessionId}: ${error instanceof Error ? error.message : String(error)}`);
      for (const waiting of this.#waiting.values()) waiting.reject(this.#broken);
      this.#waiting.clear();
    }
  }

  #see(event: SessionEvent): void {
    const runId = event.data?.runId;
    if (typeof runId !== "string") return;
    if (event.type === "tool.result" && event.data?.outcome !== "returned") this.#toolFailures.set(runId, JSON.stringify(event.data));
    if (!TERMINAL.has(event.type)) return;
    const waiting = this.#waiting.get(runId);
    this.#waiting.delete(runId);
    if (waiting) waiting.resolve(event);
    else this.#ended.set(runId, event);
  }
}

interface PooledSession {
  watcher: SessionWatcher;
  model: string;
  turns: number;
}

/**
 * Echo sessions, each watched, handed out first in first out: a session runs one turn at a time,
 * and consecutive turns rotate over all of them, so that no one session's history grows alone.
 */
export class SessionPool {
  readonly #all: PooledSession[];
  readonly #free: PooledSession[];

  private constructor(all: PooledSession[]) {
    this.#all = all;
    this.#free = [...all];
  }

  /** SESSIONS echo sessions; `model` names the model of the index-th session's runs. */
  static async open(sessions: Sessions, watch: Sessions, toolId: string, model: (index: number) => string): Promise<SessionPool> {
    const ids = await Promise.all(Array.from({ length: SESSIONS }, () => createEchoSession(sessions, toolId)));
    return new SessionPool(ids.map((id, index) => ({ watcher: new SessionWatcher(watch, id), model: model(index), turns: 0 })));
  }

  /** A turn in the next free session, checked (see SessionWatcher.turn); `agentLoop` runs it on that custom loop. */
  turnCaller(runs: Runs, toolCalls: number, agentLoop?: string): () => Promise<void> {
    return async () => {
      const session = this.#free.shift();
      if (!session) throw new Error(`more turns in flight than the ${SESSIONS} sessions`);
      try {
        const sessionId = session.watcher.sessionId;
        await session.watcher.turn(() => runs.createRun({ sessionId, run: runInput(session.model, agentLoop) }), toolCalls);
        session.turns++;
      } finally {
        this.#free.push(session);
      }
    };
  }

  /** Mean turns per session so far. */
  turnsPerSession(): number {
    return Math.round(this.#all.reduce((sum, session) => sum + session.turns, 0) / this.#all.length);
  }

  close(): void {
    for (const session of this.#all) session.watcher.close();
  }
}

/** Memory of the service, bytes, at the three points of a batch: before it, its sessions created, one turn run in each. */
interface Batch {
  heap: [number, number, number];
  rss: [number, number, number];
}

/** Growth per session of a batch, bytes, from its start to `point` (1: created, 2: after one turn each). */
function perSession(batch: Batch, what: "heap" | "rss", point: 1 | 2): number {
  return (batch[what][point] - batch[what][0]) / IDLE_SESSIONS;
}

/**
 * The service's live heap (forced GC) and RSS around two batches of IDLE_SESSIONS sessions each:
 * created, then one text turn in each (watched on its own stream, closed once it ended). The
 * first batch also brings the heap, the allocator's arenas and LevelDB's memtable and caches to
 * their working size, which a fresh server pays once, not per session; the second is the
 * marginal cost of a session.
 */
async function memoryPerSession(service: ServiceChild, sessions: Sessions, runs: Runs, toolId: string): Promise<[Batch, Batch]> {
  // A cancelled watch stays open on the server for a moment; opened right away, a new one can
  // take a connection past the server's 100 streams, and Node's HTTP/2 server then refuses it and
  // closes the connection (GOAWAY ENHANCE_YOUR_CALM). So short-lived watches share out over a few
  // connections, a quarter of those in flight on each.
  const connections = Array.from({ length: WATCH_CONNECTIONS }, () => sessionClient(connectH2(service.url)));
  let watches = 0;
  const oneTurn = async (sessionId: string) => {
    const watcher = new SessionWatcher(connections[watches++ % WATCH_CONNECTIONS]!, sessionId);
    try {
      await watcher.turn(() => runs.createRun({ sessionId, run: runInput(MODELS.text) }), 0);
    } finally {
      watcher.close();
    }
  };
  const inParallel = async (count: number, work: () => Promise<void>) => {
    const m = await measure(work, { warmup: 0, sequential: 0, concurrent: count, inFlight: PLAN.inFlight, phaseBudgetMs: 120_000 });
    if (m.concurrentCalls !== count) throw new Error(`memory: ${m.concurrentCalls} of ${count} done within the budget`);
  };
  const batch = async (): Promise<Batch> => {
    const points = [await service.child.stats()];
    const ids: string[] = [];
    await inParallel(IDLE_SESSIONS, async () => void ids.push(await createEchoSession(sessions, toolId)));
    points.push(await service.child.stats());
    await inParallel(IDLE_SESSIONS, () => oneTurn(ids.pop()!));
    points.push(await service.child.stats());
    return { heap: points.map((p) => p.heapUsedBytes) as Batch["heap"], rss: points.map((p) => p.rssBytes) as Batch["rss"] };
  };

  await inParallel(SESSIONS, async () => oneTurn(await createEchoSession(sessions, toolId)));
  return [await batch(), await batch()];
}

export const runsSuite: Suite = {
  name: "runs",
  title: `Runs with an instant scripted model: text turn latency, turns/s and tool calls/s over ${SESSIONS} sessions, memory per idle session, resumption after kill -9`,
  run,
};
