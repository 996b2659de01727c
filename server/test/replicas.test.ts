/**
 * Replicas on one PostgreSQL and one S3 bucket serving sessions (docs/operations.md, "Scaling"):
 * a session's calls reach its owner through any replica, a dead owner's sessions are taken over
 * once its lease expired, and an owner that was paused past its lease never writes to the journal
 * again. Real processes (the service's entry point), a real PostgreSQL and a real S3
 * implementation, all started here.
 */
import { fromJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import * as fs from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SessionEvent } from "../../gen/skillenv/sessions/v1/sessions_pb.js";
import { lineCount, whenChangedIn } from "./helpers/files.ts";
import { hostClient, TestHost } from "./helpers/hosts.ts";
import { buildTestComponents } from "./helpers/pool.ts";
import { startPostgres } from "./helpers/postgres.ts";
import { spawnService, type ServiceProcess } from "./helpers/process.ts";
import { startS3 } from "./helpers/s3.ts";
import { KEY_A, KEY_B, bearer } from "./helpers/service.ts";
import { admitTool, eventsUntil, refusedWith, runClient, runEnded, sessionClient, whenServed } from "./helpers/sessions.ts";
import { bundleOf, publish, skillMd } from "./helpers/skills.ts";
import { startScriptedProvider, type ScriptedProvider } from "../../testing/scripted-provider/index.ts";
import type { TestService } from "./helpers/service.ts";

let postgres: Awaited<ReturnType<typeof startPostgres>>;
let s3: Awaited<ReturnType<typeof startS3>>;
let root: string;
let shared: Record<string, string>;
let provider: ScriptedProvider;
const started: ServiceProcess[] = [];

beforeAll(async () => {
  await buildTestComponents();
  [postgres, s3, provider] = await Promise.all([startPostgres(), startS3(), startScriptedProvider()]);
  root = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "skillenv-replicas-")));
  shared = {
    ...s3.env,
    SERVICE_DATABASE_URL: await postgres.createDatabase(),
    SERVICE_BLOB_URL: s3.blobUrl(),
    SERVICE_API_KEYS: `a=${KEY_A},b=${KEY_B}`,
    // Short, so that takeovers come soon (the tests wait on events, never on this), and long enough
    // that a renewal held up on a loaded machine does not lose a live owner its sessions.
    SERVICE_SESSION_LEASE_SECS: "4",
    SERVICE_ENV_FILESYSTEM_ALLOW: root,
    // On storage every replica reaches, so a workspace outlives its owner (docs/operations.md).
    SERVICE_ENV_WORKSPACE_ROOT: path.join(root, "workspaces"),
    SERVICE_ANTHROPIC_BASE_URL: provider.anthropicBaseUrl,
  };
}, 600_000);

afterAll(async () => {
  for (const service of started) {
    service.child.kill("SIGCONT");
    service.child.kill("SIGKILL");
  }
  await Promise.allSettled([postgres?.stop(), s3?.stop(), provider?.close()]);
  if (root) await fs.rm(root, { recursive: true, force: true });
});

/** A replica: the real entry point on its own data directory, sharing the database, bucket and workspaces. */
async function replica(name: string): Promise<ServiceProcess> {
  const service = await spawnService({ ...shared, SERVICE_DATA_DIR: path.join(root, name), SERVICE_REPLICA_ID: name });
  started.push(service);
  return service;
}

type Replayed = Pick<SessionEvent, "seq" | "type" | "data">;

async function replay(url: string, sessionId: string, until: (event: SessionEvent) => boolean = () => false): Promise<Replayed[]> {
  const events = await eventsUntil(sessionClient(url, KEY_A), sessionId, until);
  return events.map(({ seq, type, data }) => ({ seq, type, data }));
}

function appendInput(line: string, holdMs: number) {
  return fromJson(ValueSchema, { v: 1, file: "runs.log", line, holdMs });
}

async function appendSession(url: string): Promise<{ sessionId: string; log: string }> {
  const tool = await admitTool(url, KEY_A, "append-js");
  const { session } = await sessionClient(url, KEY_A).createSession({
    environments: [{ name: "files", kind: { case: "service", value: { grants: { filesystem: { workspace: "write" } } } } }],
    tools: [{ name: "append", environment: "files", implementation: { kind: { case: "tool", value: tool } } }],
  });
  const sessionId = session!.id;
  return { sessionId, log: path.join(root, "workspaces", "a", sessionId, "files", "runs.log") };
}

describe("replicas on one PostgreSQL and one S3", () => {
  let a: ServiceProcess;
  let b: ServiceProcess;

  beforeAll(async () => {
    a = await replica("replica-a");
    b = await replica("replica-b");
  });

  it("serve a session created through one replica through the other, on every protocol, with one journal", async () => {
    const tool = await admitTool(a.url, KEY_A, "echo-wat");
    const { session } = await sessionClient(a.url, KEY_A).createSession({
      environments: [{ name: "box", kind: { case: "service", value: {} } }],
      tools: [{ name: "echo", environment: "box", implementation: { kind: { case: "tool", value: tool } } }],
    });
    const sessionId = session!.id;

    // Connect through b: forwarded to a, which owns the session.
    const viaB = sessionClient(b.url, KEY_A);
    const called = await viaB.callTool({ sessionId, tool: "echo", input: fromJson(ValueSchema, { said: "through b" }) });
    expect(called.receipt?.outcome.case).toBe("returned");
    // The JSON path through b.
    const json = await fetch(`${b.url}/v1/sessions/${sessionId}/tools/echo:call`, {
      method: "POST",
      headers: { ...bearer(KEY_A), "content-type": "application/json" },
      body: JSON.stringify({ input: { said: "json through b" } }),
    });
    expect(json.status).toBe(200);
    expect((await json.json()).receipt.returned).toBeDefined();
    // Another workspace's key is refused by the owner, as it would be by one server.
    expect(await refusedWith(sessionClient(b.url, KEY_B).getSession({ sessionId }))).toBe("session_not_found");

    await viaB.endSession({ sessionId });
    const [fromA, fromB] = await Promise.all([replay(a.url, sessionId), replay(b.url, sessionId)]);
    expect(fromB).toEqual(fromA);
    expect(fromA.map((event) => Number(event.seq))).toEqual(fromA.map((_, i) => i + 1));
    expect(fromA.filter((event) => event.type === "operation.receipt" && event.data?.kind === "execute")).toHaveLength(2);
    expect(fromA.at(-1)?.type).toBe("session.ended");
  });

  it("hand a killed owner's session to the other replica once its lease expired: one unknown receipt, nothing run twice", async () => {
    const owner = await replica("replica-c");
    const { sessionId, log } = await appendSession(owner.url);
    // A slow call made through b, which forwards it to the owner; the guest writes its line and holds on.
    void sessionClient(b.url, KEY_A)
      .callTool({ sessionId, tool: "append", input: appendInput("slow", 60_000) })
      .catch(() => undefined);
    await whenChangedIn(path.dirname(log), async () => (await lineCount(log)) >= 1);
    const before = await replay(b.url, sessionId, (event) => event.type === "operation.sent" && event.data?.kind === "execute");
    const slowOperation = before.at(-1)!.data!.operationId;
    owner.child.kill("SIGKILL");
    await owner.exited;

    const viaB = sessionClient(b.url, KEY_A);
    const again = await whenServed(() => viaB.callTool({ sessionId, tool: "append", input: appendInput("fast", 0) }));
    expect(again.receipt?.outcome.case).toBe("returned");
    expect((await fs.readFile(log, "utf8")).split("\n").filter(Boolean)).toEqual(["slow", "fast"]);

    await viaB.endSession({ sessionId });
    const after = await replay(b.url, sessionId);
    expect(after.slice(0, before.length)).toEqual(before);
    expect(after.map((event) => Number(event.seq))).toEqual(after.map((_, i) => i + 1));
    const receipts = after.filter((event) => event.type === "operation.receipt" && event.data?.operationId === slowOperation);
    expect(receipts).toHaveLength(1);
    expect(receipts[0]?.data?.receipt).toMatchObject({ unknown: {} });
    const moved = after.find((event) => event.type === "session.moved");
    // By b (the call through it), or by a's sweep, which may come first once the lease expired:
    // both replicas sweep for sessions with an operation left without a receipt.
    expect(moved?.data).toMatchObject({
      replica: expect.stringMatching(/^replica-[ab]$/),
      previousReplica: "replica-c",
      operationsUnknown: 1,
      workspaces: ["files"],
    });
    // Taken over before the new call was sent.
    const fastSent = after.findIndex((event) => event.type === "operation.sent" && event.data?.operationId === again.operationId);
    expect(after.indexOf(moved!)).toBeLessThan(fastSent);
    expect(await replay(a.url, sessionId)).toEqual(after);
  });

  it("fence an owner paused past its lease: it never writes to the session's journal again", async () => {
    const owner = await replica("replica-d");
    const { sessionId, log } = await appendSession(owner.url);
    // Made to the owner itself; its guest returns a moment after writing, while the owner is stopped.
    const refused = refusedWith(sessionClient(owner.url, KEY_A).callTool({ sessionId, tool: "append", input: appendInput("paused", 500) }));
    await whenChangedIn(path.dirname(log), async () => (await lineCount(log)) >= 1);
    owner.child.kill("SIGSTOP");

    // b's sweep takes the session over (it has an operation without a receipt) once the owner's lease expired.
    const moved = await whenServed(() => replay(b.url, sessionId, (event) => event.type === "session.moved"));
    expect(moved.at(-1)?.type).toBe("session.moved");
    const sent = moved.find((event) => event.type === "operation.sent" && event.data?.kind === "execute")!;
    owner.child.kill("SIGCONT");
    // The owner wakes with the guest's answer and tries to journal it: fenced, the call fails.
    expect(await refused).toBe("session_moved");

    const viaB = sessionClient(b.url, KEY_A);
    await viaB.endSession({ sessionId });
    const after = await replay(b.url, sessionId);
    expect(after.map((event) => Number(event.seq))).toEqual(after.map((_, i) => i + 1));
    const receipts = after.filter((event) => event.type === "operation.receipt" && event.data?.operationId === sent.data?.operationId);
    expect(receipts).toHaveLength(1);
    expect(receipts[0]?.data?.receipt).toMatchObject({ unknown: {} });
    // The woken owner serves the session no more: a call through it reaches b, which ended it.
    const throughOld = await whenServed(() => sessionClient(owner.url, KEY_A).getSession({ sessionId }));
    expect(throughOld.session?.state).toBe("ended");
    expect(throughOld.session?.endedAt).toBeDefined();
  });

  it("resume a run whose owner was killed during its second model stream on the replica that takes the session over", async () => {
    const owner = await replica("replica-e");
    const { sessionId, log } = await appendSession(owner.url);
    // A skill uploaded through b, used by the run on the owner: its snapshot is in the shared bucket.
    const skill = bundleOf({ "SKILL.md": skillMd({ description: "Uploaded through another replica.", body: "SHARED BODY" }) });
    await publish({ url: b.url } as TestService, "shared-for-run", skill);
    provider.script("takeover-model", [
      { toolCalls: [{ id: "call-1", name: "append", input: { v: 1, file: "runs.log", line: "ran" } }], usage: { inputTokens: 11, outputTokens: 7 } },
      { text: "an answer that never ends", chunkChars: 2, chunkDelayMs: 60_000 },
      { toolCalls: [{ id: "call-2", name: "skills", input: { action: "load", name: "shared-for-run" } }] },
      { text: "the answer", usage: { inputTokens: 17, outputTokens: 3 } },
    ]);
    const { run } = await runClient(b.url, KEY_A).createRun({
      sessionId,
      run: {
        model: { provider: "anthropic", name: "takeover-model", maxTokens: 0 },
        skills: [{ kind: "skill", name: "shared-for-run" }],
        message: "go",
        providerKeys: { anthropic: "sk-takeover" },
      } as never,
    });
    await eventsUntil(sessionClient(owner.url, KEY_A), sessionId, (event) => event.type === "assistant.delta" && event.data?.round === 2);
    owner.child.kill("SIGKILL");
    await owner.exited;

    // b's sweep takes the session over (a run is running) once the owner's lease expired, and resumes the run.
    const events = await whenServed(() => eventsUntil(sessionClient(b.url, KEY_A), sessionId, runEnded(run!.id)));
    expect(events.at(-1)).toMatchObject({ type: "turn.completed", data: { outputText: "the answer", rounds: 3, toolCalls: 2 } });
    const moved = events.findIndex((event) => event.type === "session.moved");
    const resumed = events.findIndex((event) => event.type === "run.resumed");
    expect(moved).toBeGreaterThan(0);
    expect(resumed).toBeGreaterThan(moved);
    expect(events[resumed]?.data).toMatchObject({ runId: run!.id, round: 2, unknownToolCalls: [] });
    // The skill the run loaded came from its snapshot, through the replica that resumed it.
    const sent = provider.requests.filter((request) => (request.body as { model?: string }).model === "takeover-model");
    expect(sent).toHaveLength(4);
    expect(JSON.stringify((sent[3]!.body as { messages: unknown[] }).messages.at(-1))).toContain("SHARED BODY");
    expect((await fs.readFile(log, "utf8")).trim().split("\n")).toEqual(["ran"]);
  });

  it("reattach a host whose owner died to the replica that takes the session over, where it serves again", async () => {
    const owner = await replica("replica-f");
    const { session } = await sessionClient(owner.url, KEY_A).createSession({
      environments: [{ name: "laptop", kind: { case: "host", value: {} } }],
      tools: [{ name: "local", environment: "laptop" }],
    });
    const sessionId = session!.id;
    // Attached through b, which forwards the stream to the owner for its whole life.
    const first = new TestHost(hostClient(b.url, KEY_A, "grpc"), sessionId, "laptop");
    await first.attached();
    const before = sessionClient(b.url, KEY_A).callTool({ sessionId, tool: "local", input: fromJson(ValueSchema, {}) });
    first.returned((await first.command("local")).operationId, { served: "before" });
    expect((await before).receipt?.outcome.case).toBe("returned");
    owner.child.kill("SIGKILL");
    await owner.exited;
    // The stream ends with the owner; the host connects again, as the clients do, until a replica takes it.
    expect(ConnectError.from(await first.done).code).toBe(Code.Unavailable);
    const again = await whenServed(async () => {
      const host = new TestHost(hostClient(b.url, KEY_A, "grpc"), sessionId, "laptop");
      const attached = await Promise.race([host.attached(), host.done.then((error) => Promise.reject(error))]);
      expect(attached).toMatch(/^ses_/);
      return host;
    });
    const after = sessionClient(b.url, KEY_A).callTool({ sessionId, tool: "local", input: fromJson(ValueSchema, {}) });
    again.returned((await again.command("local")).operationId, { served: "after" });
    expect((await after).receipt?.outcome.case).toBe("returned");
    again.close();
  });
});
