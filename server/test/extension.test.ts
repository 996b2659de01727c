import { spawn } from "node:child_process";
import * as fs from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import { fromJson, toJsonString } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import type { Client } from "@connectrpc/connect";
import { Level } from "level";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ExecuteRequest, SetupRequest, StageRequest } from "../../gen/skillenv/extension/v1/extension_pb.js";
import { RunSchema } from "../../gen/skillenv/sessions/v1/runs_pb.js";
import { SessionSchema, type SessionService } from "../../gen/skillenv/sessions/v1/sessions_pb.js";
import { startScriptedProvider, type ScriptedProvider } from "../../testing/scripted-provider/index.ts";
import { freePort, jsonOf, TestExtension } from "./helpers/extension.ts";
import { KEY_A, startTestService, type TestService } from "./helpers/service.ts";
import { eventsUntil, filesContaining, refusedWith, runClient, runEnded, sessionClient } from "./helpers/sessions.ts";
import { bundleOf, publish, skillMd } from "./helpers/skills.ts";

const CREDENTIAL = "ext-credential-5b1d7c-do-not-leak";

describe("extension environments", () => {
  let extension: TestExtension;
  let provider: ScriptedProvider;
  let service: TestService;
  let sessions: Client<typeof SessionService>;
  /** Where an extension is down until a test starts one there. */
  let laterPort: number;

  beforeAll(async () => {
    extension = await new TestExtension().start();
    provider = await startScriptedProvider();
    laterPort = await freePort();
    service = await startTestService({
      SERVICE_ENV_NETWORK_ALLOW: `${extension.url},http://127.0.0.1:${laterPort}`,
      SERVICE_ANTHROPIC_BASE_URL: provider.anthropicBaseUrl,
    });
    sessions = sessionClient(service.url, KEY_A);
  });
  afterAll(async () => {
    await service?.close();
    await extension?.close();
    await provider?.close();
  });

  async function extensionSession(url = extension.url): Promise<string> {
    const { session } = await sessions.createSession({
      environments: [
        { name: "remote", kind: { case: "extension", value: { url, credential: CREDENTIAL, configuration: fromJson(ValueSchema, { region: "test" }) } } },
      ],
      tools: ["echo", "hang", "drop", "refuse", "leak", "whoami"].map((name) => ({
        name,
        environment: "remote",
        implementation: { kind: { case: "opaque" as const, value: fromJson(ValueSchema, { kind: name }) } },
      })),
    });
    return session!.id;
  }

  const call = (sessionId: string, tool: string, input: object = {}, seconds = 30n) =>
    sessions.callTool({ sessionId, tool, input: fromJson(ValueSchema, input as never), timeout: { seconds, nanos: 0 } });

  it("sets up with the configuration and the sealed credential as a bearer token, and runs tools", async () => {
    const sessionId = await extensionSession();
    const setup = extension.calls.findLast((c) => c.method === "setup")!;
    expect(setup.authorization).toBe(`Bearer ${CREDENTIAL}`);
    expect(jsonOf((setup.request as SetupRequest).configuration)).toEqual({ region: "test" });
    expect((setup.request as SetupRequest).binding?.id).toBe(`${sessionId}/remote`);

    const { receipt, operationId } = await call(sessionId, "echo", { hello: "extension" });
    expect(receipt?.outcome).toMatchObject({ case: "returned" });
    const execute = extension.calls.findLast((c) => c.method === "execute")!.request as ExecuteRequest;
    expect(execute.operationId).toBe(operationId);
    expect(jsonOf(execute.input)).toEqual({ hello: "extension" });
    expect(jsonOf(execute.implementation)).toEqual({ kind: "echo" });
    const events = await eventsUntil(sessions, sessionId, (event) => event.type === "operation.receipt" && event.data?.operationId === operationId);
    expect(events.slice(-3).map((event) => event.type)).toEqual(["operation.accepted", "operation.progress", "operation.receipt"]);
  });

  it("refuses a URL outside the network allow-list and creates nothing", async () => {
    const before = (await sessions.listSessions({})).sessions.length;
    const request = { environments: [{ name: "x", kind: { case: "extension" as const, value: { url: "http://127.0.0.1:9" } } }] };
    expect(await refusedWith(sessions.createSession(request))).toBe("grant_not_allowed");
    expect((await sessions.listSessions({})).sessions.length).toBe(before);
  });

  it("never shows, journals or logs the credential", async () => {
    const sessionId = await extensionSession();
    await call(sessionId, "echo", {});
    const { session } = await sessions.getSession({ sessionId });
    expect(toJsonString(SessionSchema, session!)).not.toContain(CREDENTIAL);
    expect(toJsonString(SessionSchema, session!)).toContain(extension.url);
    await sessions.endSession({ sessionId });
    const events = await eventsUntil(sessions, sessionId, (event) => event.type === "session.ended");
    expect(JSON.stringify(events.map((event) => event.data))).not.toContain(CREDENTIAL);
    expect(await filesContaining(service.dataDir, CREDENTIAL)).toEqual([]);
    expect(service.logs.join("\n")).not.toContain(CREDENTIAL);
  });

  it("cuts the credential out of whatever the extension echoes of it, before anything keeps it", async () => {
    const sessionId = await extensionSession();
    const leaked = await call(sessionId, "leak");
    expect(leaked.receipt?.outcome).toMatchObject({
      case: "failure",
      value: { code: "bad_[redacted]", message: "refused for [redacted]", details: { token: "[redacted]", "[redacted]": "a key" } },
    });
    const echoed = await call(sessionId, "whoami");
    expect(echoed.receipt?.outcome.case).toBe("returned");
    expect(jsonOf((echoed.receipt!.outcome.value as { output?: never }).output)).toEqual({ credential: "[redacted]" });

    // A run: the model's call of the leaking tool, then a run whose staging the extension refuses.
    const runs = runClient(service.url, KEY_A);
    provider.script("leaky-model", [{ toolCalls: [{ id: "l1", name: "leak", input: {} }] }, { text: "noted" }]);
    const first = await runs.createRun({
      sessionId,
      run: { model: { provider: "anthropic", name: "leaky-model", maxTokens: 0 }, message: "go", providerKeys: { anthropic: "k" } } as never,
    });
    expect((await eventsUntil(sessions, sessionId, runEnded(first.run!.id))).at(-1)?.type).toBe("turn.completed");
    await publish(service, "leak-skill", bundleOf({ "SKILL.md": skillMd({ description: "Staged where it cannot be." }) }));
    extension.leakOnStage = true;
    try {
      const second = await runs.createRun({
        sessionId,
        run: {
          model: { provider: "anthropic", name: "leaky-model", maxTokens: 0 },
          message: "go",
          skills: [{ kind: "skill", name: "leak-skill" }],
          providerKeys: { anthropic: "k" },
        } as never,
      });
      expect((await eventsUntil(sessions, sessionId, runEnded(second.run!.id))).at(-1)?.type).toBe("turn.failed");
      const { run } = await runs.getRun({ sessionId, runId: second.run!.id });
      expect(run?.error).toMatchObject({ code: "staging_failed", message: expect.stringContaining("no room to stage for [redacted]") });
    } finally {
      extension.leakOnStage = false;
    }

    await sessions.endSession({ sessionId });
    const events = JSON.stringify((await eventsUntil(sessions, sessionId, (event) => event.type === "session.ended")).map((event) => event.data));
    expect(events).toContain("working for [redacted]");
    expect(events).not.toContain(CREDENTIAL);
    const { runs: listed } = await runs.listRuns({ sessionId });
    expect(listed.map((run) => toJsonString(RunSchema, run)).join()).not.toContain(CREDENTIAL);
    expect(await filesContaining(service.dataDir, CREDENTIAL)).toEqual([]);
    expect(service.logs.join("\n")).not.toContain(CREDENTIAL);
  });

  it("fails without sending when the extension is down: extension_unavailable, retryable, and it never hears of it", async () => {
    const later = `http://127.0.0.1:${laterPort}`;
    const down = await extensionSession(later);
    const { session } = await sessions.getSession({ sessionId: down });
    expect(session?.environments[0]?.state).toBe("failed");
    const setup = await eventsUntil(sessions, down, (event) => event.type === "operation.receipt" && event.data?.kind === "setup");
    expect(setup.at(-1)?.data?.receipt).toMatchObject({
      failure: { code: "extension_unavailable", retryable: true, message: expect.stringContaining("nothing was sent") },
    });
    // A call to the failed environment is refused before it is journaled.
    expect(await refusedWith(call(down, "echo"))).toBe("environment_not_ready");

    // Once the extension is up, what reaches it is the setup asked for now, never the one that failed.
    const upLater = await new TestExtension().start(laterPort);
    try {
      expect((await sessions.setupEnvironment({ sessionId: down, environment: "remote" })).environment?.state).toBe("ready");
      expect((await call(down, "echo", { now: "up" })).receipt?.outcome.case).toBe("returned");
      expect(upLater.methods()).toEqual(["setup", "execute"]);
      await sessions.endSession({ sessionId: down });
      const sent = (await eventsUntil(sessions, down, (event) => event.type === "session.ended")).filter((event) => event.type === "operation.sent");
      expect(sent.map((event) => event.data?.kind)).toEqual(["setup", "setup", "execute", "detach"]);
    } finally {
      await upLater.close();
    }
  });

  it("reports an unreliable answer as unknown, and a refusal as the extension's failure", async () => {
    const sessionId = await extensionSession();
    extension.garbage();
    expect((await call(sessionId, "echo")).receipt?.outcome.case).toBe("unknown");
    expect((await call(sessionId, "drop")).receipt?.outcome.case).toBe("unknown");
    expect((await call(sessionId, "refuse")).receipt?.outcome).toMatchObject({
      case: "failure",
      value: { code: "extension_permission_denied", retryable: false },
    });
  });

  it("reports a timeout at the deadline and sends the extension a cancel", async () => {
    const sessionId = await extensionSession();
    const { receipt, operationId } = await call(sessionId, "hang", {}, 1n);
    expect(receipt?.outcome).toMatchObject({ case: "failure", value: { code: "timeout" } });
    const cancel = await extension.called("cancel", (request) => request.operationId === operationId);
    expect((cancel.request as { binding?: { id: string } }).binding?.id).toBe(`${sessionId}/remote`);
  });

  it("detaches on end and tears down on delete", async () => {
    const ended = await extensionSession();
    await sessions.endSession({ sessionId: ended });
    expect(extension.calls.some((c) => c.method === "detach" && (c.request as { binding?: { id: string } }).binding?.id === `${ended}/remote`)).toBe(true);
    const deleted = await extensionSession();
    await sessions.deleteSession({ sessionId: deleted });
    expect(extension.calls.some((c) => c.method === "teardown" && (c.request as { binding?: { id: string } }).binding?.id === `${deleted}/remote`)).toBe(true);
  });

  it("stages a run's skill files into the extension's workspace, and runs its tools for the model", async () => {
    await publish(service, "ext-skill", bundleOf({ "SKILL.md": skillMd({ description: "For the extension." }), "scripts/run.sh": "echo hi" }));
    const sessionId = await extensionSession();
    provider.script("ext-model", [{ toolCalls: [{ id: "e1", name: "echo", input: { from: "model" } }] }, { text: "done" }]);
    const { run } = await runClient(service.url, KEY_A).createRun({
      sessionId,
      run: {
        model: { provider: "anthropic", name: "ext-model", maxTokens: 0 },
        message: "go",
        skills: [{ kind: "skill", name: "ext-skill" }],
        providerKeys: { anthropic: "k" },
      } as never,
    });
    const events = await eventsUntil(sessions, sessionId, runEnded(run!.id));
    expect(events.at(-1)?.type).toBe("turn.completed");
    const stage = extension.calls.findLast((c) => c.method === "stage")!.request as StageRequest;
    expect(stage.files.map((file) => file.path).sort()).toEqual(["skills/ext-skill/SKILL.md", "skills/ext-skill/scripts/run.sh"]);
    expect(new TextDecoder().decode(stage.files.find((file) => file.path.endsWith("run.sh"))!.content)).toBe("echo hi");
  });
});

describe("an extension's sealed credential at rest", () => {
  let extension: TestExtension;
  const dataDirs: string[] = [];
  beforeAll(async () => {
    extension = await new TestExtension().start();
  });
  afterAll(async () => {
    await extension?.close();
    for (const dir of dataDirs) await fs.rm(dir, { recursive: true, force: true });
  });

  /** A service on `dataDir` for the span of `use`: a restart is a second call with the same directory. */
  async function onDataDir<T>(dataDir: string, use: (sessions: Client<typeof SessionService>) => Promise<T>): Promise<T> {
    const service = await startTestService({ SERVICE_DATA_DIR: dataDir, SERVICE_ENV_NETWORK_ALLOW: extension.url });
    try {
      return await use(sessionClient(service.url, KEY_A));
    } finally {
      await service.close();
    }
  }

  /** A ready session whose extension environment has CREDENTIAL. */
  async function credentialSession(sessions: Client<typeof SessionService>): Promise<string> {
    const { session } = await sessions.createSession({
      environments: [{ name: "remote", kind: { case: "extension", value: { url: extension.url, credential: CREDENTIAL } } }],
      tools: [{ name: "echo", environment: "remote", implementation: { kind: { case: "opaque", value: fromJson(ValueSchema, { kind: "echo" }) } } }],
    });
    expect(session?.state).toBe("ready");
    return session!.id;
  }

  /** A data directory holding one such session, its server stopped. */
  async function sessionAtRest(): Promise<{ dataDir: string; sessionId: string }> {
    const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "skillenv-sealed-"));
    dataDirs.push(dataDir);
    return { dataDir, sessionId: await onDataDir(dataDir, credentialSession) };
  }

  const echo = (sessions: Client<typeof SessionService>, sessionId: string) =>
    sessions.callTool({ sessionId, tool: "echo", input: fromJson(ValueSchema, { sent: sessionId }) });
  const executesOf = (sessionId: string) =>
    extension.calls.filter(
      (call) => call.method === "execute" && (jsonOf((call.request as ExecuteRequest).input) as { sent?: string } | undefined)?.sent === sessionId,
    );

  it("is unsealed again after a restart", async () => {
    const { dataDir, sessionId } = await sessionAtRest();
    await onDataDir(dataDir, async (sessions) => {
      expect((await echo(sessions, sessionId)).receipt?.outcome.case).toBe("returned");
    });
    expect(executesOf(sessionId).map((call) => call.authorization)).toEqual([`Bearer ${CREDENTIAL}`]);
  });

  it.each([
    ["its sealing key is lost", async (dataDir: string) => fs.rm(path.join(dataDir, "sealing-key"))],
    ["its sealed value was altered", alterSealedCredential],
  ])("sends nothing when %s, and the server carries on", async (_name, spoil) => {
    const { dataDir, sessionId } = await sessionAtRest();
    await spoil(dataDir);
    await onDataDir(dataDir, async (sessions) => {
      // No credential can be unsealed: no request leaves, neither without its credential nor with
      // what a wrong key would make of it, and the receipt says so (a failure, not unknown).
      const { receipt } = await echo(sessions, sessionId);
      expect(receipt?.outcome.case).toBe("failure");
      expect(receipt?.outcome.value).toMatchObject({ code: "credential_unavailable", message: expect.stringContaining("nothing was sent") });
      expect(executesOf(sessionId)).toEqual([]);
      // A session created now seals with the key the server has now.
      const fresh = await credentialSession(sessions);
      expect((await echo(sessions, fresh)).receipt?.outcome.case).toBe("returned");
      expect(executesOf(fresh).map((call) => call.authorization)).toEqual([`Bearer ${CREDENTIAL}`]);
    });
  });
});

/** Changes one character of every sealed credential in the data directory's metadata (its server stopped). */
async function alterSealedCredential(dataDir: string): Promise<void> {
  const db = new Level<string, string>(path.join(dataDir, "metadata"), { valueEncoding: "utf8" });
  await db.open();
  try {
    let altered = 0;
    for await (const [key, value] of db.iterator()) {
      const sealed = /"sealedCredential":"v1\.([A-Za-z0-9_-]+)"/.exec(value);
      if (!sealed) continue;
      // The first character: all six of its bits are the IV's (the last may be only padding).
      const payload = sealed[1]!;
      await db.put(key, value.replace(payload, (payload[0] === "A" ? "B" : "A") + payload.slice(1)));
      altered++;
    }
    expect(altered).toBe(1);
  } finally {
    await db.close();
  }
}

describe("the example shell extension, behind the service", () => {
  it("runs a model's shell command in the binding's workspace, where the run's skill files were staged", async () => {
    const root = await fs.mkdtemp(path.join(os.tmpdir(), "skillenv-shell-ext-"));
    await fs.chmod(root, 0o700);
    const child = spawn(process.execPath, [path.resolve(import.meta.dirname, "../../examples/shell-extension/main.ts"), "--port", "0", "--root", root], {
      env: { PATH: process.env.PATH ?? "", SHELL_EXTENSION_TOKEN: "shell-token-for-test" },
      stdio: ["ignore", "ignore", "pipe"],
    });
    let stderr = "";
    const url = await new Promise<string>((resolve, reject) => {
      child.stderr!.on("data", (chunk: Buffer) => {
        stderr += chunk.toString();
        const match = /listening on (\S+)/.exec(stderr);
        if (match?.[1]) resolve(match[1]);
      });
      child.once("exit", (code) => reject(new Error(`shell extension exited with ${code}: ${stderr}`)));
    });
    const provider = await startScriptedProvider();
    const service = await startTestService({ SERVICE_ENV_NETWORK_ALLOW: url, SERVICE_ANTHROPIC_BASE_URL: provider.anthropicBaseUrl });
    try {
      await publish(
        service,
        "shell-skill",
        bundleOf({ "SKILL.md": skillMd({ description: "Has a script." }), "scripts/hello.sh": "echo hello from the skill" }),
      );
      const sessions = sessionClient(service.url, KEY_A);
      const { session } = await sessions.createSession({
        environments: [{ name: "shell", kind: { case: "extension", value: { url, credential: "shell-token-for-test" } } }],
        tools: [
          {
            name: "sh",
            description: "Runs a shell command.",
            environment: "shell",
            implementation: { kind: { case: "opaque", value: fromJson(ValueSchema, { tool: "shell" }) } },
          },
        ],
      });
      provider.script("shell-model", [
        { toolCalls: [{ id: "s1", name: "sh", input: { command: "bash skills/shell-skill/scripts/hello.sh" } }] },
        { text: "ran it" },
      ]);
      const { run } = await runClient(service.url, KEY_A).createRun({
        sessionId: session!.id,
        run: {
          model: { provider: "anthropic", name: "shell-model", maxTokens: 0 },
          message: "run the script",
          skills: [{ kind: "skill", name: "shell-skill" }],
          providerKeys: { anthropic: "k" },
        } as never,
      });
      const events = await eventsUntil(sessions, session!.id, runEnded(run!.id));
      const result = events.find((event) => event.type === "tool.result");
      expect(result?.data).toMatchObject({ outcome: "returned", output: { exitCode: 0, stdout: "hello from the skill\n" } });
      expect(events.at(-1)?.type).toBe("turn.completed");
    } finally {
      await service.close();
      await provider.close();
      child.kill("SIGTERM");
      await fs.rm(root, { recursive: true, force: true });
    }
  }, 60_000);
});
