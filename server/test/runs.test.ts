import * as fs from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import type { Client } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunInput, RunService } from "../../gen/skillenv/sessions/v1/runs_pb.js";
import type { SessionService } from "../../gen/skillenv/sessions/v1/sessions_pb.js";
import { startScriptedProvider, type ScriptedProvider } from "../../testing/scripted-provider/index.ts";
import { hostClient, inputOf, TestHost } from "./helpers/hosts.ts";
import { buildTestComponents, killWorker } from "./helpers/pool.ts";
import { KEY_A, KEY_B, onEmbeddedStorage, runSnapshots, snapshottedRuns, startTestService, type TestService } from "./helpers/service.ts";
import { admitProgram, admitTool, eventsUntil, filesContaining, refusedWith, runClient, runEnded, sessionClient } from "./helpers/sessions.ts";
import { bundleOf, deleteSkill, getSkill, publish, skillMd } from "./helpers/skills.ts";

const PROVIDER_KEY = "sk-test-provider-key-9d2e4a";

/** `depth` arrays around 0. */
function nested(depth: number): unknown {
  let value: unknown = 0;
  for (let i = 0; i < depth; i++) value = [value];
  return value;
}

/** How many arrays are around the 0 in `value`, reading an array delivered as JSON text as that array. */
function depthOf(value: unknown): number {
  let depth = 0;
  for (let inner = value; inner !== 0; depth++) {
    const array = (typeof inner === "string" ? JSON.parse(inner) : inner) as unknown[];
    inner = array[0];
  }
  return depth;
}

/** What the service sent to the scripted provider (wire JSON: checked field by field below). */
type Sent = { headers: Record<string, string>; body: any };
type CachedBody = { system: unknown; messages: Array<{ role: string; content: Array<Record<string, unknown>> }> };

beforeAll(() => buildTestComponents(), 600_000);

function runInput(model: string, fields: Partial<RunInput> = {}): RunInput {
  return {
    model: { provider: "anthropic", name: model, maxTokens: 0 },
    skills: [],
    message: "hello",
    agentsMd: "",
    files: [],
    providerKeys: { anthropic: PROVIDER_KEY },
    idempotencyKey: "",
    maxRounds: 0,
    ...fields,
  } as unknown as RunInput;
}

describe("runs", () => {
  let provider: ScriptedProvider;
  let service: TestService;
  let root: string;
  let sessions: Client<typeof SessionService>;
  let runs: Client<typeof RunService>;
  let workspaceTool: string;
  let trapTool: string;

  beforeAll(async () => {
    provider = await startScriptedProvider();
    root = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "skillenv-runs-")));
    service = await startTestService({
      SERVICE_ANTHROPIC_BASE_URL: provider.anthropicBaseUrl,
      SERVICE_OPENAI_BASE_URL: provider.openaiBaseUrl,
      SERVICE_MODEL_MAX_RETRIES: "0",
      SERVICE_ENV_FILESYSTEM_ALLOW: root,
      SERVICE_ENV_WORKSPACE_ROOT: path.join(root, "workspaces"),
    });
    sessions = sessionClient(service.url, KEY_A);
    runs = runClient(service.url, KEY_A);
    [workspaceTool, trapTool] = await Promise.all([admitTool(service.url, KEY_A, "workspace-js"), admitTool(service.url, KEY_A, "trap-wat")]);
  }, 120_000);
  afterAll(async () => {
    await service?.close();
    await provider?.close();
  });

  /** A session with a workspace and the workspace-js tool placed as "fs" and trap-wat as "trap". */
  async function workspaceSession(): Promise<string> {
    const { session } = await sessions.createSession({
      environments: [{ name: "box", kind: { case: "service", value: { grants: { filesystem: { workspace: "write" } } } } }],
      tools: [
        { name: "fs", description: "Reads and writes files.", environment: "box", implementation: { kind: { case: "tool", value: workspaceTool } } },
        { name: "trap", description: "Always fails.", environment: "box", implementation: { kind: { case: "tool", value: trapTool } } },
      ],
    });
    return session!.id;
  }

  async function finish(sessionId: string, runId: string) {
    const events = await eventsUntil(sessions, sessionId, runEnded(runId));
    const { run } = await runs.getRun({ sessionId, runId });
    return { events: events.filter((event) => event.data?.runId === runId), run: run! };
  }

  it("completes a text turn and records every step as events", async () => {
    provider.script("text-model", [{ text: "Hello there, friend.", chunkChars: 5, usage: { inputTokens: 11, outputTokens: 4 } }]);
    const sessionId = await workspaceSession();
    const { run } = await runs.createRun({ sessionId, run: runInput("text-model", { agentsMd: "Always be brief." }) });
    expect(run?.status).toBe("running");
    const { events, run: done } = await finish(sessionId, run!.id);
    expect(done.status).toBe("completed");
    expect(done.outputText).toBe("Hello there, friend.");
    expect(done.stopReason).toBe("end_turn");
    expect(done.usage).toMatchObject({ inputTokens: 11n, outputTokens: 4n });
    const types = events.map((event) => event.type);
    expect(types[0]).toBe("run.submitted");
    expect(types).toEqual(expect.arrayContaining(["turn.started", "model.request", "assistant.delta", "assistant.message", "model.usage", "turn.completed"]));
    expect(
      events
        .filter((event) => event.type === "assistant.delta")
        .map((event) => event.data?.text)
        .join(""),
    ).toBe("Hello there, friend.");
    const request = provider.requests.at(-1) as Sent;
    expect(request.headers["x-api-key"]).toBe(PROVIDER_KEY);
    expect(JSON.stringify(request.body.system)).toContain("Always be brief.");
    expect(request.body.tools.map((tool: { name: string }) => tool.name).sort()).toEqual(["fs", "trap"]);
  });

  it("lists and loads skills, reads their staged files, and returns tool failures to the model", async () => {
    await publish(
      service,
      "report-writer",
      bundleOf({
        "SKILL.md": skillMd({ description: "Writes weekly reports.", body: "# Reports\nRead reference/template.txt first." }),
        "reference/template.txt": "TEMPLATE v1",
      }),
    );
    provider.script("skills-model", [
      { toolCalls: [{ id: "c1", name: "skills", input: { action: "list" } }] },
      { toolCalls: [{ id: "c2", name: "skills", input: { action: "load", name: "report-writer" } }] },
      {
        toolCalls: [
          { id: "c3", name: "fs", input: { v: 1, op: "read", path: "/workspace/skills/report-writer/reference/template.txt" } },
          { id: "c4", name: "trap", input: {} },
          { id: "c5", name: "skills", input: { action: "delete" } },
        ],
      },
      { text: "Done." },
    ]);
    const sessionId = await workspaceSession();
    const first = provider.requests.length;
    const { run } = await runs.createRun({ sessionId, run: runInput("skills-model", { skills: [{ kind: "skill", name: "report-writer" }] as never }) });
    const { run: done, events } = await finish(sessionId, run!.id);
    expect(done.status).toBe("completed");
    expect(done.rounds).toBe(4);
    expect(done.toolCalls).toBe(5);
    expect(done.skills.map((skill) => skill.name)).toEqual(["report-writer"]);

    const sent = provider.requests.slice(first) as Sent[];
    expect(sent[0]!.body.tools.map((tool: { name: string }) => tool.name)).toContain("skills");
    const results = (i: number) => sent[i]!.body.messages.at(-1).content;
    expect(JSON.parse(results(1)[0].content)).toEqual({ skills: [{ name: "report-writer", description: "Writes weekly reports." }] });
    expect(results(2)[0].content).toContain("Read reference/template.txt first.");
    const [read, trap, bad] = results(3);
    expect(JSON.parse(read.content)).toEqual({ v: 1, ok: true, data: "TEMPLATE v1" });
    expect(trap.is_error).toBe(true);
    expect(JSON.parse(trap.content).error.code).toBe("guest_trap");
    expect(JSON.parse(bad.content).error.code).toBe("invalid_input");

    const toolResults = events.filter((event) => event.type === "tool.result");
    const outcomes = Object.fromEntries(toolResults.map((event) => [event.data?.callId, event.data?.outcome]));
    expect(outcomes).toEqual({ c1: "returned", c2: "returned", c3: "returned", c4: "failure", c5: "failure" });
    const staged = await fs.readdir(path.join(root, "workspaces", "a", sessionId, "box"), { recursive: true });
    expect(staged.sort()).toEqual([
      "skills",
      "skills/report-writer",
      "skills/report-writer/SKILL.md",
      "skills/report-writer/reference",
      "skills/report-writer/reference/template.txt",
    ]);
  });

  it("offers the skills tool only to runs that reference skills", async () => {
    provider.script("plain-model", [{ text: "no skills" }]);
    const sessionId = await workspaceSession();
    const { run } = await runs.createRun({ sessionId, run: runInput("plain-model") });
    await finish(sessionId, run!.id);
    expect((provider.requests.at(-1) as Sent).body.tools.map((tool: { name: string }) => tool.name)).not.toContain("skills");
  });

  it.each<[string, Partial<RunInput>, string]>([
    ["an unknown skill", { skills: [{ kind: "skill", name: "no-such-skill" }] as never }, "skill_not_found"],
    ["a skill reference of another kind", { skills: [{ kind: "tool", name: "x" }] as never }, "invalid_argument"],
    ["an invalid skill name", { skills: [{ kind: "skill", name: "Bad Name" }] as never }, "invalid_skill_name"],
    ["a missing provider key", { providerKeys: {} }, "provider_key_missing"],
    ["an unknown provider", { model: { provider: "acme", name: "m", maxTokens: 0 } as never }, "invalid_argument"],
    ["a reserved model parameter", { model: { provider: "anthropic", name: "m", maxTokens: 0, parameters: { stream: false } } as never }, "invalid_argument"],
    ["an empty message", { message: "" }, "invalid_argument"],
    ["a message over SERVICE_JOURNAL_MAX_PAYLOAD_BYTES", { message: "m".repeat(1024 * 1024 + 1) }, "field_too_large"],
    ["an agentsMd over SERVICE_JOURNAL_MAX_PAYLOAD_BYTES", { agentsMd: "a".repeat(1024 * 1024 + 1) }, "field_too_large"],
    [
      "a model name over SERVICE_MAX_FIELD_BYTES",
      { model: { provider: "anthropic", name: "m".repeat(64 * 1024 + 1), maxTokens: 0 } as never },
      "field_too_large",
    ],
    [
      "model parameters over SERVICE_MAX_FIELD_BYTES",
      { model: { provider: "anthropic", name: "m", maxTokens: 0, parameters: { metadata: { user_id: "u".repeat(64 * 1024) } } } as never },
      "field_too_large",
    ],
    [
      "an agent loop configuration over SERVICE_MAX_FIELD_BYTES",
      {
        agentloop: {
          environment: "box",
          implementation: { kind: { case: "agentloop", value: "0".repeat(64) } },
          configuration: { kind: { case: "stringValue", value: "c".repeat(64 * 1024) } },
        },
      } as never,
      "field_too_large",
    ],
    ["a file path escaping the workspace", { files: [{ path: "../etc/passwd", assetSha256: "0".repeat(64) }] as never }, "invalid_argument"],
    ["a file that is not an asset", { files: [{ path: "data.csv", assetSha256: "0".repeat(64) }] as never }, "asset_not_found"],
  ])("refuses %s and creates nothing", async (_, fields, code) => {
    const sessionId = await workspaceSession();
    // No run may have snapshotted skills.
    const runDirectories = () => snapshottedRuns(service);
    const before = await runDirectories();
    expect(await refusedWith(runs.createRun({ sessionId, run: runInput("unused", fields) }))).toBe(code);
    expect((await runs.listRuns({ sessionId })).runs).toHaveLength(0);
    expect(await runDirectories()).toEqual(before);
  });

  it("names the unknown skill in the refusal", async () => {
    const sessionId = await workspaceSession();
    await expect(runs.createRun({ sessionId, run: runInput("unused", { skills: [{ kind: "skill", name: "missing-one" }] as never }) })).rejects.toThrow(
      /missing-one/,
    );
  });

  it("keeps a run's skill snapshot when the skill changes or goes away mid-run; later runs see the new bytes", async () => {
    // The run's first tool call waits on a host the test answers only once the skill has been
    // replaced and deleted, so the skill is loaded after both, however slow the machine.
    const { session } = await sessions.createSession({
      environments: [{ name: "laptop", kind: { case: "host", value: {} } }],
      tools: [{ name: "wait", description: "Waits for the test.", environment: "laptop" }],
    });
    const sessionId = session!.id;
    const host = new TestHost(hostClient(service.url, KEY_A), sessionId, "laptop");
    await host.attached();
    const v1 = bundleOf({ "SKILL.md": skillMd({ description: "Version one.", body: "BODY ONE" }) });
    const v2 = bundleOf({ "SKILL.md": skillMd({ description: "Version two.", body: "BODY TWO" }) });
    await publish(service, "mutable", v1);
    provider.script("snapshot-model", [
      { toolCalls: [{ id: "w", name: "wait", input: {} }] },
      { toolCalls: [{ id: "l", name: "skills", input: { action: "load", name: "mutable" } }] },
      { text: "ok" },
    ]);
    const input = runInput("snapshot-model", { skills: [{ kind: "skill", name: "mutable" }] as never });
    const { run } = await runs.createRun({ sessionId, run: input });
    const waiting = await host.command("wait");
    await publish(service, "mutable", v2);
    await deleteSkill(service, "mutable");
    host.returned(waiting.operationId, "go on");
    expect((await finish(sessionId, run!.id)).run.status).toBe("completed");
    host.close();
    expect((provider.requests.at(-1) as Sent).body.messages.at(-1).content[0].content).toContain("BODY ONE");
    expect([...(await runSnapshots(service, run!.id)).keys()]).toEqual([v1.hash]);

    expect(await refusedWith(runs.createRun({ sessionId, run: input }))).toBe("skill_not_found");
    await publish(service, "mutable", v2);
    provider.script("snapshot-model", [{ toolCalls: [{ id: "l", name: "skills", input: { action: "load", name: "mutable" } }] }, { text: "ok" }]);
    const { run: later } = await runs.createRun({ sessionId, run: input });
    await finish(sessionId, later!.id);
    expect((provider.requests.at(-1) as Sent).body.messages.at(-1).content[0].content).toContain("BODY TWO");
    expect(later!.idempotencyHash).toBe(run!.idempotencyHash);
  });

  it("returns the existing run for a retried idempotency key and starts nothing twice", async () => {
    const sessionId = await workspaceSession();
    provider.script("idem-model", [{ text: "once" }]);
    const input = runInput("idem-model", { idempotencyKey: "retry-1" });
    const first = await runs.createRun({ sessionId, run: input });
    const second = await runs.createRun({ sessionId, run: input });
    expect(first.created).toBe(true);
    expect(second.created).toBe(false);
    expect(second.run?.id).toBe(first.run?.id);
    await finish(sessionId, first.run!.id);
    expect((await runs.listRuns({ sessionId })).runs).toHaveLength(1);
    expect(await refusedWith(runs.createRun({ sessionId, run: { ...input, message: "something else" } }))).toBe("idempotency_key_reused");
  });

  it("runs one run at a time per session, and cancels a run waiting on a tool", async () => {
    const append = await admitTool(service.url, KEY_A, "append-js");
    const { session } = await sessions.createSession({
      environments: [{ name: "box", kind: { case: "service", value: { grants: { filesystem: { workspace: "write" } } } } }],
      tools: [{ name: "append", environment: "box", implementation: { kind: { case: "tool", value: append } } }],
    });
    const sessionId = session!.id;
    provider.script("slow-tool-model", [
      { toolCalls: [{ id: "a", name: "append", input: { v: 1, file: "log", line: "x", holdMs: 20_000 } }] },
      { text: "never" },
    ]);
    const { run } = await runs.createRun({ sessionId, run: runInput("slow-tool-model") });
    await eventsUntil(sessions, sessionId, (event) => event.type === "operation.sent" && event.data?.kind === "execute");
    expect(await refusedWith(runs.createRun({ sessionId, run: runInput("slow-tool-model") }))).toBe("run_in_progress");
    expect(await refusedWith(runs.deleteRun({ sessionId, runId: run!.id }))).toBe("run_in_progress");

    const cancelled = await runs.cancelRun({ sessionId, runId: run!.id });
    expect(cancelled.run?.status).toBe("cancelled");
    const events = await eventsUntil(sessions, sessionId, runEnded(run!.id));
    const execute = events.find((event) => event.type === "operation.sent" && event.data?.kind === "execute")!;
    expect(
      events.some((event) => event.type === "operation.sent" && event.data?.kind === "cancel" && event.data?.targetOperationId === execute.data?.operationId),
    ).toBe(true);
    expect(events.at(-1)?.type).toBe("run.cancelled");
    // The tool was waiting on a timer, so the cancel stopped it: its receipt says so.
    const stopped = await eventsUntil(
      sessions,
      sessionId,
      (event) => event.type === "operation.receipt" && event.data?.operationId === execute.data?.operationId,
    );
    expect(stopped.at(-1)?.data?.receipt).toMatchObject({ failure: { code: "cancelled" } });
    await runs.deleteRun({ sessionId, runId: run!.id });
    expect(await refusedWith(runs.getRun({ sessionId, runId: run!.id }))).toBe("run_not_found");
  });

  it("sends a tool-use cycle's thinking block back exactly, and shows the thinking as its own events", async () => {
    const sessionId = await workspaceSession();
    provider.script("thinking-model", [
      { thinking: "The file should be written first.", toolCalls: [{ id: "w", name: "fs", input: { v: 1, op: "write", path: "/workspace/t", data: "x" } }] },
      { thinking: "Done; say so.", text: "Written." },
    ]);
    const parameters = { thinking: { type: "enabled", budget_tokens: 1024 } };
    const { run } = await runs.createRun({
      sessionId,
      run: runInput("thinking-model", { model: { provider: "anthropic", name: "thinking-model", maxTokens: 2048, parameters } as never }),
    });
    const { run: done, events } = await finish(sessionId, run!.id);
    // The stand-in refuses a round 2 without the thinking block, as the real API does.
    expect({ status: done.status, error: done.error?.message }).toEqual({ status: "completed", error: undefined });
    expect(done.outputText).toBe("Written.");
    const rounds = provider.requests
      .filter((request) => (request.body as { model?: string }).model === "thinking-model")
      .map((request) => request.body as { messages: Array<{ role: string; content: Array<Record<string, unknown>> }> });
    const replied = rounds[1]!.messages[1]!;
    expect(replied.role).toBe("assistant");
    expect(replied.content[0]).toEqual({ type: "thinking", thinking: "The file should be written first.", signature: expect.stringMatching(/^sig_/) });
    expect(replied.content[1]).toMatchObject({ type: "tool_use", id: "w" });
    expect(events.filter((event) => event.type === "assistant.thinking").map((event) => [event.data?.round, event.data?.text])).toEqual([
      [1, "The file should be written first."],
      [2, "Done; say so."],
    ]);
  });

  it("marks prompt cache breakpoints on every request's stable prefix and reports the cache's tokens, unless the run opts out", async () => {
    const sessionId = await workspaceSession();
    provider.script("cache-model", [
      {
        toolCalls: [{ id: "w", name: "fs", input: { v: 1, op: "write", path: "/workspace/c", data: "x" } }],
        usage: { inputTokens: 10, outputTokens: 3, cacheCreationInputTokens: 900 },
      },
      { text: "Cached.", usage: { inputTokens: 12, outputTokens: 2, cacheReadInputTokens: 900 } },
    ]);
    const { run } = await runs.createRun({ sessionId, run: runInput("cache-model", { agentsMd: "Be brief." }) });
    const { run: done, events } = await finish(sessionId, run!.id);
    expect(done.status).toBe("completed");
    const sent = provider.requests
      .filter((request) => (request.body as { model?: string }).model === "cache-model")
      .map((request) => request.body as CachedBody);
    for (const body of sent) {
      expect(body.system).toEqual([{ type: "text", text: expect.stringContaining("Be brief."), cache_control: { type: "ephemeral" } }]);
      // Only the newest message carries a breakpoint, on its last block.
      expect(body.messages.map((message) => message.content.map((block) => block.cache_control !== undefined))).toEqual(
        body.messages.map((_, index) =>
          index === body.messages.length - 1
            ? body.messages[index]!.content.map((__, at, all) => at === all.length - 1)
            : body.messages[index]!.content.map(() => false),
        ),
      );
    }
    // Round 2 ends with the tool's result, which holds the breakpoint.
    expect(sent[1]!.messages.at(-1)!.content.at(-1)).toMatchObject({ type: "tool_result", cache_control: { type: "ephemeral" } });
    expect(done.usage).toMatchObject({ inputTokens: 10n + 900n + 12n + 900n, cacheCreationInputTokens: 900n, cacheReadInputTokens: 900n });
    expect(events.filter((event) => event.type === "model.usage").map((event) => event.data?.cacheReadInputTokens)).toEqual([undefined, 900]);

    provider.script("uncached-model", [{ text: "Plain." }]);
    const { run: plain } = await runs.createRun({
      sessionId,
      run: runInput("uncached-model", {
        agentsMd: "Be brief.",
        model: { provider: "anthropic", name: "uncached-model", maxTokens: 0, disablePromptCache: true } as never,
      }),
    });
    expect((await finish(sessionId, plain!.id)).run.model?.disablePromptCache).toBe(true);
    const uncached = provider.requests.find((request) => (request.body as { model?: string }).model === "uncached-model")!.body as CachedBody;
    expect(uncached.system).toEqual(expect.stringContaining("Be brief."));
    expect(JSON.stringify(uncached.messages)).not.toContain("cache_control");
  });

  it("counts the tokens the provider reported for a model call the run's cancel cut off", async () => {
    const { session } = await sessions.createSession({});
    const sessionId = session!.id;
    // Anthropic reports the input tokens as the stream starts (message_start); the rest never comes.
    provider.script("cut-stream-model", [
      { text: "a reply that never ends", chunkChars: 2, chunkDelayMs: 60_000, usage: { inputTokens: 21, outputTokens: 9 } },
    ]);
    const { run } = await runs.createRun({ sessionId, run: runInput("cut-stream-model") });
    await eventsUntil(sessions, sessionId, (event) => event.type === "assistant.delta" && event.data?.runId === run!.id);
    const { run: cancelled } = await runs.cancelRun({ sessionId, runId: run!.id });
    expect(cancelled?.status).toBe("cancelled");
    expect(cancelled?.usage?.inputTokens).toBe(21n);
    const events = await eventsUntil(sessions, sessionId, runEnded(run!.id));
    expect(events.at(-1)).toMatchObject({ type: "run.cancelled", data: { usage: { inputTokens: 21 } } });
  });

  it("fails a turn that passes SERVICE_MAX_TURN_SECS", async () => {
    const bounded = await startTestService({
      SERVICE_ANTHROPIC_BASE_URL: provider.anthropicBaseUrl,
      SERVICE_MAX_TURN_SECS: "1",
      SERVICE_MODEL_MAX_RETRIES: "0",
    });
    try {
      provider.script("slow-model", [{ delayMs: 5000, text: "late" }]);
      const client = sessionClient(bounded.url, KEY_A);
      const { session } = await client.createSession({ environments: [], tools: [] });
      const { run } = await runClient(bounded.url, KEY_A).createRun({ sessionId: session!.id, run: runInput("slow-model") });
      const events = await eventsUntil(client, session!.id, runEnded(run!.id));
      expect(events.at(-1)).toMatchObject({ type: "turn.failed", data: { code: "timeout" } });
    } finally {
      await bounded.close();
    }
  });

  it.each([
    ["a refused key", { status: 401, type: "authentication_error", message: "invalid x-api-key" }, "model_auth_failed", false],
    ["an overloaded provider", { status: 529, type: "overloaded_error", message: "overloaded" }, "model_overloaded", true],
    ["a rate limit", { status: 429, type: "rate_limit_error", message: "slow down" }, "model_rate_limited", true],
    ["a provider failure", { status: 500, type: "api_error", message: "internal" }, "model_unavailable", true],
    ["a refused request", { status: 400, type: "invalid_request_error", message: "bad" }, "model_rejected", false],
  ])("reports %s as a failed turn, retryable as docs/models.md lists it", async (_, error, code, retryable) => {
    provider.script("error-model", [{ error }]);
    const sessionId = await workspaceSession();
    const { run } = await runs.createRun({ sessionId, run: runInput("error-model") });
    const { run: done } = await finish(sessionId, run!.id);
    expect(done.status).toBe("failed");
    expect({ code: done.error?.code, retryable: done.error?.retryable }).toEqual({ code, retryable });
    expect(done.error?.message).not.toContain(PROVIDER_KEY);
  });

  it("fails at once, as rate limited, when the provider asks to wait longer than the call may last", async () => {
    const patient = await startTestService({
      SERVICE_ANTHROPIC_BASE_URL: provider.anthropicBaseUrl,
      SERVICE_MODEL_TIMEOUT_SECS: "5",
      SERVICE_MODEL_MAX_RETRIES: "2",
    });
    try {
      provider.script("retry-after-model", [{ error: { status: 429, type: "rate_limit_error", message: "tokens per minute exceeded", retryAfterSecs: 60 } }]);
      const client = sessionClient(patient.url, KEY_A);
      const { session } = await client.createSession({ environments: [], tools: [] });
      const { run } = await runClient(patient.url, KEY_A).createRun({ sessionId: session!.id, run: runInput("retry-after-model") });
      const events = await eventsUntil(client, session!.id, runEnded(run!.id));
      expect(events.at(-1)).toMatchObject({
        type: "turn.failed",
        data: { code: "model_rate_limited", retryable: true, details: { retryAfterSecs: "60" } },
      });
      const { run: done } = await runClient(patient.url, KEY_A).getRun({ sessionId: session!.id, runId: run!.id });
      expect(done?.error).toMatchObject({ code: "model_rate_limited", retryable: true, details: { retryAfterSecs: "60" } });
      // The provider's own words are kept.
      expect(done?.error?.message).toContain("tokens per minute exceeded");
      // Asked once, not again after a wait that could only time out.
      expect(provider.requests.filter((request) => (request.body as { model?: string }).model === "retry-after-model")).toHaveLength(1);
    } finally {
      await patient.close();
    }
  });

  it("fails a run whose model still wants tools after max_rounds", async () => {
    provider.script("greedy-model", [{ toolCalls: [{ id: "x", name: "skills-none", input: {} }] }], { loop: true });
    const sessionId = await workspaceSession();
    const { run } = await runs.createRun({ sessionId, run: runInput("greedy-model", { maxRounds: 3 }) });
    const { run: done } = await finish(sessionId, run!.id);
    expect(done.error?.code).toBe("max_rounds_exceeded");
    expect(done.rounds).toBe(3);
  });

  it("carries the conversation into the session's next run", async () => {
    provider.script("chat-model", [{ text: "first answer" }, { text: "second answer" }]);
    const sessionId = await workspaceSession();
    const first = await runs.createRun({ sessionId, run: runInput("chat-model", { message: "first question" }) });
    await finish(sessionId, first.run!.id);
    const second = await runs.createRun({ sessionId, run: runInput("chat-model", { message: "second question" }) });
    await finish(sessionId, second.run!.id);
    const messages = (provider.requests.at(-1) as Sent).body.messages;
    expect(JSON.stringify(messages)).toContain("first question");
    expect(JSON.stringify(messages)).toContain("first answer");
    expect(messages.at(-1).content[0].text).toBe("second question");
  });

  it("drives the OpenAI provider the same way", async () => {
    provider.script("gpt-test", [{ toolCalls: [{ id: "call_1", name: "fs", input: { v: 1, op: "list", path: "/workspace" } }] }, { text: "listed" }]);
    const sessionId = await workspaceSession();
    const { run } = await runs.createRun({
      sessionId,
      run: runInput("gpt-test", { model: { provider: "openai", name: "gpt-test", maxTokens: 0 } as never, providerKeys: { openai: PROVIDER_KEY } }),
    });
    const { run: done } = await finish(sessionId, run!.id);
    expect(done.status).toBe("completed");
    expect(done.outputText).toBe("listed");
    expect((provider.requests.at(-1) as Sent).headers.authorization).toBe(`Bearer ${PROVIDER_KEY}`);
  });

  it("creates a session and its first run in one call", async () => {
    provider.script("first-run-model", [{ text: "started together" }]);
    const { session, run } = await sessions.createSession({ environments: [], tools: [], run: runInput("first-run-model") });
    const { run: done } = await finish(session!.id, run!.id);
    expect(done.outputText).toBe("started together");
    const before = (await sessions.listSessions({})).sessions.length;
    expect(await refusedWith(sessions.createSession({ environments: [], tools: [], run: runInput("x", { providerKeys: {} }) }))).toBe("provider_key_missing");
    expect((await sessions.listSessions({})).sessions.length).toBe(before);
  });

  it("keeps workspace B out of A's runs", async () => {
    provider.script("iso-model", [{ text: "mine" }]);
    const sessionId = await workspaceSession();
    const { run } = await runs.createRun({ sessionId, run: runInput("iso-model") });
    await finish(sessionId, run!.id);
    const other = runClient(service.url, KEY_B);
    expect(await refusedWith(other.getRun({ sessionId, runId: run!.id }))).toBe("session_not_found");
    expect(await refusedWith(other.createRun({ sessionId, run: runInput("iso-model") }))).toBe("session_not_found");
    expect(await refusedWith(other.cancelRun({ sessionId, runId: run!.id }))).toBe("session_not_found");
  });

  it("tells the model when a tool's outcome is unknown", async () => {
    const loop = await admitTool(service.url, KEY_A, "loop-wat");
    const { session } = await sessions.createSession({
      environments: [{ name: "box", kind: { case: "service", value: {} } }],
      tools: [{ name: "spin", environment: "box", implementation: { kind: { case: "tool", value: loop } } }],
    });
    provider.script("unknown-model", [{ toolCalls: [{ id: "s", name: "spin", input: {} }] }, { text: "noted" }]);
    const { run } = await runs.createRun({ sessionId: session!.id, run: runInput("unknown-model") });
    const pool = service.serviceEnv.pool!;
    await eventsUntil(sessions, session!.id, (event) => event.type === "operation.sent" && event.data?.kind === "execute");
    // Killed once its guest runs: before that the call did not start, and ends `unavailable`.
    while (!pool.stats().workers.some((worker) => worker.running > 0)) await new Promise((resolve) => setTimeout(resolve, 5));
    killWorker(pool, pool.stats().workers.find((worker) => worker.running > 0)!.index);
    const { run: done, events } = await finish(session!.id, run!.id);
    expect(done.status).toBe("completed");
    expect(events.find((event) => event.type === "tool.result")?.data).toMatchObject({ outcome: "unknown" });
    const result = (provider.requests.at(-1) as Sent).body.messages.at(-1).content[0];
    expect(result.is_error).toBe(true);
    expect(JSON.parse(result.content).error.code).toBe("unknown_outcome");
  });

  it("removes finished runs and their snapshots after the retention period", async () => {
    await publish(service, "kept-briefly", bundleOf({ "SKILL.md": skillMd({ description: "Short-lived." }) }));
    provider.script("retention-model", [{ text: "done" }]);
    const sessionId = await workspaceSession();
    const { run } = await runs.createRun({ sessionId, run: runInput("retention-model", { skills: [{ kind: "skill", name: "kept-briefly" }] as never }) });
    await finish(sessionId, run!.id);
    expect(await service.runs.sweep()).toBe(0);
    expect((await runs.listRuns({ sessionId })).runs).toHaveLength(1);
    expect(await service.runs.sweep(Date.now() + 31 * 24 * 60 * 60 * 1000)).toBeGreaterThanOrEqual(1);
    expect(await refusedWith(runs.getRun({ sessionId, runId: run!.id }))).toBe("run_not_found");
    expect((await runSnapshots(service, run!.id)).size).toBe(0);
  });

  it("removes a run's skill snapshot with DeleteRun (SPEC 3.8)", async () => {
    const bundle = bundleOf({ "SKILL.md": skillMd({ description: "Deleted with its run." }) });
    await publish(service, "deleted-with-run", bundle);
    provider.script("delete-run-model", [{ text: "done" }]);
    const sessionId = await workspaceSession();
    const { run } = await runs.createRun({ sessionId, run: runInput("delete-run-model", { skills: [{ kind: "skill", name: "deleted-with-run" }] as never }) });
    await finish(sessionId, run!.id);
    expect((await runSnapshots(service, run!.id)).get(bundle.hash)?.equals(Buffer.from(bundle.zip))).toBe(true);
    await runs.deleteRun({ sessionId, runId: run!.id });
    expect((await runSnapshots(service, run!.id)).size).toBe(0);
    expect(await refusedWith(runs.getRun({ sessionId, runId: run!.id }))).toBe("run_not_found");
    // The workspace's skill is another copy: it stays.
    expect((await getSkill(service, "deleted-with-run")).body.skill.contentHash).toBe(bundle.hash);
  });

  it("dispatches the tool calls of one model reply concurrently", async () => {
    // Neither call is answered until both have reached the host: one at a time would never get there.
    const { session } = await sessions.createSession({
      environments: [{ name: "laptop", kind: { case: "host", value: {} } }],
      tools: ["first", "second", "third"].map((name) => ({ name, environment: "laptop" })),
    });
    const sessionId = session!.id;
    const host = new TestHost(hostClient(service.url, KEY_A), sessionId, "laptop");
    await host.attached();
    provider.script("parallel-model", [
      { toolCalls: ["first", "second", "third"].map((name) => ({ id: `call-${name}`, name, input: { name } })) },
      { text: "all three" },
    ]);
    const { run } = await runs.createRun({ sessionId, run: runInput("parallel-model") });
    const commands = await Promise.all(["first", "second", "third"].map((name) => host.command(name)));
    expect(commands.map((command) => inputOf(command))).toEqual([{ name: "first" }, { name: "second" }, { name: "third" }]);
    // Answered in reverse order: each result still goes back under its own call.
    for (const command of commands.reverse()) host.returned(command.operationId, `done ${command.tool}`);
    const { run: done } = await finish(sessionId, run!.id);
    expect(done).toMatchObject({ status: "completed", outputText: "all three", toolCalls: 3 });
    const results = (provider.requests.at(-1) as Sent).body.messages.at(-1).content;
    expect(results.map((result: { tool_use_id: string; content: string }) => [result.tool_use_id, JSON.parse(result.content)])).toEqual([
      ["call-first", "done first"],
      ["call-second", "done second"],
      ["call-third", "done third"],
    ]);
    host.close();
  });

  it("runs a custom agent loop component whose model and tool calls go through the same path", async () => {
    const loop = await admitTool(service.url, KEY_A, "agent-loop-js", "agentloops");
    const sessionId = await workspaceSession();
    provider.script("loop-model", [
      { toolCalls: [{ id: "c1", name: "fs", input: { v: 1, op: "write", path: "/workspace/out.txt", data: "from the loop" } }] },
      { text: "written by a custom loop" },
    ]);
    const agentloop = { environment: "box", implementation: { kind: { case: "agentloop", value: loop } } };
    const { run } = await runs.createRun({ sessionId, run: runInput("loop-model", { agentloop } as never) });
    const { run: done, events } = await finish(sessionId, run!.id);
    expect(done.status).toBe("completed");
    expect(done.outputText).toBe("written by a custom loop");
    expect(done.rounds).toBe(2);
    expect(await fs.readFile(path.join(root, "workspaces", "a", sessionId, "box", "out.txt"), "utf8")).toBe("from the loop");
    const loopOperation = events.find((event) => event.type === "operation.sent" && event.data?.agentLoop === true);
    expect(loopOperation?.data).toMatchObject({ kind: "execute", environment: "box" });
    expect(events.map((event) => event.type)).toEqual(expect.arrayContaining(["tool.call", "tool.result", "turn.progress", "turn.completed"]));
  });

  it.runIf(onEmbeddedStorage)(
    "runs an agent loop written as a program, keeping its source out of the journal, and refuses a loop that is not admitted as one",
    async () => {
      const runtime = await admitTool(service.url, KEY_A, "js-program-agent-loop", "agentloops");
      const marker = "loop-source-marker-5c27a0";
      const program = await admitProgram(
        service.url,
        KEY_A,
        `
      function turn(input, configuration, host) { /* ${marker} */
        const answer = host.callModel({ v: 1, messages: [{ role: "user", content: input.message + configuration.suffix }] });
        return { v: 1, message: answer.message.content.toUpperCase() };
      }`,
      );
      const sessionId = await workspaceSession();
      provider.script("program-loop-model", [{ text: "quiet answer" }]);
      const agentloop = {
        environment: "box",
        implementation: { kind: { case: "program", value: { id: program, runtime } } },
        configuration: { kind: { case: "structValue", value: { fields: { suffix: { kind: { case: "stringValue", value: "!" } } } } } },
      };
      const { run } = await runs.createRun({ sessionId, run: runInput("program-loop-model", { agentloop, message: "hi" } as never) });
      const { run: done } = await finish(sessionId, run!.id);
      expect(done.outputText).toBe("QUIET ANSWER");
      expect((provider.requests.at(-1) as Sent).body.messages.at(-1).content[0].text).toBe("hi!");
      // SPEC 4.4.3: the source is loaded inside the worker; its one copy at rest is the admitted blob.
      expect(await filesContaining(service.dataDir, marker)).toEqual([path.join(service.dataDir, "blobs", "sha256", program.slice(0, 2), program)]);

      const notALoop = { environment: "box", implementation: { kind: { case: "agentloop", value: workspaceTool } } };
      expect(await refusedWith(runs.createRun({ sessionId, run: runInput("x", { agentloop: notALoop } as never) }))).toBe("not_found");
      const nowhere = { environment: "missing", implementation: { kind: { case: "agentloop", value: runtime } } };
      expect(await refusedWith(runs.createRun({ sessionId, run: runInput("x", { agentloop: nowhere } as never) }))).toBe("environment_not_found");
    },
  );

  it("gives a custom loop a reply's thinking block as a block it sends back whole, so a tool-use cycle with thinking completes", async () => {
    const runtime = await admitTool(service.url, KEY_A, "js-program-agent-loop", "agentloops");
    // The loop keeps each reply's message as it got it, as the plain way of writing a loop does.
    const program = await admitProgram(
      service.url,
      KEY_A,
      `
      function turn(input, configuration, host) {
        const messages = [{ role: "user", content: input.message }];
        for (;;) {
          const reply = host.callModel({ v: 1, messages });
          messages.push({ role: "assistant", ...reply.message });
          if (reply.message.tool_calls.length === 0) return { v: 1, message: reply.message.content };
          for (const result of host.dispatchTools({ v: 1, calls: reply.message.tool_calls }).results)
            messages.push({ role: "tool", tool_call_id: result.id, content: JSON.stringify(result.output ?? result.error), is_error: !!result.error });
        }
      }`,
    );
    const sessionId = await workspaceSession();
    provider.script("loop-thinking-model", [
      { thinking: "Write it, then report.", toolCalls: [{ id: "w", name: "fs", input: { v: 1, op: "write", path: "/workspace/lt", data: "x" } }] },
      { text: "Written by the loop." },
    ]);
    const parameters = { thinking: { type: "enabled", budget_tokens: 1024 } };
    const agentloop = { environment: "box", implementation: { kind: { case: "program", value: { id: program, runtime } } } };
    const { run } = await runs.createRun({
      sessionId,
      run: runInput("loop-thinking-model", { agentloop, model: { provider: "anthropic", name: "loop-thinking-model", maxTokens: 2048, parameters } } as never),
    });
    const { run: done } = await finish(sessionId, run!.id);
    // The stand-in refuses a round 2 without the thinking block, as the real API does.
    expect({ status: done.status, error: done.error?.message, output: done.outputText }).toEqual({
      status: "completed",
      error: undefined,
      output: "Written by the loop.",
    });
    const rounds = provider.requests
      .filter((request) => (request.body as { model?: string }).model === "loop-thinking-model")
      .map((request) => request.body as { messages: Array<{ role: string; content: Array<Record<string, unknown>> }> });
    const replied = rounds[1]!.messages.find((message) => message.role === "assistant")!;
    expect(replied.content[0]).toEqual({ type: "thinking", thinking: "Write it, then report.", signature: expect.stringMatching(/^sig_/) });
    expect(replied.content[1]).toMatchObject({ type: "tool_use", id: "w" });
  });

  it("fails a run whose model calls a tool with input nested deeper than SERVICE_JOURNAL_MAX_JSON_DEPTH; the session goes on", async () => {
    const sessionId = await workspaceSession();
    // 48 levels: a reply any provider may send, whose tool call no event could carry.
    provider.script("deep-model", [{ toolCalls: [{ id: "d1", name: "fs", input: { v: nested(47) } }] }]);
    const { run } = await runs.createRun({ sessionId, run: runInput("deep-model") });
    const { run: failed, events } = await finish(sessionId, run!.id);
    expect(failed.status).toBe("failed");
    expect(failed.error).toMatchObject({ code: "model_invalid_response", message: expect.stringContaining("nests 48 levels deep") });
    expect(events.map((event) => event.type)).not.toContain("tool.call");
    provider.script("after-deep-model", [{ text: "still here" }]);
    const { run: next } = await runs.createRun({ sessionId, run: runInput("after-deep-model") });
    expect((await finish(sessionId, next!.id)).run.outputText).toBe("still here");
  });

  it("delivers every event a custom loop records, its too deep parts as their JSON text", async () => {
    const runtime = await admitTool(service.url, KEY_A, "js-program-agent-loop", "agentloops");
    const program = await admitProgram(
      service.url,
      KEY_A,
      `
      function turn(input, configuration, host) {
        let deep = 0;
        for (let i = 0; i < 60; i++) deep = [deep];
        host.emit({ deep });
        const { results } = host.dispatchTools({ v: 1, calls: [{ id: "c1", name: "fs", input: { deep } }] });
        return { v: 1, message: results[0].error.code };
      }`,
    );
    const sessionId = await workspaceSession();
    const agentloop = { environment: "box", implementation: { kind: { case: "program", value: { id: program, runtime } } } };
    const { run } = await runs.createRun({ sessionId, run: runInput("unused-model", { agentloop } as never) });
    const { run: done, events } = await finish(sessionId, run!.id);
    expect(done.outputText).toBe("input_too_deep");
    const progress = events.find((event) => event.type === "turn.progress")!;
    const call = events.find((event) => event.type === "tool.call")!;
    // Nothing is lost: the arrays that events cannot nest arrive as their JSON text.
    expect(depthOf((progress.data!.event as { deep: unknown }).deep)).toBe(60);
    expect(depthOf((call.data!.input as { deep: unknown }).deep)).toBe(60);
  });

  it("journals at most SERVICE_JOURNAL_MAX_PROGRESS_EVENTS of a custom loop's emits, none above _BYTES, and counts the rest", async () => {
    const runtime = await admitTool(service.url, KEY_A, "js-program-agent-loop", "agentloops");
    const program = await admitProgram(
      service.url,
      KEY_A,
      `
      function turn(input, configuration, host) {
        for (let i = 0; i < 3; i++) host.emit({ big: "x".repeat(20 * 1024) });
        for (let i = 0; i < 150; i++) host.emit({ i });
        return { v: 1, message: "emitted" };
      }`,
    );
    const sessionId = await workspaceSession();
    const agentloop = { environment: "box", implementation: { kind: { case: "program", value: { id: program, runtime } } } };
    const { run } = await runs.createRun({ sessionId, run: runInput("unused", { agentloop } as never) });
    const { run: done, events } = await finish(sessionId, run!.id);
    expect(done.outputText).toBe("emitted");
    const progress = events.filter((event) => event.type === "turn.progress");
    // The defaults: 100 events of at most 16 KiB; what passes them is dropped, and the run's end says how much.
    expect(progress).toHaveLength(100);
    expect(progress.map((event) => event.data?.event)).toEqual(Array.from({ length: 100 }, (_, i) => ({ i })));
    expect(events.at(-1)).toMatchObject({ type: "turn.completed", data: { progressDropped: 53 } });
  }, 120_000);

  it("ends a page of runs early, with a token, before the run that would pass SERVICE_LIST_MAX_BYTES", async () => {
    const small = await startTestService({
      SERVICE_ANTHROPIC_BASE_URL: provider.anthropicBaseUrl,
      SERVICE_LIST_MAX_BYTES: "8192",
      SERVICE_SESSION_MAX_BYTES: "8192",
    });
    try {
      const client = sessionClient(small.url, KEY_A);
      const runsOfSmall = runClient(small.url, KEY_A);
      const { session } = await client.createSession({ environments: [], tools: [] });
      const sessionId = session!.id;
      // About 3.5 KB stored each (the output text): two fit the budget, a third does not.
      provider.script("long-answer-model", [{ text: "a".repeat(3000) }], { loop: true });
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) {
        const { run } = await runsOfSmall.createRun({ sessionId, run: runInput("long-answer-model") });
        await eventsUntil(client, sessionId, runEnded(run!.id));
        ids.push(run!.id);
      }
      const first = await runsOfSmall.listRuns({ sessionId, pageSize: 1000 });
      expect(first.runs.map((run) => run.id)).toEqual([ids[2], ids[1]]);
      const second = await runsOfSmall.listRuns({ sessionId, pageSize: 1000, pageToken: first.nextPageToken });
      expect(second.runs.map((run) => run.id)).toEqual([ids[0]]);
      expect(second.nextPageToken).toBe("");
    } finally {
      await small.close();
    }
  });

  it("never writes a provider key to the data directory, the events or the log", async () => {
    const sessionId = await workspaceSession();
    provider.script("leak-model", [{ text: "fine" }]);
    const { run } = await runs.createRun({ sessionId, run: runInput("leak-model") });
    const { events } = await finish(sessionId, run!.id);
    expect(JSON.stringify(events.map((event) => event.data))).not.toContain(PROVIDER_KEY);
    expect(await filesContaining(service.dataDir, PROVIDER_KEY)).toEqual([]);
    expect(service.logs.join("\n")).not.toContain(PROVIDER_KEY);
  });
});
