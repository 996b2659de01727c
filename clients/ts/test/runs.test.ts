import { createHash } from "node:crypto";
import * as fs from "node:fs/promises";
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import type { Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { withCustomSection } from "../../../server/test/helpers/components.ts";
import { gateUntil } from "../../../server/test/helpers/gate.ts";
import { buildTestComponents, COMPONENTS_DIR } from "../../../server/test/helpers/pool.ts";
import { KEY_A, requestLogSince, startTestService, type TestService } from "../../../server/test/helpers/service.ts";
import { startScriptedProvider, type ScriptedProvider } from "../../../testing/scripted-provider/index.ts";
import {
  apiKeyInterceptor,
  createNodeTransport,
  createServiceClient,
  hostEnv,
  PlacementError,
  program,
  serviceEnv,
  serviceErrorCode,
  Skill,
  tool,
  type AgentLoop,
  type ResolvedProgram,
  type Run,
  type RunModel,
  type ServiceClient,
  type Session,
  type SessionEvent,
  type ToolPlacement,
} from "../src/node.ts";

const PROVIDER_KEY = "sk-client-runs-key-5c1f7e";
const providerKeys = { anthropic: PROVIDER_KEY };
const encode = (text: string) => new TextEncoder().encode(text);
const model = (name: string): RunModel => ({ provider: "anthropic", name });
const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

let provider: ScriptedProvider;
let service: TestService;
let root: string;
let client: ServiceClient;
const sandbox = serviceEnv({ name: "sandbox", filesystem: { workspace: "write" } });
let files: ToolPlacement;

beforeAll(async () => {
  await buildTestComponents();
  provider = await startScriptedProvider();
  root = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "skillenv-client-runs-")));
  service = await startTestService({
    SERVICE_ANTHROPIC_BASE_URL: provider.anthropicBaseUrl,
    SERVICE_MODEL_MAX_RETRIES: "0",
    SERVICE_ENV_FILESYSTEM_ALLOW: root,
    SERVICE_ENV_WORKSPACE_ROOT: path.join(root, "workspaces"),
  });
  client = clientOf(service.url);
  const workspaceJs = await fs.readFile(path.join(COMPONENTS_DIR, "workspace-js.wasm"));
  files = tool({ name: "files", description: "Reads, writes and lists files.", environment: sandbox, implementation: { kind: "tool", bytes: workspaceJs } });
}, 600_000);
afterAll(async () => {
  await service?.close();
  await provider?.close();
  if (root) await fs.rm(root, { recursive: true, force: true });
});

function clientOf(baseUrl: string): ServiceClient {
  return createServiceClient(createNodeTransport({ baseUrl, apiKey: KEY_A }));
}

/** A session with a workspace and the workspace-js tool placed as "files". */
function newSession(): Promise<Session> {
  return client.sessions.create({ environments: [sandbox], tools: [files] });
}

/** The RPCs the service answered since log line `from`, e.g. "skillenv.sessions.v1.RunService/CreateRun". */
async function proceduresSince(from: number): Promise<string[]> {
  return (await requestLogSince(service, from)).flatMap((line: { procedure?: string }) => line.procedure ?? []);
}

async function collect(events: AsyncIterable<SessionEvent>): Promise<SessionEvent[]> {
  const all: SessionEvent[] = [];
  for await (const event of events) all.push(event);
  return all;
}

/** The same component under an id no workspace has admitted yet (a custom section with a fresh label). */
const unique = (wasm: Uint8Array): Uint8Array => withCustomSection(wasm, crypto.randomUUID());

/** Each tool result's output by call id. */
async function toolOutputs(run: Run): Promise<Record<string, unknown>> {
  const results = (await collect(run.events())).filter((event) => event.type === "tool.result");
  return Object.fromEntries(results.map(({ data }) => [data.callId, data.output]));
}

describe("session.run", () => {
  it("pins a workspace skill's version with { name, version }, and records the version a run used", async () => {
    const name = "pinned-notes";
    await client.skills.upload(Skill.fromContent("---\ndescription: Pinned one.\n---\nONE\n", { name }));
    const second = await client.skills.upload(Skill.fromContent("---\ndescription: Pinned two.\n---\nTWO\n", { name }));
    provider.script("pinned-model", [{ toolCalls: [{ id: "load", name: "skills", input: { action: "load", name } }] }, { text: "Done." }], { loop: true });
    const session = await newSession();

    const pinned = await session.run({ message: "Load it.", model: model("pinned-model"), skills: [{ name, version: 1 }], providerKeys });
    const pinnedDone = await pinned.result();
    expect(pinnedDone.skills).toEqual([expect.objectContaining({ name, version: 1, pinned: true })]);
    expect((await toolOutputs(pinned)).load).toContain("ONE");

    const current = await session.run({ message: "Load it.", model: model("pinned-model"), skills: [name], providerKeys });
    const currentDone = await current.result();
    expect(currentDone.skills).toEqual([expect.objectContaining({ name, version: 2, pinned: false, contentHash: second.contentHash })]);
    expect((await toolOutputs(current)).load).toContain("TWO");
  });

  it("upserts a draft skill before submitting, references it by name, and uploads it once per instance", async () => {
    const skill = Skill.fromFiles({
      files: {
        "SKILL.md": "---\nname: changelog\ndescription: Writes changelogs.\n---\n# Changelog\nFollow reference/format.md.\n",
        "reference/format.md": "FORMAT v1",
      },
    });
    provider.script("draft-skill-model", [
      { toolCalls: [{ id: "load", name: "skills", input: { action: "load", name: "changelog" } }] },
      { toolCalls: [{ id: "read", name: "files", input: { v: 1, op: "read", path: "/workspace/skills/changelog/reference/format.md" } }] },
      { text: "Formatted." },
    ]);
    const session = await newSession();
    const from = service.logs.length;

    const run = await session.run({ message: "Write the changelog.", model: model("draft-skill-model"), skills: [skill], providerKeys });
    const done = await run.result();

    expect(done.status).toBe("completed");
    expect(done.skills.map(({ name }) => name)).toEqual(["changelog"]);
    expect((await client.skills.get("changelog")).contentHash).toBe(done.skills[0]?.contentHash);
    const calls = await proceduresSince(from);
    expect(calls.indexOf("skillenv.skills.v1.SkillService/PutSkill")).toBeGreaterThanOrEqual(0);
    expect(calls.indexOf("skillenv.skills.v1.SkillService/PutSkill")).toBeLessThan(calls.indexOf("skillenv.sessions.v1.RunService/CreateRun"));
    const outputs = await toolOutputs(run);
    expect(outputs.load).toContain("Follow reference/format.md.");
    expect(outputs.read).toEqual({ v: 1, ok: true, data: "FORMAT v1" });

    provider.script("draft-skill-model", [{ text: "Again." }]);
    const again = service.logs.length;
    await (await session.run({ message: "Once more.", model: model("draft-skill-model"), skills: [skill], providerKeys })).result();
    expect((await proceduresSince(again)).filter((procedure) => !procedure.startsWith("skillenv.sessions.v1."))).toEqual([]);
  });

  it("uploads run files given as bytes and stages them, with assets given by hash, into /workspace", async () => {
    provider.script("files-model", [
      {
        toolCalls: [
          { id: "notes", name: "files", input: { v: 1, op: "read", path: "/workspace/data/notes.txt" } },
          { id: "known", name: "files", input: { v: 1, op: "read", path: "/workspace/known.txt" } },
        ],
      },
      { text: "Read both." },
    ]);
    const known = await client.uploadAsset(encode("uploaded earlier"));
    const session = await newSession();

    const run = await session.run({
      message: "Read the files.",
      model: model("files-model"),
      providerKeys,
      files: [
        { path: "data/notes.txt", bytes: encode("meeting at noon") },
        { path: "known.txt", assetSha256: known.sha256 },
      ],
    });

    expect((await run.result()).status).toBe("completed");
    expect(await toolOutputs(run)).toEqual({ notes: { v: 1, ok: true, data: "meeting at noon" }, known: { v: 1, ok: true, data: "uploaded earlier" } });
    expect(await fs.readFile(path.join(root, "workspaces", "a", session.id, "sandbox", "data", "notes.txt"), "utf8")).toBe("meeting at noon");
  });

  it("events() yields only the run's own events, in order, from run.submitted to its end", async () => {
    provider.script("events-model", [
      { toolCalls: [{ id: "list", name: "files", input: { v: 1, op: "list", path: "/workspace" } }] },
      { text: "First done." },
      { toolCalls: [{ id: "write", name: "files", input: { v: 1, op: "write", path: "/workspace/out.txt", data: "hi" } }] },
      { text: "Second done." },
    ]);
    const session = await newSession();
    const first = await session.run({ message: "First.", model: model("events-model"), providerKeys });
    await first.result();
    const second = await session.run({ message: "Second.", model: model("events-model"), providerKeys });

    const events = await collect(second.events());

    expect(events[0]?.type).toBe("run.submitted");
    expect(events.at(-1)).toMatchObject({ type: "turn.completed", data: { outputText: "Second done." } });
    const seqs = events.map((event) => event.seq);
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
    expect(new Set(seqs).size).toBe(seqs.length);
    const sent = events.find((event) => event.type === "operation.sent" && event.data.kind === "execute");
    expect(sent?.data).toMatchObject({ runId: second.id, tool: "files" });
    // The receipt carries no run id; it is the run's because the run sent the operation.
    expect(events.filter((event) => event.data.operationId === sent?.data.operationId).map((event) => event.type)).toContain("operation.receipt");
    expect(events.some((event) => event.data.runId === first.id)).toBe(false);
    // A finished run's events end with it, though the session's journal goes on.
    expect((await collect(first.events())).at(-1)).toMatchObject({ type: "turn.completed", data: { runId: first.id, outputText: "First done." } });
  });

  it("result() answers the final record of a completed run", async () => {
    provider.script("result-model", [{ text: "All good.", usage: { inputTokens: 11, outputTokens: 4 } }]);
    const session = await newSession();
    const run = await session.run({ message: "How is it going?", model: model("result-model"), providerKeys });
    expect(run.status).toBe("running");

    const done = await run.result();

    expect(done).toMatchObject({
      id: run.id,
      sessionId: session.id,
      status: "completed",
      outputText: "All good.",
      stopReason: "end_turn",
      rounds: 1,
      toolCalls: 0,
    });
    expect(done.usage).toEqual({ inputTokens: 11, outputTokens: 4 });
    expect(done.error).toBeUndefined();
    expect(done.finishedAt).toBeInstanceOf(Date);
    expect(run.record).toEqual(done);
  });

  it("result() answers the final record of a failed run, with the failure's code", async () => {
    provider.script("refused-model", [{ error: { status: 401, type: "authentication_error", message: "invalid x-api-key" } }]);
    const session = await newSession();
    const run = await session.run({ message: "Hello?", model: model("refused-model"), providerKeys });

    const done = await run.result();

    expect(done.status).toBe("failed");
    expect(done.error?.code).toBe("model_auth_failed");
    expect(done.outputText).toBe("");
    expect(done.stopReason).toBeUndefined();
  });

  it("cancel() stops a running run; a finished run can then be deleted", async () => {
    provider.script("slow-model", [{ delayMs: 60_000, text: "too late" }]);
    const session = await newSession();
    const run = await session.run({ message: "Take your time.", model: model("slow-model"), providerKeys });
    for await (const event of run.events()) if (event.type === "model.request") break;

    const cancelled = await run.cancel();

    expect(cancelled.status).toBe("cancelled");
    expect(cancelled.error?.code).toBe("cancelled");
    expect(await run.result()).toEqual(cancelled);
    expect((await collect(run.events())).at(-1)?.type).toBe("run.cancelled");
    await run.delete();
    expect(serviceErrorCode(await session.runs.get(run.id).catch((error: unknown) => error))).toBe("run_not_found");
    expect((await session.runs.list()).runs).toEqual([]);
  });

  it("refuses a second run while one is running", async () => {
    provider.script("busy-model", [{ delayMs: 60_000, text: "never" }]);
    const session = await newSession();
    const running = await session.run({ message: "First.", model: model("busy-model"), providerKeys });

    const refused = await session.run({ message: "Second.", model: model("busy-model"), providerKeys }).catch((error: unknown) => error);

    expect(serviceErrorCode(refused)).toBe("run_in_progress");
    await running.cancel();
  });
});

describe("client.sessions.create with a run", () => {
  it("creates a session and its first run in one call, uploading the run's skill first", async () => {
    provider.script("first-run-model", [{ toolCalls: [{ id: "list", name: "skills", input: { action: "list" } }] }, { text: "Started together." }]);
    const skill = Skill.fromContent("---\nname: first-steps\ndescription: Gets a session going.\n---\n# First steps\n");

    const { session, run } = await client.sessions.create({
      environments: [sandbox],
      tools: [files],
      run: { message: "Begin.", model: model("first-run-model"), skills: [skill], providerKeys },
    });

    expect(session.state).toBe("ready");
    expect(run.sessionId).toBe(session.id);
    expect(await toolOutputs(run)).toEqual({ list: { skills: [{ name: "first-steps", description: "Gets a session going." }] } });
    expect((await run.result()).outputText).toBe("Started together.");
    expect((await session.runs.list()).runs.map(({ id }) => id)).toEqual([run.id]);
    expect((await session.runs.get(run.id)).record.status).toBe("completed");
  });

  it("admits the tools and uploads the run's skills and files in passes that overlap, each at most 4 at a time (spec §4.1 rule 4)", async () => {
    // Each pass's item begins with a call (a tool's GetTool, a skill's or a file's Presign) and
    // ends in one, held at the transport: a tool's AdmitTool, a draft skill's PutSkill, a file's
    // Finalize. They are held until each pass has 4 in flight and every item it has begun among
    // them: only passes that overlap reach that, and a pass that begins more than its bound
    // holds them all at once.
    const items = 8;
    const tag = crypto.randomUUID();
    const echo = await fs.readFile(path.join(COMPONENTS_DIR, "echo-wat.wasm"));
    const tools = Array.from({ length: items }, (_, i) =>
      tool({ name: `echo${i}`, environment: sandbox, implementation: { kind: "tool", bytes: unique(echo) } }),
    );
    const skills = Array.from({ length: items }, (_, i) => Skill.fromContent(`---\nname: overlap-${i}\ndescription: Skill ${i}.\n---\n# ${tag}\n`));
    const runFiles = Array.from({ length: items }, (_, i) => ({ path: `overlap/${i}.txt`, bytes: encode(`${tag} ${i}`) }));
    const fileHashes = new Set(runFiles.map(({ bytes }) => sha256(bytes)));
    type Pass = "tools" | "skills" | "files";
    const passOf = (method: string, message: { sha256?: string }): Pass | undefined => {
      if (method === "AdmitTool") return "tools";
      if (method === "PutSkill") return "skills";
      if (method === "Finalize" && message.sha256 !== undefined && fileHashes.has(message.sha256)) return "files";
      return undefined;
    };
    const beginningOf = (method: string, message: { sha256?: string }): Pass | undefined => {
      if (method === "GetTool") return "tools";
      if (method === "Presign") return message.sha256 !== undefined && fileHashes.has(message.sha256) ? "files" : "skills";
      return undefined;
    };
    const begun: Record<Pass, number> = { tools: 0, skills: 0, files: 0 };
    const inFlight: Record<Pass, number> = { tools: 0, skills: 0, files: 0 };
    const peak = { tools: 0, skills: 0, files: 0, together: 0 };
    const seen: Record<Pass, number> = { tools: 0, skills: 0, files: 0 };
    const gate = gateUntil(() => (["tools", "skills", "files"] as const).every((pass) => inFlight[pass] >= 4 && inFlight[pass] === begun[pass]));
    const holding: Interceptor = (next) => async (request) => {
      const beginning = beginningOf(request.method.name, request.message as { sha256?: string });
      if (beginning) begun[beginning]++;
      const pass = passOf(request.method.name, request.message as { sha256?: string });
      if (!pass) return next(request);
      seen[pass]++;
      inFlight[pass]++;
      peak[pass] = Math.max(peak[pass], inFlight[pass]);
      peak.together = Math.max(peak.together, inFlight.tools + inFlight.skills + inFlight.files);
      try {
        await gate.arrived();
        return await next(request);
      } finally {
        inFlight[pass]--;
      }
    };
    const instrumented = createServiceClient(
      createConnectTransport({ baseUrl: service.url, httpVersion: "1.1", interceptors: [apiKeyInterceptor(KEY_A), holding] }),
    );
    provider.script("overlap-model", [{ text: "All staged." }]);

    const { session, run } = await instrumented.sessions.create({
      environments: [sandbox],
      tools,
      run: { message: "Go.", model: model("overlap-model"), providerKeys, skills, files: runFiles },
    });

    expect(seen).toEqual({ tools: items, skills: items, files: items });
    expect(peak).toEqual({ tools: 4, skills: 4, files: 4, together: 12 });
    expect(await run.result()).toMatchObject({ status: "completed", outputText: "All staged." });
    expect(session.record.tools).toHaveLength(items);
    await session.delete();
  }, 120_000);
});

describe("a run's custom agent loop", () => {
  // The loops of components/: agent-loop-js (a component: model -> tools -> model, emitting
  // {"kind": "turn_started"}), and programs on the QuickJS agent-loop runtime.
  const component = (name: string) => fs.readFile(path.join(COMPONENTS_DIR, `${name}.wasm`));
  // A synchronous agent-loop program (QuickJS): one model call on the message and the configured suffix, answered in capitals.
  const SHOUTING_LOOP = encode(`
    function turn(input, configuration, host) {
      const answer = host.callModel({ v: 1, messages: [{ role: "user", content: input.message + configuration.suffix }] });
      host.emit({ v: 1, kind: "shouting" });
      return { v: 1, message: answer.message.content.toUpperCase() };
    }`);
  /** The text of the last message the model was last sent. */
  const lastSent = () => (provider.requests.at(-1)!.body as { messages: Array<{ content: Array<{ text: string }> }> }).messages.at(-1)?.content[0]?.text;
  /** The loop's own execute operation, as the run's events show it. */
  const loopOperation = (events: SessionEvent[]) => events.find((event) => event.type === "operation.sent" && event.data.agentLoop === true);

  it("admits an agent-loop component given by its bytes first, then runs it in place of the default loop", async () => {
    const loop = { kind: "agentloop" as const, bytes: await component("agent-loop-js") };
    provider.script("component-loop-model", [
      { toolCalls: [{ id: "write", name: "files", input: { v: 1, op: "write", path: "/workspace/loop.txt", data: "from the loop" } }] },
      { text: "Written by a custom loop." },
    ]);
    const session = await newSession();
    const from = service.logs.length;

    const run = await session.run({
      message: "Write it.",
      model: model("component-loop-model"),
      providerKeys,
      agentLoop: { environment: sandbox, implementation: loop },
    });
    const done = await run.result();

    const calls = await proceduresSince(from);
    // This service had never seen the component: looked up, then admitted (as an asset: 12 MB), before the run was submitted.
    expect(calls.indexOf("skillenv.env.v1.ArtifactService/GetAgentLoop")).toBeGreaterThanOrEqual(0);
    expect(calls.indexOf("skillenv.env.v1.ArtifactService/AdmitAgentLoop")).toBeGreaterThan(calls.indexOf("skillenv.env.v1.ArtifactService/GetAgentLoop"));
    expect(calls.indexOf("skillenv.env.v1.ArtifactService/AdmitAgentLoop")).toBeLessThan(calls.indexOf("skillenv.sessions.v1.RunService/CreateRun"));
    expect(calls).toContain("skillenv.assets.v1.AssetService/Finalize");
    expect(done).toMatchObject({ status: "completed", outputText: "Written by a custom loop.", rounds: 2, toolCalls: 1 });
    const events = await collect(run.events());
    expect(loopOperation(events)?.data).toMatchObject({ kind: "execute", environment: "sandbox", runId: run.id });
    expect(events.filter((event) => event.type === "turn.progress").map((event) => event.data.event)).toEqual([
      { v: 1, kind: "turn_started" },
      { v: 1, kind: "tool_calls", round: 1, count: 1 },
    ]);
    expect(events.find((event) => event.type === "tool.result")?.data).toMatchObject({ callId: "write", outcome: "returned" });
    expect(await fs.readFile(path.join(root, "workspaces", "a", session.id, "sandbox", "loop.txt"), "utf8")).toBe("from the loop");

    // The same bytes again, by environment name this time: admitted once per instance and client, nothing is looked up.
    provider.script("component-loop-model", [{ text: "Again." }]);
    const again = service.logs.length;
    const second = await session.run({
      message: "Again.",
      model: model("component-loop-model"),
      providerKeys,
      agentLoop: { environment: "sandbox", implementation: loop },
    });
    expect((await second.result()).outputText).toBe("Again.");
    expect((await proceduresSince(again)).filter((procedure) => !procedure.startsWith("skillenv.sessions.v1."))).toEqual([]);
  }, 120_000);

  it("runs a program on an agent-loop runtime given by its bytes, with the program's configuration, in a session created with its run", async () => {
    const shouting = program({
      runtime: { kind: "agentloop", bytes: await component("qjs-program-agent-loop") },
      source: SHOUTING_LOOP,
      configuration: { suffix: "!" },
    });
    provider.script("program-loop-model", [{ text: "quiet answer" }]);
    const from = service.logs.length;

    const { session, run } = await client.sessions.create({
      environments: [sandbox],
      tools: [files],
      run: { message: "hi", model: model("program-loop-model"), providerKeys, agentLoop: { environment: sandbox, implementation: shouting } },
    });
    const done = await run.result();

    const calls = await proceduresSince(from);
    expect(calls.indexOf("skillenv.env.v1.ArtifactService/AdmitProgram")).toBeLessThan(calls.indexOf("skillenv.sessions.v1.SessionService/CreateSession"));
    expect(calls.indexOf("skillenv.env.v1.ArtifactService/AdmitAgentLoop")).toBeLessThan(calls.indexOf("skillenv.sessions.v1.SessionService/CreateSession"));
    expect(done).toMatchObject({ status: "completed", outputText: "QUIET ANSWER", rounds: 1 });
    // The program's configuration reached it: the model was sent the message with its suffix.
    expect(lastSent()).toBe("hi!");
    const events = await collect(run.events());
    expect(loopOperation(events)?.data).toMatchObject({ kind: "execute", environment: "sandbox" });
    expect(events.find((event) => event.type === "turn.progress")?.data.event).toEqual({ v: 1, kind: "shouting" });

    // The placement's own configuration wins over the program's.
    provider.script("program-loop-model", [{ text: "louder" }]);
    const louder = await session.run({
      message: "hey",
      model: model("program-loop-model"),
      providerKeys,
      agentLoop: { environment: "sandbox", implementation: shouting, configuration: { suffix: "?" } },
    });
    expect((await louder.result()).outputText).toBe("LOUDER");
    expect(lastSent()).toBe("hey?");
  }, 120_000);

  it("takes an admitted agent loop's id and a prepared program as they are; the server refuses an id it has not admitted as an agent loop", async () => {
    const runtime = await client.env.admitComponent({ kind: "agentloop", bytes: await component("qjs-program-agent-loop") });
    const prepared = await client.prepare(program({ runtime, source: SHOUTING_LOOP, configuration: { suffix: "." } }));
    expect(prepared.entrypoint).toBe("turn");
    const session = await newSession();
    provider.script("prepared-loop-model", [{ text: "prepared" }]);
    const from = service.logs.length;

    const run = await session.run({
      message: "go",
      model: model("prepared-loop-model"),
      providerKeys,
      agentLoop: { environment: "sandbox", implementation: prepared },
    });

    expect((await run.result()).outputText).toBe("PREPARED");
    expect((await proceduresSince(from)).filter((procedure) => procedure.includes("ArtifactService/"))).toEqual([]);
    // A tool's id is not an agent loop's; nor is an id nothing was admitted under.
    const toolId = await client.env.admitComponent({ kind: "tool", bytes: await component("echo-wat") });
    for (const id of [toolId, "0".repeat(64)]) {
      const refused = await session
        .run({ message: "go", model: model("prepared-loop-model"), providerKeys, agentLoop: { environment: "sandbox", implementation: id } })
        .catch((error: unknown) => error);
      expect(serviceErrorCode(refused)).toBe("not_found");
    }
    // An agent loop's id is sent as it is, with nothing looked up.
    const loopId = await client.env.admitComponent({ kind: "agentloop", bytes: await component("agent-loop-js") });
    provider.script("prepared-loop-model", [{ text: "by id" }]);
    const byId = service.logs.length;
    const idRun = await session.run({
      message: "go",
      model: model("prepared-loop-model"),
      providerKeys,
      agentLoop: { environment: "sandbox", implementation: loopId },
    });
    expect((await idRun.result()).outputText).toBe("by id");
    expect((await proceduresSince(byId)).filter((procedure) => procedure.includes("ArtifactService/"))).toEqual([]);
    expect((await collect(idRun.events())).find((event) => event.type === "turn.progress")?.data.event).toEqual({ v: 1, kind: "turn_started" });
  }, 120_000);

  it("client.prepare loads an agent-loop placement on every worker; runs of several sessions and clients use it without admitting again", async () => {
    const bytes = unique(await component("agent-loop-js"));
    const from = service.logs.length;

    const prepared = await client.prepare({ environment: sandbox, implementation: { kind: "agentloop", bytes }, configuration: { note: "kept" } });

    // Looked up, admitted (as an asset: 12 MB), then prepared as an agent loop.
    const calls = (await proceduresSince(from)).filter((procedure) => procedure.includes("ArtifactService/"));
    expect(calls).toEqual([
      "skillenv.env.v1.ArtifactService/GetAgentLoop",
      "skillenv.env.v1.ArtifactService/AdmitAgentLoop",
      "skillenv.env.v1.ArtifactService/Prepare",
    ]);
    expect(prepared).toEqual({ environment: sandbox, implementation: sha256(bytes), configuration: { note: "kept" } });
    expect(Object.isFrozen(prepared)).toBe(true);
    expect(service.serviceEnv.pool!.isPrepared(prepared.implementation as string)).toBe(true);

    // A session of this client runs it; a session of another client, created with its run, too: nothing is admitted again.
    provider.script("prepared-component-loop-model", [
      { toolCalls: [{ id: "write", name: "files", input: { v: 1, op: "write", path: "/workspace/prepared.txt", data: "by the prepared loop" } }] },
      { text: "Ran the prepared loop." },
    ]);
    const session = await newSession();
    const before = service.logs.length;
    const run = await session.run({ message: "List.", model: model("prepared-component-loop-model"), providerKeys, agentLoop: prepared });
    expect(await run.result()).toMatchObject({ status: "completed", outputText: "Ran the prepared loop.", rounds: 2, toolCalls: 1 });
    const events = await collect(run.events());
    expect(loopOperation(events)?.data).toMatchObject({ kind: "execute", environment: "sandbox", runId: run.id });
    expect(events.filter((event) => event.type === "turn.progress").map((event) => event.data.event)).toEqual([
      { v: 1, kind: "turn_started" },
      { v: 1, kind: "tool_calls", round: 1, count: 1 },
    ]);
    expect(await fs.readFile(path.join(root, "workspaces", "a", session.id, "sandbox", "prepared.txt"), "utf8")).toBe("by the prepared loop");
    provider.script("prepared-component-loop-model", [{ text: "And again, elsewhere." }]);
    const other = await clientOf(service.url).sessions.create({
      environments: [sandbox],
      run: { message: "Again.", model: model("prepared-component-loop-model"), providerKeys, agentLoop: prepared },
    });
    expect(await other.run.result()).toMatchObject({ status: "completed", outputText: "And again, elsewhere." });
    expect(loopOperation(await collect(other.run.events()))).toBeDefined();
    expect((await proceduresSince(before)).filter((procedure) => !procedure.startsWith("skillenv.sessions.v1."))).toEqual([]);
    await Promise.all([session.delete(), other.session.delete()]);
  }, 120_000);

  it("client.prepare keeps a program loop's configuration, or the placement's own, and refuses a loop it cannot prepare before sending anything", async () => {
    const shouting = program({
      runtime: { kind: "agentloop", bytes: await component("qjs-program-agent-loop") },
      source: SHOUTING_LOOP,
      configuration: { suffix: "!" },
    });
    const from = service.logs.length;

    const [own, overridden] = await Promise.all([
      client.prepare({ environment: sandbox, implementation: shouting }),
      client.prepare({ environment: sandbox, implementation: shouting, configuration: { suffix: "?" } }),
    ]);

    expect(own.configuration).toEqual({ suffix: "!" });
    expect(overridden.configuration).toEqual({ suffix: "?" });
    for (const prepared of [own, overridden])
      expect(prepared.implementation).toMatchObject({ type: "service_program", entrypoint: "turn", configuration: { suffix: "!" } });
    const { runtime } = own.implementation as ResolvedProgram;
    expect(service.serviceEnv.pool!.isPrepared(runtime)).toBe(true);
    expect((await proceduresSince(from)).filter((procedure) => procedure.endsWith("ArtifactService/Prepare"))).toHaveLength(2);
    const session = await newSession();
    const before = service.logs.length;
    for (const [prepared, suffix] of [
      [own, "!"],
      [overridden, "?"],
    ] as const) {
      provider.script("prepared-program-loop-model", [{ text: "prepared" }]);
      const run = await session.run({ message: "hi", model: model("prepared-program-loop-model"), providerKeys, agentLoop: prepared });
      expect((await run.result()).outputText).toBe("PREPARED");
      expect(lastSent()).toBe(`hi${suffix}`);
    }
    expect((await proceduresSince(before)).filter((procedure) => !procedure.startsWith("skillenv.sessions.v1."))).toEqual([]);

    // Refused before any call: by name only, in a host environment, of a tool's form.
    const laptop = hostEnv({ name: "laptop", tools: {} });
    const refused = service.logs.length;
    const refusal = (placed: AgentLoop) => client.prepare(placed).catch((error: unknown) => error);
    const byName = await refusal({ environment: "sandbox", implementation: shouting });
    expect(byName).toBeInstanceOf(PlacementError);
    expect((byName as Error).message).toBe(
      "cannot prepare the agent loop: its environment is given only by name (sandbox); only agent loops placed in a service environment definition (serviceEnv) are prepared",
    );
    expect(((await refusal({ environment: laptop as never, implementation: shouting })) as Error).message).toMatch(
      /cannot prepare the agent loop: it is placed in the host environment laptop/,
    );
    expect(((await refusal({ environment: sandbox, implementation: { kind: "tool", bytes: encode("") } })) as Error).message).toMatch(/kind: "agentloop"/);
    expect(((await refusal({ environment: sandbox, implementation: "not-an-id" })) as Error).message).toMatch(/not an agent loop id/);
    expect(await requestLogSince(service, refused)).toEqual([]);
    await session.delete();
  }, 120_000);

  it("refuses, before sending anything, a loop outside the session's service environments or of a tool's form", async () => {
    const laptop = hostEnv({ name: "laptop", tools: { clock: () => ({ now: "noon" }) } });
    const session = await client.sessions.create({ environments: [sandbox, laptop], tools: [files, tool({ name: "clock", environment: laptop })] });
    const loopBytes = { kind: "agentloop" as const, bytes: await component("agent-loop-js") };
    const runWith = (agentLoop: Parameters<Session["run"]>[0]["agentLoop"]) =>
      session.run({ message: "hi", model: model("never-called"), providerKeys, agentLoop: agentLoop! }).catch((error: unknown) => error);
    const from = service.logs.length;

    const inHost = await runWith({ environment: "laptop", implementation: loopBytes });
    expect(inHost).toBeInstanceOf(PlacementError);
    expect((inHost as Error).message).toMatch(/host environment laptop .*service environment/);
    expect(await runWith({ environment: laptop as never, implementation: loopBytes })).toBeInstanceOf(PlacementError);
    expect(((await runWith({ environment: "elsewhere", implementation: loopBytes })) as Error).message).toMatch(
      /environment elsewhere, which session \S+ does not define/,
    );
    expect(((await runWith({ environment: "sandbox", implementation: { kind: "tool", bytes: loopBytes.bytes } })) as Error).message).toMatch(
      /kind: "agentloop"/,
    );
    const onToolRuntime = program({ runtime: { kind: "tool", bytes: new Uint8Array() }, source: SHOUTING_LOOP });
    expect(((await runWith({ environment: "sandbox", implementation: onToolRuntime })) as Error).message).toMatch(/agent-loop runtime/);
    expect(((await runWith({ environment: "sandbox", implementation: "not-an-id" })) as Error).message).toMatch(/not an agent loop id/);
    expect(await proceduresSince(from)).toEqual([]);

    // sessions.create with a run: nothing is admitted and no session is created.
    const sessionsBefore = (await client.sessions.list()).sessions.length;
    const created = await client.sessions
      .create({
        environments: [sandbox, laptop],
        tools: [files],
        run: { message: "hi", model: model("never-called"), providerKeys, agentLoop: { environment: "laptop", implementation: loopBytes } },
      })
      .catch((error: unknown) => error);
    expect(created).toBeInstanceOf(PlacementError);
    expect((await client.sessions.list()).sessions.length).toBe(sessionsBefore);
    await session.delete();
  });

  it("refuses a program whose runtime digest turns out to be a tool runtime, before submitting", async () => {
    const toolRuntime = await client.env.admitComponent({ kind: "tool", bytes: await component("qjs-program-tool") });
    const session = await newSession();
    const from = service.logs.length;

    const refused = await session
      .run({
        message: "hi",
        model: model("never-called"),
        providerKeys,
        agentLoop: { environment: sandbox, implementation: program({ runtime: toolRuntime, source: SHOUTING_LOOP }) },
      })
      .catch((error: unknown) => error);

    expect(refused).toBeInstanceOf(PlacementError);
    expect((refused as Error).message).toMatch(/runs on the tool runtime .* needs an agent-loop runtime/);
    expect((await proceduresSince(from)).filter((procedure) => procedure.startsWith("skillenv.sessions.v1."))).toEqual([]);
  });
});

describe("idempotent submission", () => {
  it("submits again when the answer is lost on the way, and only one run exists", async () => {
    const proxy = await startLossyProxy(service.url);
    try {
      provider.script("retry-model", [{ text: "Exactly once." }]);
      const session = await clientOf(proxy.url).sessions.create({ environments: [], tools: [] });
      const from = service.logs.length;

      const run = await session.run({ message: "Once, please.", model: model("retry-model"), providerKeys });

      expect(proxy.dropped()).toBe(1);
      expect((await proceduresSince(from)).filter((procedure) => procedure.endsWith("/CreateRun"))).toHaveLength(2);
      expect(run.record.idempotencyKey).not.toBe("");
      expect((await run.result()).outputText).toBe("Exactly once.");
      expect((await session.runs.list()).runs.map(({ id }) => id)).toEqual([run.id]);
      expect(provider.requests.filter((request) => request.body.model === "retry-model")).toHaveLength(1);
    } finally {
      await proxy.close();
    }
  });

  it("answers the existing run when a submission is repeated under its key", async () => {
    provider.script("keyed-model", [{ text: "Once." }]);
    const session = await newSession();
    const options = { message: "Keyed.", model: model("keyed-model"), providerKeys, idempotencyKey: "order-42" };
    const first = await session.run(options);
    await first.result();

    const repeated = await session.run(options);

    expect(repeated.id).toBe(first.id);
    expect(repeated.record.idempotencyKey).toBe("order-42");
    expect((await session.runs.list()).runs).toHaveLength(1);
  });
});

describe("provider keys", () => {
  it("reach the provider and never the events or the run record", async () => {
    provider.script("key-model", [{ toolCalls: [{ id: "list", name: "files", input: { v: 1, op: "list", path: "/workspace" } }] }, { text: "Listed." }]);
    const session = await newSession();
    const run = await session.run({ message: "List the workspace.", model: model("key-model"), providerKeys });
    const done = await run.result();
    await session.end();

    const events = await collect(session.events());

    expect(events.at(-1)?.type).toBe("session.ended");
    expect(provider.requests.at(-1)?.headers["x-api-key"]).toBe(PROVIDER_KEY);
    expect(JSON.stringify(events)).not.toContain(PROVIDER_KEY);
    expect(JSON.stringify(done)).not.toContain(PROVIDER_KEY);
  });
});

/**
 * A real HTTP proxy in front of the service that relays every call, except that it hangs up on
 * the first CreateRun once the service has answered it: a response lost on its way back.
 */
async function startLossyProxy(target: string): Promise<{ url: string; dropped: () => number; close: () => Promise<void> }> {
  let dropped = 0;
  const server = http.createServer((request, response) => {
    const upstream = http.request(new URL(request.url ?? "/", target), { method: request.method, headers: request.headers }, (answer) => {
      if (dropped === 0 && request.url?.endsWith("/CreateRun")) {
        dropped++;
        answer.resume().on("end", () => request.socket.destroy());
        return;
      }
      response.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(response);
    });
    request.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    dropped: () => dropped,
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
