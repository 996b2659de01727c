// The runs suite's resumption figure (issue #21): a service killed (SIGKILL) while RUNS runs wait
// on their model, then started again on the same data directory, where each run resumes at its
// model call (docs/runs.md, "Stop, restart and resumption"). Measured from the second start:
// until it listens (recovery included) and until every resumed run has completed; beside it, a
// third start of the same data directory with nothing left to resume.
import * as fs from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import type { Client } from "@connectrpc/connect";
import type { SessionService } from "../gen/skillenv/sessions/v1/sessions_pb.js";
import type { ServerChild } from "./lib/child.ts";
import { connectH2, runClient, sessionClient, spawnService, type ServiceChild } from "./lib/services.ts";

export interface ResumeFigures {
  runs: number;
  /** Second start (RUNS interrupted runs): spawn until listening, ms. */
  listeningMs: number;
  /** Second start: spawn until every resumed run's turn.completed was seen, ms. */
  completedMs: number;
  /** Third start (nothing to resume): spawn until listening, ms. */
  baselineListeningMs: number;
}

const MODEL = "bench-resume";
const KEY = "sk-bench-resume";

/** Kills the service (SIGKILL) with RUNS runs waiting on the model, starts it again, and times the resumption. */
export async function measureResume(provider: ServerChild, env: Record<string, string>, runs: number): Promise<ResumeFigures> {
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "skillenv-bench-resume-"));
  try {
    // The first service's model calls never answer: every run is waiting on its first reply when it dies.
    await loadScript(provider.url, [{ text: "never sent", delayMs: 3_600_000 }]);
    const first = await spawnService(dataDir, env);
    let sessionIds: string[];
    try {
      sessionIds = await startWaitingRuns(first, runs);
    } finally {
      await kill(first);
    }
    await loadScript(provider.url, [{ text: "Resumed." }]);

    let startedAt = performance.now();
    const second = await spawnService(dataDir, env);
    const listeningMs = performance.now() - startedAt;
    let completedMs: number;
    try {
      const sessions = sessionClient(connectH2(second.url));
      await Promise.all(sessionIds.map((id) => untilEvent(sessions, id, "turn.completed")));
      completedMs = performance.now() - startedAt;
    } finally {
      await second.child.stop();
    }

    startedAt = performance.now();
    const third = await spawnService(dataDir, env);
    const baselineListeningMs = performance.now() - startedAt;
    await third.child.stop();
    return { runs, listeningMs, completedMs, baselineListeningMs };
  } finally {
    await fs.rm(dataDir, { recursive: true, force: true, maxRetries: 5, retryDelay: 50 });
  }
}

/** A session per run, each run's model call sent (its model.request journaled); the sessions' ids. */
async function startWaitingRuns(service: ServiceChild, runs: number): Promise<string[]> {
  const transport = connectH2(service.url);
  const sessions = sessionClient(transport);
  const runClientOf = runClient(transport);
  return Promise.all(
    Array.from({ length: runs }, async () => {
      const { session } = await sessions.createSession({});
      const sessionId = session!.id;
      await runClientOf.createRun({
        sessionId,
        run: { model: { provider: "anthropic", name: MODEL }, message: "Say hello.", providerKeys: { anthropic: KEY } },
      });
      await untilEvent(sessions, sessionId, "model.request");
      return sessionId;
    }),
  );
}

/** Reads the session's events from its first until one of `type` arrives. */
async function untilEvent(sessions: Client<typeof SessionService>, sessionId: string, type: string): Promise<void> {
  const abort = new AbortController();
  try {
    for await (const { event } of sessions.watchSession({ sessionId }, { signal: abort.signal })) {
      if (event?.type === type) return;
      if (event?.type === "turn.failed") throw new Error(`session ${sessionId}: the run failed: ${JSON.stringify(event.data)}`);
    }
    throw new Error(`session ${sessionId}: the event stream ended before ${type}`);
  } finally {
    abort.abort();
  }
}

async function loadScript(providerUrl: string, steps: object[]): Promise<void> {
  const response = await fetch(`${providerUrl}/_scripts/${MODEL}`, { method: "PUT", body: JSON.stringify({ steps, loop: true }) });
  if (!response.ok) throw new Error(`loading the script: ${response.status} ${await response.text()}`);
}

/** SIGKILL, then waits until the process is gone (its pid no longer signalable). */
async function kill(service: ServiceChild): Promise<void> {
  process.kill(service.child.pid, "SIGKILL");
  for (;;) {
    try {
      process.kill(service.child.pid, 0);
    } catch {
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
