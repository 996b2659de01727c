import * as fs from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startScriptedProvider, type ScriptedProvider } from "../../testing/scripted-provider/index.ts";
import { lineCount, whenChangedIn } from "./helpers/files.ts";
import { buildTestComponents } from "./helpers/pool.ts";
import { spawnService, type ServiceProcess } from "./helpers/process.ts";
import { KEY_A, KEY_B } from "./helpers/service.ts";
import { admitTool, eventsUntil, runClient, runEnded, sessionClient } from "./helpers/sessions.ts";

beforeAll(() => buildTestComponents(), 600_000);

describe("a server killed in the middle of a run", () => {
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
  async function serverWithAppendTool(name: string) {
    const env = {
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
    return { first, sessionId: session!.id, log: path.join(env.SERVICE_ENV_WORKSPACE_ROOT, "a", session!.id, "box", "log"), restart };
  }

  it("reports the run failed and the tool's outcome unknown after the restart, and replays nothing", async () => {
    const { first, sessionId, log, restart } = await serverWithAppendTool("tool");
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
    expect(events.at(-1)).toMatchObject({ type: "turn.failed", data: { code: "interrupted" } });
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

  it("keeps the counters, usage and conversation of a run killed during its second model stream", async () => {
    const { first, sessionId, log, restart } = await serverWithAppendTool("stream");
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
});
