import * as fs from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunInput } from "../../gen/skillenv/sessions/v1/runs_pb.js";
import { startScriptedProvider, type ScriptedProvider } from "../../testing/scripted-provider/index.ts";
import { buildTestComponents } from "./helpers/pool.ts";
import { bearer, KEY_A, KEY_B, startTestService, type TestService } from "./helpers/service.ts";
import { admitTool, eventsUntil, filesContaining, refusedWith, runClient, runEnded, sessionClient, statusClient } from "./helpers/sessions.ts";

const PROVIDER_KEY = "sk-test-provider-key-51c0aa";

beforeAll(() => buildTestComponents(), 600_000);

function runInput(model: string): RunInput {
  return {
    model: { provider: "anthropic", name: model, maxTokens: 0 },
    skills: [],
    message: "hello",
    agentsMd: "",
    files: [],
    providerKeys: { anthropic: PROVIDER_KEY },
    idempotencyKey: "",
    maxRounds: 0,
  } as unknown as RunInput;
}

/** Until a file under `dir` holds `needle`: what a guest writes once it runs. */
async function untilWritten(dir: string, needle: string): Promise<void> {
  while ((await filesContaining(dir, needle)).length === 0) await new Promise((resolve) => setTimeout(resolve, 10));
}

describe("the workspace status (GetWorkspaceStatus)", () => {
  let provider: ScriptedProvider;
  let service: TestService;
  let root: string;

  beforeAll(async () => {
    provider = await startScriptedProvider();
    root = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "skillenv-status-")));
    service = await startTestService({
      SERVICE_ANTHROPIC_BASE_URL: provider.anthropicBaseUrl,
      SERVICE_MODEL_MAX_RETRIES: "0",
      SERVICE_ENV_FILESYSTEM_ALLOW: root,
      SERVICE_ENV_WORKSPACE_ROOT: path.join(root, "workspaces"),
    });
  }, 120_000);
  afterAll(async () => {
    await service?.close();
    await provider?.close();
    if (root) await fs.rm(root, { recursive: true, force: true });
  });

  it("counts each workspace's sessions, runs of the last hour and pool slots, and B sees none of A's", async () => {
    const [sessionsA, runsA, sessionsB, runsB] = [
      sessionClient(service.url, KEY_A),
      runClient(service.url, KEY_A),
      sessionClient(service.url, KEY_B),
      runClient(service.url, KEY_B),
    ];
    const finished = async (sessions: typeof sessionsA, runs: typeof runsA, sessionId: string, model: string) => {
      const { run } = await runs.createRun({ sessionId, run: runInput(model) });
      await eventsUntil(sessions, sessionId, runEnded(run!.id));
      return (await runs.getRun({ sessionId, runId: run!.id })).run!;
    };
    provider.script("status-text", [{ text: "done" }], { loop: true });
    provider.script("status-error", [{ error: { status: 400, type: "invalid_request_error", message: "refused by the script" } }], { loop: true });
    provider.script("status-slow", [{ text: "a reply that never ends", chunkChars: 2, chunkDelayMs: 600_000 }]);
    const append = await admitTool(service.url, KEY_A, "append-js");
    provider.script("status-tool", [
      { toolCalls: [{ id: "t1", name: "append", input: { v: 1, file: "log", line: "status-guest-running", holdMs: 600_000 } }] },
      { text: "never" },
    ]);

    // A: two completed runs in one session, a failed one in a session then ended, a cancelled one,
    // and one running whose tool holds a pool slot.
    const one = (await sessionsA.createSession({})).session!.id;
    expect((await finished(sessionsA, runsA, one, "status-text")).status).toBe("completed");
    expect((await finished(sessionsA, runsA, one, "status-text")).status).toBe("completed");
    const two = (await sessionsA.createSession({})).session!.id;
    expect((await finished(sessionsA, runsA, two, "status-error")).status).toBe("failed");
    await sessionsA.endSession({ sessionId: two });
    const three = (await sessionsA.createSession({})).session!.id;
    const slow = (await runsA.createRun({ sessionId: three, run: runInput("status-slow") })).run!;
    await eventsUntil(sessionsA, three, (event) => event.type === "assistant.delta" && event.data?.runId === slow.id);
    expect((await runsA.cancelRun({ sessionId: three, runId: slow.id })).run?.status).toBe("cancelled");
    const four = (
      await sessionsA.createSession({
        environments: [{ name: "box", kind: { case: "service", value: { grants: { filesystem: { workspace: "write" } } } } }],
        tools: [{ name: "append", environment: "box", implementation: { kind: { case: "tool", value: append } } }],
      })
    ).session!.id;
    const held = (await runsA.createRun({ sessionId: four, run: runInput("status-tool") })).run!;
    await untilWritten(root, "status-guest-running");

    // B: one session with one completed run.
    const mine = (await sessionsB.createSession({})).session!.id;
    expect((await finished(sessionsB, runsB, mine, "status-text")).status).toBe("completed");

    const capacity = service.serviceEnv.pool!.stats().capacity;
    const a = await statusClient(service.url, KEY_A).getWorkspaceStatus({});
    expect(a.sessions).toMatchObject({ active: 3, ending: 0, ended: 1, deleting: 0 });
    expect(a.runsLastHour).toMatchObject({ running: 1, completed: 2, failed: 1, cancelled: 1, truncated: false });
    expect(a.pool).toMatchObject({
      available: true,
      tools: { total: capacity.tools, busy: 1, waiting: 0, workspaceBusy: 1, workspaceWaiting: 0 },
      agentLoops: { total: capacity.agentLoops, busy: 0, waiting: 0, workspaceBusy: 0, workspaceWaiting: 0 },
    });
    const readAt = Number(a.readAt!.seconds);
    expect(readAt - Number(a.runsLastHour!.since!.seconds)).toBe(3600);

    const b = await statusClient(service.url, KEY_B).getWorkspaceStatus({});
    expect(b.sessions).toMatchObject({ active: 1, ending: 0, ended: 0, deleting: 0 });
    expect(b.runsLastHour).toMatchObject({ running: 0, completed: 1, failed: 0, cancelled: 0, truncated: false });
    // The pool is shared: B sees A's slot as busy, none as its own.
    expect(b.pool).toMatchObject({ available: true, tools: { total: capacity.tools, busy: 1, workspaceBusy: 0, workspaceWaiting: 0 } });

    // The JSON path: GET /v1/status, every field written.
    const json = await fetch(`${service.url}/v1/status`, { headers: bearer(KEY_B) });
    expect(json.status).toBe(200);
    const body = (await json.json()) as Record<string, any>;
    expect(body.sessions).toEqual({ active: 1, ending: 0, ended: 0, deleting: 0 });
    expect(body.runsLastHour).toEqual({ since: expect.any(String), running: 0, completed: 1, failed: 0, cancelled: 0, truncated: false });
    expect(body.pool).toEqual({
      available: true,
      tools: { total: capacity.tools, busy: 1, waiting: 0, workspaceBusy: 0, workspaceWaiting: 0 },
      agentLoops: { total: capacity.agentLoops, busy: 0, waiting: 0, workspaceBusy: 0, workspaceWaiting: 0 },
    });
    const unauthenticated = await fetch(`${service.url}/v1/status`);
    expect(unauthenticated.status).toBe(401);
    expect(await refusedWith(statusClient(service.url, "not-a-key").getWorkspaceStatus({}))).toBe("unauthenticated");

    // The held run is cancelled, and its tool's receipt gives A's slot back: the numbers follow.
    await runsA.cancelRun({ sessionId: four, runId: held.id });
    await eventsUntil(sessionsA, four, (event) => event.type === "operation.receipt" && event.data?.kind === "execute");
    const after = await statusClient(service.url, KEY_A).getWorkspaceStatus({});
    expect(after.runsLastHour).toMatchObject({ running: 0, completed: 2, failed: 1, cancelled: 2 });
    expect(after.pool?.tools).toMatchObject({ busy: 0, workspaceBusy: 0 });
  });
});
