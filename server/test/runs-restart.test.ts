import * as fs from "node:fs/promises";
import * as os from "node:os";
import * as http from "node:http";
import * as path from "node:path";
import { fromJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ExtensionEnvironmentService } from "../../gen/skillenv/extension/v1/extension_pb.js";
import { startScriptedProvider, type ScriptedProvider } from "../../testing/scripted-provider/index.ts";
import { lineCount, whenChangedIn } from "./helpers/files.ts";
import { buildTestComponents } from "./helpers/pool.ts";
import { spawnService, type ServiceProcess } from "./helpers/process.ts";
import { KEY_A, KEY_B, type TestService } from "./helpers/service.ts";
import { admitTool, eventsUntil, filesContaining, runClient, runEnded, sessionClient } from "./helpers/sessions.ts";
import { bundleOf, publish, skillMd } from "./helpers/skills.ts";

beforeAll(() => buildTestComponents(), 600_000);

describe("a server killed in the middle of a run", () => {
  // With SERVICE_RUN_RESUME=off: the run ends `interrupted`, keeping what it did.
  let provider: ScriptedProvider;
  let root: string;
  const services: ServiceProcess[] = [];

  beforeAll(async () => {
    provider = await startScriptedProvider();
    root = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "skillenv-run-restart-")));
  });
  afterAll(async () => {
    for (const service of services) service.child.kill("SIGKILL");
    await provider?.close();
    await fs.rm(root, { recursive: true, force: true });
  });

  /** A server in a process of its own on `name`'s data directory, and a session of it with the `append` tool. */
  async function serverWithAppendTool(name: string, settings: Record<string, string> = {}) {
    const env = {
      ...settings,
      SERVICE_DATA_DIR: path.join(root, `data-${name}`),
      SERVICE_API_KEYS: `a=${KEY_A},b=${KEY_B}`,
      SERVICE_ENV_FILESYSTEM_ALLOW: root,
      SERVICE_ENV_WORKSPACE_ROOT: path.join(root, `workspaces-${name}`),
      SERVICE_ANTHROPIC_BASE_URL: provider.anthropicBaseUrl,
    };
    const first = await spawnService(env);
    services.push(first);
    const tool = await admitTool(first.url, KEY_A, "append-js");
    const { session } = await sessionClient(first.url, KEY_A).createSession({
      environments: [{ name: "box", kind: { case: "service", value: { grants: { filesystem: { workspace: "write" } } } } }],
      tools: [{ name: "append", environment: "box", implementation: { kind: { case: "tool", value: tool } } }],
    });
    const restart = async () => {
      const next = await spawnService(env);
      services.push(next);
      return next;
    };
    return {
      first,
      sessionId: session!.id,
      dataDir: env.SERVICE_DATA_DIR,
      log: path.join(env.SERVICE_ENV_WORKSPACE_ROOT, "a", session!.id, "box", "log"),
      restart,
    };
  }

  const RESUME_OFF = { SERVICE_RUN_RESUME: "off" };

  it("reports the run failed and the tool's outcome unknown after the restart, and replays nothing (resumption off)", async () => {
    const { first, sessionId, log, restart } = await serverWithAppendTool("tool", RESUME_OFF);
    provider.script("restart-model", [
      { toolCalls: [{ id: "a", name: "append", input: { v: 1, file: "log", line: "once", holdMs: 60_000 } }] },
      { text: "never asked" },
    ]);
    const { run } = await runClient(first.url, KEY_A).createRun({
      sessionId,
      run: { model: { provider: "anthropic", name: "restart-model", maxTokens: 0 }, message: "go", providerKeys: { anthropic: "sk-restart" } } as never,
    });
    await eventsUntil(sessionClient(first.url, KEY_A), sessionId, (event) => event.type === "operation.sent" && event.data?.kind === "execute");
    // The tool has written its line and holds on.
    await whenChangedIn(path.dirname(log), async () => (await lineCount(log)) === 1);
    first.child.kill("SIGKILL");
    await first.exited;

    const second = await restart();
    const events = await eventsUntil(sessionClient(second.url, KEY_A), sessionId, runEnded(run!.id));
    expect(events.at(-1)).toMatchObject({ type: "turn.failed", data: { code: "interrupted", message: expect.stringContaining("SERVICE_RUN_RESUME") } });
    const execute = events.find((event) => event.type === "operation.sent" && event.data?.kind === "execute")!;
    const receipts = events.filter((event) => event.type === "operation.receipt" && event.data?.operationId === execute.data?.operationId);
    expect(receipts.map((event) => Object.keys(event.data?.receipt ?? {}))).toEqual([["unknown"]]);
    const { run: after } = await runClient(second.url, KEY_A).getRun({ sessionId, runId: run!.id });
    expect(after?.status).toBe("failed");
    // What the turn did before the crash is kept: one model call, one tool call.
    expect({ rounds: after?.rounds, toolCalls: after?.toolCalls }).toEqual({ rounds: 1, toolCalls: 1 });
    expect(provider.requests.filter((request) => (request.body as { model?: string }).model === "restart-model")).toHaveLength(1);
    expect((await fs.readFile(log, "utf8")).trim().split("\n")).toEqual(["once"]);
  }, 120_000);

  it("keeps the counters, usage and conversation of a run killed during its second model stream (resumption off)", async () => {
    const { first, sessionId, log, restart } = await serverWithAppendTool("stream", RESUME_OFF);
    provider.script("stream-kill-model", [
      { toolCalls: [{ id: "call-1", name: "append", input: { v: 1, file: "log", line: "ran" } }], usage: { inputTokens: 11, outputTokens: 7 } },
      // Round 2 streams its first characters, then holds the stream open.
      { text: "a long answer that never ends", chunkChars: 2, chunkDelayMs: 60_000, usage: { inputTokens: 13, outputTokens: 5 } },
    ]);
    const { run } = await runClient(first.url, KEY_A).createRun({
      sessionId,
      run: { model: { provider: "anthropic", name: "stream-kill-model", maxTokens: 0 }, message: "go", providerKeys: { anthropic: "sk-restart" } } as never,
    });
    await eventsUntil(sessionClient(first.url, KEY_A), sessionId, (event) => event.type === "assistant.delta" && event.data?.round === 2);
    first.child.kill("SIGKILL");
    await first.exited;

    const second = await restart();
    const events = await eventsUntil(sessionClient(second.url, KEY_A), sessionId, runEnded(run!.id));
    const counts = { rounds: 2, toolCalls: 1, usage: { inputTokens: 11, outputTokens: 7 } };
    expect(events.at(-1)).toMatchObject({ type: "turn.failed", data: { code: "interrupted", ...counts } });
    const { run: after } = await runClient(second.url, KEY_A).getRun({ sessionId, runId: run!.id });
    expect({ rounds: after?.rounds, toolCalls: after?.toolCalls, usage: after?.usage }).toEqual({
      rounds: 2,
      toolCalls: 1,
      usage: expect.objectContaining({ inputTokens: 11n, outputTokens: 7n }),
    });

    // The session's next run sends the model everything the interrupted one did.
    provider.script("after-kill-model", [{ text: "done" }]);
    const { run: next } = await runClient(second.url, KEY_A).createRun({
      sessionId,
      run: { model: { provider: "anthropic", name: "after-kill-model", maxTokens: 0 }, message: "next", providerKeys: { anthropic: "sk-restart" } } as never,
    });
    await eventsUntil(sessionClient(second.url, KEY_A), sessionId, runEnded(next!.id));
    const sent = provider.requests.find((request) => (request.body as { model?: string }).model === "after-kill-model")!.body as {
      messages: Array<{ role: string; content: Array<Record<string, unknown>> }>;
    };
    expect(sent.messages.map((message) => [message.role, message.content.map((part) => part.type)])).toEqual([
      ["user", ["text"]],
      ["assistant", ["tool_use"]],
      ["user", ["tool_result"]],
      ["user", ["text"]],
    ]);
    expect(sent.messages[0]!.content[0]).toMatchObject({ text: "go" });
    expect(sent.messages[1]!.content[0]).toMatchObject({ id: "call-1", name: "append" });
    expect(sent.messages[2]!.content[0]).toMatchObject({ tool_use_id: "call-1", is_error: false });
    // The tool ran once, before the crash, and was not run again.
    expect((await fs.readFile(log, "utf8")).trim().split("\n")).toEqual(["ran"]);
  }, 120_000);

  /** The requests the provider got for `model`, in order, as the Messages API bodies. */
  function requestsFor(model: string) {
    return provider.requests.filter((request) => (request.body as { model?: string }).model === model);
  }
  type SentMessages = Array<{ role: string; content: Array<Record<string, unknown>> }>;
  const messagesOf = (request: { body: unknown }) => (request.body as { messages: SentMessages }).messages;

  it("resumes a run killed during a tool call: the model hears the outcome is unknown, and nothing runs twice", async () => {
    const { first, sessionId, dataDir, log, restart } = await serverWithAppendTool("resume-tool");
    provider.script("resume-tool-model", [
      { toolCalls: [{ id: "held", name: "append", input: { v: 1, file: "log", line: "once", holdMs: 60_000 } }] },
      { text: "finished after the restart" },
    ]);
    const { run } = await runClient(first.url, KEY_A).createRun({
      sessionId,
      run: {
        model: { provider: "anthropic", name: "resume-tool-model", maxTokens: 0 },
        message: "go",
        providerKeys: { anthropic: "sk-resume-secret" },
      } as never,
    });
    await whenChangedIn(path.dirname(log), async () => (await lineCount(log)) === 1);
    first.child.kill("SIGKILL");
    await first.exited;
    // The key the run resumes with is at rest only sealed.
    expect(await filesContaining(dataDir, "sk-resume-secret")).toEqual([]);

    const second = await restart();
    const events = await eventsUntil(sessionClient(second.url, KEY_A), sessionId, runEnded(run!.id));
    expect(events.at(-1)).toMatchObject({ type: "turn.completed", data: { rounds: 2, toolCalls: 1, outputText: "finished after the restart" } });
    const resumed = events.filter((event) => event.type === "run.resumed");
    expect(resumed.map((event) => event.data)).toEqual([{ runId: run!.id, round: 2, messages: 3, unknownToolCalls: ["held"], restaged: false }]);
    const results = events.filter((event) => event.type === "tool.result");
    expect(results.map((event) => event.data)).toEqual([
      { runId: run!.id, round: 1, callId: "held", name: "append", outcome: "unknown", message: expect.stringContaining("may or may not have run") },
    ]);
    const execute = events.find((event) => event.type === "operation.sent" && event.data?.kind === "execute")!;
    const receipts = events.filter((event) => event.type === "operation.receipt" && event.data?.operationId === execute.data?.operationId);
    expect(receipts.map((event) => Object.keys(event.data?.receipt ?? {}))).toEqual([["unknown"]]);

    // Round 2 went to the model once, with the key the run was submitted with and the unknown outcome.
    const sent = requestsFor("resume-tool-model");
    expect(sent).toHaveLength(2);
    expect(sent[1]!.headers["x-api-key"]).toBe("sk-resume-secret");
    expect(messagesOf(sent[1]!).map((message) => [message.role, message.content.map((part) => part.type)])).toEqual([
      ["user", ["text"]],
      ["assistant", ["tool_use"]],
      ["user", ["tool_result"]],
    ]);
    expect(messagesOf(sent[1]!)[2]!.content[0]).toMatchObject({ tool_use_id: "held", is_error: true, content: expect.stringContaining("unknown_outcome") });
    const { run: after } = await runClient(second.url, KEY_A).getRun({ sessionId, runId: run!.id });
    expect({ status: after?.status, rounds: after?.rounds, toolCalls: after?.toolCalls }).toEqual({ status: "completed", rounds: 2, toolCalls: 1 });
    expect((await fs.readFile(log, "utf8")).trim().split("\n")).toEqual(["once"]);
  }, 120_000);

  it("resumes a run killed during its second model stream with the tool result it had, and counts what it used", async () => {
    const { first, sessionId, log, restart } = await serverWithAppendTool("resume-stream");
    provider.script("resume-stream-model", [
      { toolCalls: [{ id: "call-1", name: "append", input: { v: 1, file: "log", line: "ran" } }], usage: { inputTokens: 11, outputTokens: 7 } },
      { text: "a long answer that never ends", chunkChars: 2, chunkDelayMs: 60_000, usage: { inputTokens: 13, outputTokens: 5 } },
      { text: "the answer", usage: { inputTokens: 17, outputTokens: 3 } },
    ]);
    const { run } = await runClient(first.url, KEY_A).createRun({
      sessionId,
      run: { model: { provider: "anthropic", name: "resume-stream-model", maxTokens: 0 }, message: "go", providerKeys: { anthropic: "sk-resume" } } as never,
    });
    await eventsUntil(sessionClient(first.url, KEY_A), sessionId, (event) => event.type === "assistant.delta" && event.data?.round === 2);
    first.child.kill("SIGKILL");
    await first.exited;

    const second = await restart();
    const events = await eventsUntil(sessionClient(second.url, KEY_A), sessionId, runEnded(run!.id));
    // The cut stream's usage was never reported whole: only the two replies that came count.
    const counts = { rounds: 2, toolCalls: 1, usage: expect.objectContaining({ inputTokens: 28, outputTokens: 10 }) };
    expect(events.at(-1)).toMatchObject({ type: "turn.completed", data: { outputText: "the answer", ...counts } });
    expect(events.find((event) => event.type === "run.resumed")?.data).toEqual({
      runId: run!.id,
      round: 2,
      messages: 3,
      unknownToolCalls: [],
      restaged: false,
    });
    const sent = requestsFor("resume-stream-model");
    expect(sent).toHaveLength(3);
    expect(messagesOf(sent[2]!)).toEqual(messagesOf(sent[1]!));
    expect(messagesOf(sent[2]!)[2]!.content[0]).toMatchObject({ tool_use_id: "call-1", is_error: false });
    const { run: after } = await runClient(second.url, KEY_A).getRun({ sessionId, runId: run!.id });
    expect({ status: after?.status, outputText: after?.outputText, usage: after?.usage }).toEqual({
      status: "completed",
      outputText: "the answer",
      usage: expect.objectContaining({ inputTokens: 28n, outputTokens: 10n }),
    });
    expect((await fs.readFile(log, "utf8")).trim().split("\n")).toEqual(["ran"]);

    // The session's next run sees the resumed run's whole conversation once.
    provider.script("after-resume-model", [{ text: "ok" }]);
    const { run: next } = await runClient(second.url, KEY_A).createRun({
      sessionId,
      run: { model: { provider: "anthropic", name: "after-resume-model", maxTokens: 0 }, message: "next", providerKeys: { anthropic: "sk-resume" } } as never,
    });
    await eventsUntil(sessionClient(second.url, KEY_A), sessionId, runEnded(next!.id));
    expect(messagesOf(requestsFor("after-resume-model")[0]!).map((message) => [message.role, message.content.map((part) => part.type)])).toEqual([
      ["user", ["text"]],
      ["assistant", ["tool_use"]],
      ["user", ["tool_result"]],
      ["assistant", ["text"]],
      ["user", ["text"]],
    ]);
  }, 120_000);

  it("keeps a round's returned results and reports only the call still in flight as unknown", async () => {
    const { first, sessionId, log, restart } = await serverWithAppendTool("resume-round");
    provider.script("resume-round-model", [
      {
        toolCalls: [
          { id: "fast", name: "append", input: { v: 1, file: "log", line: "fast" } },
          { id: "slow", name: "append", input: { v: 1, file: "log", line: "slow", holdMs: 60_000 } },
        ],
      },
      { text: "done" },
    ]);
    const { run } = await runClient(first.url, KEY_A).createRun({
      sessionId,
      run: { model: { provider: "anthropic", name: "resume-round-model", maxTokens: 0 }, message: "go", providerKeys: { anthropic: "sk-resume" } } as never,
    });
    await eventsUntil(sessionClient(first.url, KEY_A), sessionId, (event) => event.type === "tool.result" && event.data?.callId === "fast");
    await whenChangedIn(path.dirname(log), async () => (await lineCount(log)) === 2);
    first.child.kill("SIGKILL");
    await first.exited;

    const second = await restart();
    const events = await eventsUntil(sessionClient(second.url, KEY_A), sessionId, runEnded(run!.id));
    expect(events.at(-1)).toMatchObject({ type: "turn.completed", data: { rounds: 2, toolCalls: 2, outputText: "done" } });
    expect(events.find((event) => event.type === "run.resumed")?.data).toMatchObject({ round: 2, unknownToolCalls: ["slow"] });
    const sent = requestsFor("resume-round-model");
    expect(sent).toHaveLength(2);
    expect(messagesOf(sent[1]!)[2]!.content).toEqual([
      expect.objectContaining({ tool_use_id: "fast", is_error: false }),
      expect.objectContaining({ tool_use_id: "slow", is_error: true, content: expect.stringContaining("unknown_outcome") }),
    ]);
    expect((await fs.readFile(log, "utf8")).trim().split("\n").sort()).toEqual(["fast", "slow"]);
  }, 120_000);

  it("stages again when killed while staging, and the held stage's operation ends unknown", async () => {
    const extension = await startHoldingExtension();
    try {
      const settings = { SERVICE_ENV_NETWORK_ALLOW: extension.url };
      const { first, restart } = await serverWithAppendTool("resume-stage", settings);
      const skill = bundleOf({ "SKILL.md": skillMd({ description: "Staged before the model is called." }) });
      await publish({ url: first.url } as TestService, "staged-skill", skill);
      const { session } = await sessionClient(first.url, KEY_A).createSession({
        environments: [{ name: "remote", kind: { case: "extension", value: { url: extension.url } } }],
      });
      provider.script("resume-stage-model", [{ text: "staged and done" }]);
      const { run } = await runClient(first.url, KEY_A).createRun({
        sessionId: session!.id,
        run: {
          model: { provider: "anthropic", name: "resume-stage-model", maxTokens: 0 },
          message: "go",
          skills: [{ kind: "skill", name: "staged-skill" }],
          providerKeys: { anthropic: "sk-resume" },
        } as never,
      });
      await extension.firstStage;
      first.child.kill("SIGKILL");
      await first.exited;

      const second = await restart();
      const events = await eventsUntil(sessionClient(second.url, KEY_A), session!.id, runEnded(run!.id));
      expect(events.at(-1)).toMatchObject({ type: "turn.completed", data: { rounds: 1, outputText: "staged and done" } });
      expect(events.find((event) => event.type === "run.resumed")?.data).toEqual({
        runId: run!.id,
        round: 1,
        messages: 0,
        unknownToolCalls: [],
        restaged: true,
      });
      // Two stage operations: the held one, unknown; the resumed turn's, returned, with the snapshot's files.
      const stages = events.filter((event) => event.type === "operation.sent" && event.data?.kind === "stage");
      expect(stages).toHaveLength(2);
      const outcomes = stages.map((stage) =>
        events
          .filter((event) => event.type === "operation.receipt" && event.data?.operationId === stage.data?.operationId)
          .map((event) => Object.keys(event.data?.receipt ?? {})[0]),
      );
      expect(outcomes).toEqual([["unknown"], ["returned"]]);
      expect(extension.staged.map((files) => files.includes("skills/staged-skill/SKILL.md"))).toEqual([true, true]);
      expect(requestsFor("resume-stage-model")).toHaveLength(1);
    } finally {
      await extension.close();
    }
  }, 120_000);
});

/**
 * An extension whose first Stage never answers (the test kills the server meanwhile) and whose
 * later ones do; it records the paths each Stage was given.
 */
async function startHoldingExtension() {
  const staged: string[][] = [];
  let stageArrived!: () => void;
  const firstStage = new Promise<void>((resolve) => (stageArrived = resolve));
  const adapter = connectNodeAdapter({
    routes: (router) =>
      router.service(ExtensionEnvironmentService, {
        setup: async () => ({}),
        cancel: async () => ({}),
        detach: async () => ({}),
        teardown: async () => ({}),
        async stage(request) {
          staged.push(request.files.map((file) => file.path));
          if (staged.length === 1) {
            stageArrived();
            await new Promise(() => undefined);
          }
          return {};
        },
        async *execute() {
          yield { receipt: { case: "returned" as const, value: { output: fromJson(ValueSchema, { ok: true }) } } };
        },
      }),
  });
  const server = http.createServer(adapter);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    staged,
    firstStage,
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
