import * as fs from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import type { Client } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunInput, RunService } from "../../gen/skillenv/sessions/v1/runs_pb.js";
import type { SessionEvent, SessionService } from "../../gen/skillenv/sessions/v1/sessions_pb.js";
import { startScriptedProvider, type ScriptedProvider } from "../../testing/scripted-provider/index.ts";
import { buildTestComponents } from "./helpers/pool.ts";
import { spawnService, type ServiceProcess } from "./helpers/process.ts";
import { bearer, KEY_A, KEY_B, postJson, startTestService, type TestService } from "./helpers/service.ts";
import { admitTool, eventsUntil, refusedWith, runClient, runEnded, sessionClient } from "./helpers/sessions.ts";

// Approvals (docs/runs.md, "Approvals"): a call of a tool placed with approval "always" waits for
// a person's decision; nothing reaches the environment before it.

beforeAll(() => buildTestComponents(), 600_000);

const PROVIDER_KEY = "sk-test-approvals-5c1e";

function runInput(model: string): RunInput {
  return { model: { provider: "anthropic", name: model, maxTokens: 0 }, message: "go", providerKeys: { anthropic: PROVIDER_KEY } } as unknown as RunInput;
}

/** The append tool's input: one line added to /workspace/<file>. */
function appendLine(line: string) {
  return { v: 1, file: "log", line };
}

async function linesOf(file: string): Promise<string[]> {
  const text = await fs.readFile(file, "utf8").catch(() => "");
  return text.split("\n").filter((line) => line !== "");
}

const requested = (count: number) => {
  let seen = 0;
  return (event: SessionEvent) => event.type === "tool.approval_requested" && ++seen === count;
};

describe("approvals", () => {
  let provider: ScriptedProvider;
  let service: TestService;
  let root: string;
  let sessions: Client<typeof SessionService>;
  let runs: Client<typeof RunService>;
  let appendTool: string;

  beforeAll(async () => {
    provider = await startScriptedProvider();
    root = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "skillenv-approvals-")));
    service = await startTestService({
      SERVICE_ANTHROPIC_BASE_URL: provider.anthropicBaseUrl,
      SERVICE_MODEL_MAX_RETRIES: "0",
      SERVICE_ENV_FILESYSTEM_ALLOW: root,
      SERVICE_ENV_WORKSPACE_ROOT: path.join(root, "workspaces"),
    });
    sessions = sessionClient(service.url, KEY_A);
    runs = runClient(service.url, KEY_A);
    appendTool = await admitTool(service.url, KEY_A, "append-js");
  }, 120_000);
  afterAll(async () => {
    await service?.close();
    await provider?.close();
    if (root) await fs.rm(root, { recursive: true, force: true });
  });

  /** A session whose `append` tool needs approval and whose `note` tool (the same component) does not; and its log file. */
  async function approvalSession(): Promise<{ sessionId: string; log: string }> {
    const { session } = await sessions.createSession({
      environments: [{ name: "box", kind: { case: "service", value: { grants: { filesystem: { workspace: "write" } } } } }],
      tools: [
        { name: "append", environment: "box", implementation: { kind: { case: "tool", value: appendTool } }, approval: "always" },
        { name: "note", environment: "box", implementation: { kind: { case: "tool", value: appendTool } }, approval: "never" },
      ],
    });
    expect(session?.tools.map((tool) => [tool.name, tool.approval])).toEqual([
      ["append", "always"],
      ["note", ""],
    ]);
    return { sessionId: session!.id, log: path.join(root, "workspaces", "a", session!.id, "box", "log") };
  }

  it("waits, sending nothing, until a decision through the JSON API; the approved call runs once; a second decision is refused", async () => {
    const { sessionId, log } = await approvalSession();
    provider.script("approve-model", [{ toolCalls: [{ id: "c1", name: "append", input: appendLine("approved") }] }, { text: "done" }]);
    const { run } = await runs.createRun({ sessionId, run: runInput("approve-model") });
    const runId = run!.id;
    const asked = await eventsUntil(sessions, sessionId, requested(1));
    const request = asked.at(-1)!;
    expect(request.data).toMatchObject({
      runId,
      round: 1,
      callId: "c1",
      tool: "append",
      input: appendLine("approved"),
      approvalId: expect.stringMatching(/^apr_/),
    });
    const approvalId = request.data!.approvalId as string;
    // Nothing was sent for the call: no execute operation in the journal, no line written.
    expect(asked.some((event) => event.type === "operation.sent" && event.data?.kind === "execute")).toBe(false);
    expect(await linesOf(log)).toEqual([]);

    const base = `/v1/sessions/${sessionId}/runs/${runId}/approvals`;
    const listed = await fetch(`${service.url}${base}`, { headers: bearer(KEY_A) });
    expect(listed.status).toBe(200);
    expect((await listed.json()).approvals).toEqual([
      expect.objectContaining({ id: approvalId, runId, round: 1, callId: "c1", tool: "append", input: appendLine("approved"), status: "pending" }),
    ]);

    const approved = await postJson(service.url, `${base}/${approvalId}:approve`, { label: "alice" }, KEY_A);
    expect(approved.status).toBe(200);
    expect(approved.body.approval).toMatchObject({ id: approvalId, status: "approved", decidedBy: { workspace: "a", label: "alice" } });

    const events = (await eventsUntil(sessions, sessionId, runEnded(runId))).filter((event) => event.data?.runId === runId);
    expect(events.at(-1)?.type).toBe("turn.completed");
    const types = events.map((event) => event.type);
    // The call was sent only after the approval was durable.
    const sent = events.findIndex((event) => event.type === "operation.sent" && event.data?.kind === "execute");
    expect(types.indexOf("tool.approval_requested")).toBeLessThan(types.indexOf("tool.approved"));
    expect(types.indexOf("tool.approved")).toBeLessThan(sent);
    expect(events.find((event) => event.type === "tool.approved")?.data).toMatchObject({
      approvalId,
      callId: "c1",
      decidedBy: { workspace: "a", label: "alice" },
    });
    expect(events.find((event) => event.type === "tool.result")?.data).toMatchObject({ callId: "c1", outcome: "returned" });
    expect(await linesOf(log)).toEqual(["approved"]);

    // Decided once: a second decision, either way, is refused and changes nothing.
    const again = await postJson(service.url, `${base}/${approvalId}:approve`, { label: "bob" }, KEY_A);
    expect({ status: again.status, code: again.body.code }).toEqual({ status: 409, code: "approval_decided" });
    expect(await refusedWith(runs.denyToolCall({ sessionId, runId, approvalId, label: "bob", message: "no" }))).toBe("approval_decided");
    expect(await refusedWith(runs.approveToolCall({ sessionId, runId, approvalId: "apr_00000000000000000000000000" }))).toBe("approval_not_found");
    const { approvals } = await runs.listApprovals({ sessionId, runId });
    expect(approvals.map((approval) => [approval.status, approval.decidedBy?.label])).toEqual([["approved", "alice"]]);
    expect(await linesOf(log)).toEqual(["approved"]);
  });

  it("gives the model a denial's message as the tool's error result, and sends nothing", async () => {
    const { sessionId, log } = await approvalSession();
    provider.script("deny-model", [{ toolCalls: [{ id: "d1", name: "append", input: appendLine("denied") }] }, { text: "understood" }]);
    const { run } = await runs.createRun({ sessionId, run: runInput("deny-model") });
    const runId = run!.id;
    const approvalId = (await eventsUntil(sessions, sessionId, requested(1))).at(-1)!.data!.approvalId as string;
    const denied = await postJson(
      service.url,
      `/v1/sessions/${sessionId}/runs/${runId}/approvals/${approvalId}:deny`,
      { label: "carol", message: "not on a Friday" },
      KEY_A,
    );
    expect(denied.status).toBe(200);
    expect(denied.body.approval).toMatchObject({ status: "denied", message: "not on a Friday", decidedBy: { workspace: "a", label: "carol" } });

    const events = (await eventsUntil(sessions, sessionId, runEnded(runId))).filter((event) => event.data?.runId === runId);
    expect(events.at(-1)?.type).toBe("turn.completed");
    expect(events.find((event) => event.type === "tool.denied")?.data).toMatchObject({ approvalId, message: "not on a Friday", decidedBy: { label: "carol" } });
    expect(events.find((event) => event.type === "tool.result")?.data).toMatchObject({
      outcome: "failure",
      error: { code: "tool_call_denied", message: "not on a Friday" },
    });
    expect(events.some((event) => event.type === "operation.sent" && event.data?.kind === "execute")).toBe(false);
    expect(await linesOf(log)).toEqual([]);
    // The model's next request carries the denial as the call's error result.
    const sent = provider.requests.filter((request) => (request.body as { model?: string }).model === "deny-model").at(-1)!.body as {
      messages: Array<{ content: Array<Record<string, unknown>> }>;
    };
    const result = sent.messages.at(-1)!.content.find((part) => part.type === "tool_result")!;
    expect(result).toMatchObject({ tool_use_id: "d1", is_error: true });
    expect(JSON.stringify(result.content)).toContain("not on a Friday");
    expect(await refusedWith(runs.approveToolCall({ sessionId, runId, approvalId, label: "dave" }))).toBe("approval_decided");
  });

  it("lets parallel calls wait independently: an approved one runs while another still waits", async () => {
    const { sessionId, log } = await approvalSession();
    provider.script("parallel-model", [
      {
        toolCalls: [
          { id: "p1", name: "append", input: appendLine("first") },
          { id: "p2", name: "append", input: appendLine("second") },
          { id: "p3", name: "note", input: appendLine("free") },
        ],
      },
      { text: "all done" },
    ]);
    const { run } = await runs.createRun({ sessionId, run: runInput("parallel-model") });
    const runId = run!.id;
    const asked = await eventsUntil(sessions, sessionId, requested(2));
    const idOf = (callId: string) =>
      asked.find((event) => event.type === "tool.approval_requested" && event.data?.callId === callId)!.data!.approvalId as string;
    await runs.approveToolCall({ sessionId, runId, approvalId: idOf("p2"), label: "erin" });
    // p2's result comes while p1 still waits.
    const second = await eventsUntil(sessions, sessionId, (event) => event.type === "tool.result" && event.data?.callId === "p2");
    expect(second.some((event) => event.type === "tool.result" && event.data?.callId === "p1")).toBe(false);
    const { approvals } = await runs.listApprovals({ sessionId, runId });
    expect(approvals.map((approval) => [approval.callId, approval.status]).sort()).toEqual([
      ["p1", "pending"],
      ["p2", "approved"],
    ]);
    await runs.denyToolCall({ sessionId, runId, approvalId: idOf("p1"), label: "erin" });
    const events = (await eventsUntil(sessions, sessionId, runEnded(runId))).filter((event) => event.data?.runId === runId);
    expect(events.at(-1)?.type).toBe("turn.completed");
    expect(events.find((event) => event.type === "tool.result" && event.data?.callId === "p1")?.data).toMatchObject({
      error: { code: "tool_call_denied", message: "a person denied this tool call" },
    });
    expect((await linesOf(log)).sort()).toEqual(["free", "second"]);
  });

  it("keeps workspaces apart: B can neither list nor decide A's approvals", async () => {
    const { sessionId, log } = await approvalSession();
    provider.script("isolation-model", [{ toolCalls: [{ id: "i1", name: "append", input: appendLine("a's") }] }, { text: "ok" }]);
    const { run } = await runs.createRun({ sessionId, run: runInput("isolation-model") });
    const runId = run!.id;
    const approvalId = (await eventsUntil(sessions, sessionId, requested(1))).at(-1)!.data!.approvalId as string;
    const asB = runClient(service.url, KEY_B);
    expect(await refusedWith(asB.approveToolCall({ sessionId, runId, approvalId, label: "mallory" }))).toBe("session_not_found");
    expect(await refusedWith(asB.denyToolCall({ sessionId, runId, approvalId, label: "mallory" }))).toBe("session_not_found");
    expect(await refusedWith(asB.listApprovals({ sessionId, runId }))).toBe("session_not_found");
    const overJson = await postJson(service.url, `/v1/sessions/${sessionId}/runs/${runId}/approvals/${approvalId}:approve`, {}, KEY_B);
    expect({ status: overJson.status, code: overJson.body.code }).toEqual({ status: 404, code: "session_not_found" });
    expect((await runs.listApprovals({ sessionId, runId })).approvals.map((approval) => approval.status)).toEqual(["pending"]);
    // A cancelled run's undecided approval expires: deciding it then is refused.
    await runs.cancelRun({ sessionId, runId });
    expect(await refusedWith(runs.approveToolCall({ sessionId, runId, approvalId, label: "late" }))).toBe("approval_expired");
    expect((await runs.listApprovals({ sessionId, runId })).approvals.map((approval) => approval.status)).toEqual(["expired"]);
    expect(await linesOf(log)).toEqual([]);
  });

  it("refuses an approval setting it does not know, and a label or message above its bound", async () => {
    const refused = await refusedWith(
      sessions.createSession({
        environments: [{ name: "box", kind: { case: "service", value: {} } }],
        tools: [{ name: "append", environment: "box", implementation: { kind: { case: "tool", value: appendTool } }, approval: "sometimes" }],
      }),
    );
    expect(refused).toBe("invalid_argument");
    const { sessionId } = await approvalSession();
    provider.script("bounds-model", [{ toolCalls: [{ id: "b1", name: "append", input: appendLine("x") }] }, { text: "ok" }]);
    const { run } = await runs.createRun({ sessionId, run: runInput("bounds-model") });
    const approvalId = (await eventsUntil(sessions, sessionId, requested(1))).at(-1)!.data!.approvalId as string;
    expect(await refusedWith(runs.approveToolCall({ sessionId, runId: run!.id, approvalId, label: "x".repeat(257) }))).toBe("field_too_large");
    expect(await refusedWith(runs.denyToolCall({ sessionId, runId: run!.id, approvalId, message: "x".repeat(4097) }))).toBe("field_too_large");
    // Neither refusal decided it.
    await runs.denyToolCall({ sessionId, runId: run!.id, approvalId, label: "ok" });
    expect((await eventsUntil(sessions, sessionId, runEnded(run!.id))).at(-1)?.type).toBe("turn.completed");
  });
});

describe("an approval nobody decides", () => {
  it("waits at most the turn's bound: the run ends timeout, the approval expires, and the tool was never sent", async () => {
    const provider = await startScriptedProvider();
    const root = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "skillenv-approvals-timeout-")));
    // The turn's bound is the wait's (docs/runs.md, "Approvals"): one second, so that it passes.
    const service = await startTestService({
      SERVICE_MAX_TURN_SECS: "1",
      SERVICE_ANTHROPIC_BASE_URL: provider.anthropicBaseUrl,
      SERVICE_ENV_FILESYSTEM_ALLOW: root,
      SERVICE_ENV_WORKSPACE_ROOT: path.join(root, "workspaces"),
    });
    try {
      const tool = await admitTool(service.url, KEY_A, "append-js");
      const sessions = sessionClient(service.url, KEY_A);
      const runs = runClient(service.url, KEY_A);
      const { session } = await sessions.createSession({
        environments: [{ name: "box", kind: { case: "service", value: { grants: { filesystem: { workspace: "write" } } } } }],
        tools: [{ name: "append", environment: "box", implementation: { kind: { case: "tool", value: tool } }, approval: "always" }],
      });
      const sessionId = session!.id;
      provider.script("timeout-model", [{ toolCalls: [{ id: "t1", name: "append", input: appendLine("never") }] }, { text: "never asked" }]);
      const { run } = await runs.createRun({ sessionId, run: runInput("timeout-model") });
      const runId = run!.id;
      const events = (await eventsUntil(sessions, sessionId, runEnded(runId))).filter((event) => event.data?.runId === runId);
      expect(events.at(-1)).toMatchObject({ type: "turn.failed", data: { code: "timeout" } });
      const approvalId = events.find((event) => event.type === "tool.approval_requested")!.data!.approvalId as string;
      expect(events.some((event) => event.type === "operation.sent" && event.data?.kind === "execute")).toBe(false);
      expect((await runs.listApprovals({ sessionId, runId })).approvals.map((approval) => approval.status)).toEqual(["expired"]);
      expect(await refusedWith(runs.approveToolCall({ sessionId, runId, approvalId, label: "too late" }))).toBe("approval_expired");
      // The model was not called again: it was told nothing.
      expect(provider.requests.filter((request) => (request.body as { model?: string }).model === "timeout-model")).toHaveLength(1);
      expect(await linesOf(path.join(root, "workspaces", "a", sessionId, "box", "log"))).toEqual([]);
    } finally {
      await service.close();
      await provider.close();
      await fs.rm(root, { recursive: true, force: true });
    }
  });
});

describe("an approval across a restart", () => {
  let provider: ScriptedProvider;
  let root: string;
  const services: ServiceProcess[] = [];

  beforeAll(async () => {
    provider = await startScriptedProvider();
    root = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "skillenv-approvals-restart-")));
  });
  afterAll(async () => {
    for (const service of services) service.child.kill("SIGKILL");
    await provider?.close();
    await fs.rm(root, { recursive: true, force: true });
  });

  it("still waits after a kill -9, and an approval given then is honoured once", async () => {
    const env = {
      SERVICE_DATA_DIR: path.join(root, "data"),
      SERVICE_API_KEYS: `a=${KEY_A},b=${KEY_B}`,
      SERVICE_ENV_FILESYSTEM_ALLOW: root,
      SERVICE_ENV_WORKSPACE_ROOT: path.join(root, "workspaces"),
      SERVICE_ANTHROPIC_BASE_URL: provider.anthropicBaseUrl,
    };
    const first = await spawnService(env);
    services.push(first);
    const tool = await admitTool(first.url, KEY_A, "append-js");
    const { session } = await sessionClient(first.url, KEY_A).createSession({
      environments: [{ name: "box", kind: { case: "service", value: { grants: { filesystem: { workspace: "write" } } } } }],
      tools: [{ name: "append", environment: "box", implementation: { kind: { case: "tool", value: tool } }, approval: "always" }],
    });
    const sessionId = session!.id;
    const log = path.join(env.SERVICE_ENV_WORKSPACE_ROOT, "a", sessionId, "box", "log");
    provider.script("restart-approval-model", [
      {
        toolCalls: [
          { id: "r1", name: "append", input: appendLine("after restart") },
          { id: "r2", name: "append", input: appendLine("denied before") },
        ],
      },
      { text: "finished" },
    ]);
    const { run } = await runClient(first.url, KEY_A).createRun({ sessionId, run: runInput("restart-approval-model") });
    const runId = run!.id;
    const asked = await eventsUntil(sessionClient(first.url, KEY_A), sessionId, requested(2));
    const idOf = (callId: string) =>
      asked.find((event) => event.type === "tool.approval_requested" && event.data?.callId === callId)!.data!.approvalId as string;
    // One of the two is denied before the kill; the other is still pending.
    await runClient(first.url, KEY_A).denyToolCall({ sessionId, runId, approvalId: idOf("r2"), label: "before", message: "no" });
    await eventsUntil(sessionClient(first.url, KEY_A), sessionId, (event) => event.type === "tool.result" && event.data?.callId === "r2");
    first.child.kill("SIGKILL");
    await first.exited;

    const second = await spawnService(env);
    services.push(second);
    const resumed = await eventsUntil(sessionClient(second.url, KEY_A), sessionId, (event) => event.type === "run.resumed");
    expect(resumed.at(-1)?.data).toMatchObject({ runId, round: 2, awaitingApproval: ["r1"], unknownToolCalls: [] });
    const client = runClient(second.url, KEY_A);
    expect((await client.getRun({ sessionId, runId })).run?.status).toBe("running");
    expect((await client.listApprovals({ sessionId, runId })).approvals.map((approval) => [approval.callId, approval.status])).toEqual([
      ["r1", "pending"],
      ["r2", "denied"],
    ]);
    expect(await linesOf(log)).toEqual([]);

    await client.approveToolCall({ sessionId, runId, approvalId: idOf("r1"), label: "after" });
    expect(await refusedWith(client.approveToolCall({ sessionId, runId, approvalId: idOf("r1"), label: "again" }))).toBe("approval_decided");
    const events = (await eventsUntil(sessionClient(second.url, KEY_A), sessionId, runEnded(runId))).filter((event) => event.data?.runId === runId);
    expect(events.at(-1)).toMatchObject({ type: "turn.completed", data: { outputText: "finished" } });
    expect(events.filter((event) => event.type === "tool.approval_requested")).toHaveLength(2);
    expect(await linesOf(log)).toEqual(["after restart"]);
    // The model's second call got both results: the tool's output and the denial.
    const body = provider.requests.filter((request) => (request.body as { model?: string }).model === "restart-approval-model").at(-1)!.body as {
      messages: Array<{ content: Array<Record<string, unknown>> }>;
    };
    const results = body.messages.at(-1)!.content.filter((part) => part.type === "tool_result");
    expect(results.map((part) => [part.tool_use_id, part.is_error ?? false])).toEqual([
      ["r1", false],
      ["r2", true],
    ]);
  }, 180_000);
});
