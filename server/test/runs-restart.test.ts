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

  it("reports the run failed and the tool's outcome unknown after the restart, and replays nothing", async () => {
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
      tools: [{ name: "append", environment: "box", implementation: { kind: { case: "tool", value: tool } } }],
    });
    const sessionId = session!.id;
    provider.script("restart-model", [
      { toolCalls: [{ id: "a", name: "append", input: { v: 1, file: "log", line: "once", holdMs: 60_000 } }] },
      { text: "never asked" },
    ]);
    const { run } = await runClient(first.url, KEY_A).createRun({
      sessionId,
      run: { model: { provider: "anthropic", name: "restart-model", maxTokens: 0 }, message: "go", providerKeys: { anthropic: "sk-restart" } } as never,
    });
    await eventsUntil(sessionClient(first.url, KEY_A), sessionId, (event) => event.type === "operation.sent" && event.data?.kind === "execute");
    const log = path.join(root, "workspaces", "a", sessionId, "box", "log");
    // The tool has written its line and holds on.
    await whenChangedIn(path.dirname(log), async () => (await lineCount(log)) === 1);
    first.child.kill("SIGKILL");
    await first.exited;

    const second = await spawnService(env);
    services.push(second);
    const events = await eventsUntil(sessionClient(second.url, KEY_A), sessionId, runEnded(run!.id));
    expect(events.at(-1)).toMatchObject({ type: "turn.failed", data: { code: "interrupted" } });
    const execute = events.find((event) => event.type === "operation.sent" && event.data?.kind === "execute")!;
    const receipts = events.filter((event) => event.type === "operation.receipt" && event.data?.operationId === execute.data?.operationId);
    expect(receipts.map((event) => Object.keys(event.data?.receipt ?? {}))).toEqual([["unknown"]]);
    const { run: after } = await runClient(second.url, KEY_A).getRun({ sessionId, runId: run!.id });
    expect(after?.status).toBe("failed");
    expect(provider.requests.filter((request) => (request.body as { model?: string }).model === "restart-model")).toHaveLength(1);
    expect((await fs.readFile(log, "utf8")).trim().split("\n")).toEqual(["once"]);
  }, 120_000);
});
