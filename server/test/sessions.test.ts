import * as fs from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import { fromJson, type JsonValue } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { ConnectError, type Client } from "@connectrpc/connect";
import { ErrorInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SessionService } from "../../gen/skillenv/sessions/v1/sessions_pb.js";
import { buildTestComponents, killWorker } from "./helpers/pool.ts";
import { KEY_A, KEY_B, bearer, postJson, requestLogSince, startTestService, type TestService, onEmbeddedStorage } from "./helpers/service.ts";
import { admitProgram, admitTool, eventsUntil, filesContaining, refusedWith, sessionClient } from "./helpers/sessions.ts";

const SECRET_VALUE = "s3cr3t-value-that-must-not-leak-7f1c";

/** `depth` arrays around 0. */
function nested(depth: number): JsonValue {
  let value: JsonValue = 0;
  for (let i = 0; i < depth; i++) value = [value];
  return value;
}

beforeAll(() => buildTestComponents(), 600_000);

/** A service with a workspace root inside the filesystem allow-list, one origin and one secret allowed. */
async function startAllowingService(extra: Record<string, string> = {}): Promise<TestService & { root: string }> {
  const root = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "skillenv-ws-")));
  process.env.SKILLENV_TEST_SECRET = SECRET_VALUE;
  const service = await startTestService({
    SERVICE_ENV_FILESYSTEM_ALLOW: root,
    SERVICE_ENV_WORKSPACE_ROOT: path.join(root, "workspaces"),
    SERVICE_ENV_NETWORK_ALLOW: "https://api.example.com",
    SERVICE_ENV_SECRET_ALLOW: "SKILLENV_TEST_SECRET,SKILLENV_UNSET_SECRET,HOME",
    ...extra,
  });
  return Object.assign(service, { root });
}

describe("bounds on what a session stores", () => {
  let service: TestService;
  let client: Client<typeof SessionService>;
  beforeAll(async () => {
    service = await startTestService();
    client = sessionClient(service.url, KEY_A);
  });
  afterAll(() => service?.close());

  const laptop = { name: "laptop", kind: { case: "host" as const, value: {} } };
  const big = (bytes: number) => ({ kind: { case: "stringValue" as const, value: "v".repeat(bytes) } });
  const struct = (bytes: number) => ({ description: "v".repeat(bytes) });
  const FIELD = 64 * 1024;

  it.each<[string, Record<string, unknown>, string]>([
    ["a tool's inputSchema", { environments: [laptop], tools: [{ name: "t", environment: "laptop", inputSchema: struct(FIELD) }] }, "tools[0].inputSchema"],
    ["a tool's configuration", { environments: [laptop], tools: [{ name: "t", environment: "laptop", configuration: big(FIELD) }] }, "tools[0].configuration"],
    [
      "a tool's opaque implementation",
      { environments: [laptop], tools: [{ name: "t", environment: "laptop", implementation: { kind: { case: "opaque", value: big(FIELD) } } }] },
      "tools[0].implementation",
    ],
    ["a tool's description", { environments: [laptop], tools: [{ name: "t", environment: "laptop", description: "d".repeat(4097) }] }, "tools[0].description"],
    [
      "an extension's configuration",
      { environments: [{ name: "x", kind: { case: "extension", value: { url: "https://x.example.com", configuration: big(FIELD) } } }], tools: [] },
      "environments[0].extension.configuration",
    ],
    [
      "a service environment's grants",
      { environments: [{ name: "s", kind: { case: "service", value: { grants: { secrets: Array.from({ length: 10_000 }, () => "HOME") } } } }], tools: [] },
      "environments[0].service.grants",
    ],
    // 40 schemas of 60 KB are each within SERVICE_MAX_FIELD_BYTES, together above SERVICE_SESSION_MAX_BYTES (2 MiB).
    [
      "the whole session",
      { environments: [laptop], tools: Array.from({ length: 40 }, (_, i) => ({ name: `t${i}`, environment: "laptop", inputSchema: struct(60_000) })) },
      "session",
    ],
  ])("refuses %s above its limit with field_too_large naming it, and creates nothing", async (_, request, field) => {
    const before = (await client.listSessions({})).sessions.length;
    const refusal = await client.createSession(request as never).then(
      () => undefined,
      (error: unknown) => ConnectError.from(error).findDetails(ErrorInfoSchema)[0],
    );
    expect(refusal?.reason).toBe("field_too_large");
    expect(refusal?.metadata.field).toBe(field);
    expect((await client.listSessions({})).sessions.length).toBe(before);
  });

  it("keeps an inputSchema of exactly SERVICE_MAX_FIELD_BYTES and refuses one of a byte more", async () => {
    // The JSON text of {"description":"v...v"} is 18 bytes more than its string.
    const placed = (bytes: number) =>
      ({ environments: [laptop], tools: [{ name: "t", environment: "laptop", description: "d".repeat(4096), inputSchema: struct(bytes - 18) }] }) as never;
    const { session } = await client.createSession(placed(FIELD));
    expect(session?.tools[0]?.inputSchema).toEqual(struct(FIELD - 18));
    expect(await refusedWith(client.createSession(placed(FIELD + 1)))).toBe("field_too_large");
  });
});

describe("listing sessions", () => {
  it("ends a page early, with a token, before the session that would pass SERVICE_LIST_MAX_BYTES, and the tokens walk every session once", async () => {
    const small = await startTestService({ SERVICE_LIST_MAX_BYTES: "8192", SERVICE_SESSION_MAX_BYTES: "8192" });
    try {
      const client = sessionClient(small.url, KEY_A);
      // About 3.5 KB stored each: two fit the budget, a third does not.
      const spec = {
        environments: [{ name: "laptop", kind: { case: "host" as const, value: {} } }],
        tools: [{ name: "t", description: "d".repeat(3000), environment: "laptop" }],
      };
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) ids.push((await client.createSession(spec)).session!.id);
      const pages: string[][] = [];
      let pageToken = "";
      do {
        const page = await client.listSessions({ pageSize: 1000, pageToken });
        pages.push(page.sessions.map((session) => session.id));
        pageToken = page.nextPageToken;
      } while (pageToken !== "");
      expect(pages.map((page) => page.length)).toEqual([2, 2, 1]);
      expect(pages.flat()).toEqual(ids.reverse());
    } finally {
      await small.close();
    }
  });
});

describe("sessions held in memory", () => {
  it("holds the sessions in use and the most recently used others within SERVICE_SESSION_CACHE_MIB; the others are read again, and serve, when next used", async () => {
    const small = await startTestService({ SERVICE_SESSION_CACHE_MIB: "1" });
    try {
      const client = sessionClient(small.url, KEY_A);
      const echo = await admitTool(small.url, KEY_A, "echo-wat");
      // About 240 KB stored each (four schemas of 60 KB): four fit the budget, not five.
      const schema = { type: "object", description: "s".repeat(60_000) };
      const spec = {
        environments: [{ name: "sandbox", kind: { case: "service" as const, value: {} } }],
        tools: Array.from({ length: 4 }, (_, i) => ({
          name: `echo${i}`,
          environment: "sandbox",
          inputSchema: schema,
          implementation: { kind: { case: "tool" as const, value: echo } },
        })),
      };
      const ids: string[] = [];
      for (let i = 0; i < 12; i++) ids.push((await client.createSession(spec)).session!.id);
      const held = async () => {
        const status = (await (await fetch(`${small.url}/v1/status`, { headers: bearer(KEY_A) })).json()) as { sessions: { active?: number; ended?: number } };
        return (status.sessions.active ?? 0) + (status.sessions.ended ?? 0);
      };
      expect(await held()).toBe(4);
      // The oldest, read again: its record whole, and its tools run, each call once, also together.
      const first = (await client.getSession({ sessionId: ids[0]! })).session!;
      expect(first.tools.map((tool) => [tool.name, String(tool.inputSchema?.description).length])).toEqual(spec.tools.map((tool) => [tool.name, 60_000]));
      const calls = await Promise.all(
        [0, 1, 2, 3].map((i) => client.callTool({ sessionId: ids[1]!, tool: `echo${i}`, input: fromJson(ValueSchema, { v: i }) })),
      );
      expect(calls.map((call) => call.receipt?.outcome.value)).toEqual(
        [0, 1, 2, 3].map((i) => expect.objectContaining({ output: fromJson(ValueSchema, { v: i }) })),
      );
      let receipts = 0;
      const events = await eventsUntil(client, ids[1]!, (event) => event.type === "operation.receipt" && event.data?.kind === "execute" && ++receipts === 4);
      expect(
        events
          .filter((event) => event.type === "operation.sent" && event.data?.kind === "execute")
          .map((event) => event.data?.tool)
          .sort(),
      ).toEqual(["echo0", "echo1", "echo2", "echo3"]);
      // Ended and deleted while not held.
      expect((await client.endSession({ sessionId: ids[2]! })).session?.state).toBe("ended");
      await client.deleteSession({ sessionId: ids[3]! });
      await expect(client.getSession({ sessionId: ids[3]! })).rejects.toThrow(/session_not_found|has no session/);
      expect(await held()).toBe(4);
    } finally {
      await small.close();
    }
  }, 120_000);
});

describe("sessions with the service environment", () => {
  let service: TestService & { root: string };
  let a: Client<typeof SessionService>;
  let b: Client<typeof SessionService>;
  let echo: string;
  let workspaceTool: string;
  let secretsTool: string;

  beforeAll(async () => {
    service = await startAllowingService();
    a = sessionClient(service.url, KEY_A);
    b = sessionClient(service.url, KEY_B);
    [echo, workspaceTool, secretsTool] = await Promise.all([
      admitTool(service.url, KEY_A, "echo-wat"),
      admitTool(service.url, KEY_A, "workspace-js"),
      admitTool(service.url, KEY_A, "secrets-js"),
    ]);
  }, 120_000);
  afterAll(() => service?.close());

  const echoSession = () => ({
    environments: [{ name: "sandbox", kind: { case: "service" as const, value: {} } }],
    tools: [{ name: "echo", description: "Echoes its input.", environment: "sandbox", implementation: { kind: { case: "tool" as const, value: echo } } }],
  });

  it("creates a ready session and runs a placed tool through the journal", async () => {
    const { session } = await a.createSession(echoSession());
    expect(session?.state).toBe("ready");
    expect(session?.id).toMatch(/^ses_[0-9a-z]{26}$/);
    expect(session?.environments[0]?.state).toBe("ready");

    const called = await a.callTool({ sessionId: session!.id, tool: "echo", input: { kind: { case: "stringValue", value: "hello" } } });
    expect(called.operationId).toMatch(/^op_/);
    expect(called.receipt?.outcome.case).toBe("returned");
    expect(called.receipt?.outcome.value).toMatchObject({ output: { kind: { case: "stringValue", value: "hello" } } });
  });

  it("serves the same calls as JSON over HTTP, with every field present", async () => {
    const created = await postJson(
      service.url,
      "/v1/sessions",
      {
        environments: [{ name: "sandbox", service: {} }],
        tools: [{ name: "echo", environment: "sandbox", implementation: { tool: echo } }],
      },
      KEY_A,
    );
    expect(created.status).toBe(200);
    const id = created.body.session.id as string;
    const called = await postJson(service.url, `/v1/sessions/${id}/tools/echo:call`, { input: { v: 1, text: "json" } }, KEY_A);
    expect(called.status).toBe(200);
    expect(called.body.receipt).toEqual({ returned: { output: { v: 1, text: "json" } } });
    const got = await fetch(`${service.url}/v1/sessions/${id}`, { headers: bearer(KEY_A) });
    expect((await got.json()).session.state).toBe("ready");
  });

  it("journals every operation and replays it as events", async () => {
    const { session } = await a.createSession(echoSession());
    const id = session!.id;
    await a.callTool({ sessionId: id, tool: "echo", input: { kind: { case: "numberValue", value: 7 } } });
    await a.endSession({ sessionId: id });
    const events = [];
    for await (const { event } of a.watchSession({ sessionId: id })) events.push(event!);
    expect(events.map((event) => event.type)).toEqual([
      "session.created",
      "operation.sent",
      "operation.receipt",
      "environment.ready",
      "operation.sent",
      "operation.receipt",
      "operation.sent",
      "operation.receipt",
      "session.ended",
    ]);
    expect(events.map((event) => Number(event.seq))).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(events[4]?.data).toMatchObject({ kind: "execute", tool: "echo", environment: "sandbox", input: 7 });
    expect(events[5]?.data).toMatchObject({ kind: "execute", receipt: { returned: { output: 7 } } });
    expect(events[6]?.data).toMatchObject({ kind: "detach" });
    const replayed = [];
    for await (const { event } of a.watchSession({ sessionId: id, after: 5n })) replayed.push(Number(event!.seq));
    expect(replayed).toEqual([6, 7, 8, 9]);
  });

  it("serves the events as server-sent events on the JSON API", async () => {
    const { session } = await a.createSession(echoSession());
    const id = session!.id;
    await a.endSession({ sessionId: id });
    const response = await fetch(`${service.url}/v1/sessions/${id}/events?after=4`, { headers: bearer(KEY_A) });
    expect(response.headers.get("content-type")).toBe("text/event-stream");
    const events = (await response.text())
      .trim()
      .split("\n\n")
      .map((chunk) => JSON.parse(chunk.replace(/^data: /, "")).event);
    expect(events.map((event: { seq: string; type: string }) => [event.seq, event.type])).toEqual([
      ["5", "operation.sent"],
      ["6", "operation.receipt"],
      ["7", "session.ended"],
    ]);
    const refused = await fetch(`${service.url}/v1/sessions/${id}/events`, { headers: bearer(KEY_B) });
    expect(refused.status).toBe(404);
    expect((await refused.json()).code).toBe("session_not_found");
  });

  it("streams events live as they are written", async () => {
    const { session } = await a.createSession(echoSession());
    const id = session!.id;
    const seen: string[] = [];
    const watching = (async () => {
      for await (const { event } of a.watchSession({ sessionId: id, after: 4n })) seen.push(event!.type);
    })();
    await a.callTool({ sessionId: id, tool: "echo", input: { kind: { case: "boolValue", value: true } } });
    await a.endSession({ sessionId: id });
    await watching;
    expect(seen).toEqual(["operation.sent", "operation.receipt", "operation.sent", "operation.receipt", "session.ended"]);
  });

  it.each<[string, (ids: { echo: string }) => object, string]>([
    [
      "two environments with one name",
      () => ({
        environments: [
          { name: "x", kind: { case: "service", value: {} } },
          { name: "x", kind: { case: "service", value: {} } },
        ],
      }),
      "invalid_argument",
    ],
    ["an environment name with a slash", () => ({ environments: [{ name: "a/b", kind: { case: "service", value: {} } }] }), "invalid_argument"],
    ["an environment without a kind", () => ({ environments: [{ name: "x" }] }), "invalid_argument"],
    [
      "an extension outside the network allow-list",
      () => ({ environments: [{ name: "x", kind: { case: "extension", value: { url: "https://ext.example.com" } } }] }),
      "grant_not_allowed",
    ],
    ["an unknown setup mode", () => ({ environments: [{ name: "x", setup: "lazy", kind: { case: "service", value: {} } }] }), "invalid_argument"],
    [
      "a tool named skills",
      ({ echo }) => ({
        environments: [{ name: "x", kind: { case: "service", value: {} } }],
        tools: [{ name: "skills", environment: "x", implementation: { kind: { case: "tool", value: echo } } }],
      }),
      "invalid_argument",
    ],
    [
      "a tool name with __",
      ({ echo }) => ({
        environments: [{ name: "x", kind: { case: "service", value: {} } }],
        tools: [{ name: "a__b", environment: "x", implementation: { kind: { case: "tool", value: echo } } }],
      }),
      "invalid_argument",
    ],
    [
      "a host tool named <another environment>__<tool>",
      () => ({
        environments: [{ name: "h", kind: { case: "host", value: {} } }],
        tools: [{ name: "x__b", environment: "h" }],
      }),
      "invalid_argument",
    ],
    [
      "a host tool with __ in an environment named with __",
      () => ({
        environments: [{ name: "h__i", kind: { case: "host", value: {} } }],
        tools: [{ name: "h__i__b", environment: "h__i" }],
      }),
      "invalid_argument",
    ],
    [
      "a tool name with a dot",
      ({ echo }) => ({
        environments: [{ name: "x", kind: { case: "service", value: {} } }],
        tools: [{ name: "a.b", environment: "x", implementation: { kind: { case: "tool", value: echo } } }],
      }),
      "invalid_argument",
    ],
    [
      "a tool in an unknown environment",
      ({ echo }) => ({ environments: [], tools: [{ name: "t", environment: "x", implementation: { kind: { case: "tool", value: echo } } }] }),
      "invalid_argument",
    ],
    [
      "a tool placed twice",
      ({ echo }) => ({
        environments: [{ name: "x", kind: { case: "service", value: {} } }],
        tools: [1, 2].map(() => ({ name: "t", environment: "x", implementation: { kind: { case: "tool", value: echo } } })),
      }),
      "invalid_argument",
    ],
    [
      "a tool without implementation",
      () => ({ environments: [{ name: "x", kind: { case: "service", value: {} } }], tools: [{ name: "t", environment: "x" }] }),
      "invalid_argument",
    ],
    [
      "a tool that is not admitted",
      () => ({
        environments: [{ name: "x", kind: { case: "service", value: {} } }],
        tools: [{ name: "t", environment: "x", implementation: { kind: { case: "tool", value: "0".repeat(64) } } }],
      }),
      "not_found",
    ],
    [
      "a network origin outside the allow-list",
      () => ({ environments: [{ name: "x", kind: { case: "service", value: { grants: { network: ["https://evil.example.com"] } } } }] }),
      "grant_not_allowed",
    ],
    [
      "a secret outside the allow-list",
      () => ({ environments: [{ name: "x", kind: { case: "service", value: { grants: { secrets: ["PATH"] } } } }] }),
      "grant_not_allowed",
    ],
    [
      "a malformed grant",
      () => ({ environments: [{ name: "x", kind: { case: "service", value: { grants: { filesystem: { workspace: "admin" } } } } }] }),
      "invalid_grant",
    ],
  ])("refuses %s and creates nothing", async (_, request, code) => {
    // What workspace a has, in its listing and on disk, before and after its own refusal.
    const sessionIds = async () => (await a.listSessions({ pageSize: 1000 })).sessions.map((session) => session.id);
    const directories = () => fs.readdir(path.join(service.root, "workspaces", "a")).catch(() => []);
    const [ids, dirs] = [await sessionIds(), await directories()];
    expect(await refusedWith(a.createSession(request({ echo }) as never))).toBe(code);
    expect(await sessionIds()).toEqual(ids);
    expect(await directories()).toEqual(dirs);
  });

  it("refuses a workspace grant when the workspace root is outside the filesystem allow-list", async () => {
    const strict = await startTestService({
      SERVICE_ENV_FILESYSTEM_ALLOW: path.join(service.root, "elsewhere"),
      SERVICE_ENV_WORKSPACE_ROOT: path.join(service.root, "workspaces"),
    });
    try {
      const client = sessionClient(strict.url, KEY_A);
      const request = { environments: [{ name: "x", kind: { case: "service" as const, value: { grants: { filesystem: { workspace: "write" } } } } }] };
      expect(await refusedWith(client.createSession(request))).toBe("grant_not_allowed");
      expect((await client.listSessions({})).sessions).toHaveLength(0);
    } finally {
      await strict.close();
    }
  });

  it("keeps the workspace across calls of one session and removes it, and the session's directory, on delete", async () => {
    const { session } = await a.createSession({
      environments: [
        { name: "files", kind: { case: "service", value: { grants: { filesystem: { workspace: "write" } } } } },
        { name: "other", kind: { case: "service", value: { grants: { filesystem: { workspace: "read" } } } } },
      ],
      tools: [{ name: "fs", environment: "files", implementation: { kind: { case: "tool", value: workspaceTool } } }],
    });
    const id = session!.id;
    const call = async (input: object) => (await postJson(service.url, `/v1/sessions/${id}/tools/fs:call`, { input }, KEY_A)).body.receipt;
    expect(await call({ v: 1, op: "write", path: "/workspace/notes.txt", data: "kept" })).toMatchObject({ returned: {} });
    expect(await call({ v: 1, op: "read", path: "/workspace/notes.txt" })).toEqual({ returned: { output: { v: 1, ok: true, data: "kept" } } });
    const dir = path.join(service.root, "workspaces", "a", id, "files");
    expect(await fs.readFile(path.join(dir, "notes.txt"), "utf8")).toBe("kept");

    expect((await fs.readdir(path.dirname(dir))).sort()).toEqual(["files", "other"]);

    await a.deleteSession({ sessionId: id });
    await expect(fs.stat(dir)).rejects.toThrow(/ENOENT/);
    // Nothing of the session is left: not its directory either, only the workspace's own.
    await expect(fs.stat(path.dirname(dir))).rejects.toThrow(/ENOENT/);
    expect((await fs.stat(path.join(service.root, "workspaces", "a"))).isDirectory()).toBe(true);
    expect(await refusedWith(a.getSession({ sessionId: id }))).toBe("session_not_found");
  });

  it("gives each session its own workspace", async () => {
    const files = {
      environments: [{ name: "files", kind: { case: "service" as const, value: { grants: { filesystem: { workspace: "write" } } } } }],
      tools: [{ name: "fs", environment: "files", implementation: { kind: { case: "tool" as const, value: workspaceTool } } }],
    };
    const first = (await a.createSession(files)).session!.id;
    const second = (await a.createSession(files)).session!.id;
    await postJson(service.url, `/v1/sessions/${first}/tools/fs:call`, { input: { v: 1, op: "write", path: "/workspace/mine", data: "1" } }, KEY_A);
    const read = await postJson(service.url, `/v1/sessions/${second}/tools/fs:call`, { input: { v: 1, op: "read", path: "/workspace/mine" } }, KEY_A);
    expect(read.body.receipt.failure.code).toBe("no-entry");
  });

  it('gives each call the granted /scratch, read-only when the grant is "read"', async () => {
    const scratchSession = async (scratch: "read" | "write") =>
      (
        await a.createSession({
          environments: [{ name: "tmp", kind: { case: "service", value: { grants: { filesystem: { scratch } } } } }],
          tools: [{ name: "fs", environment: "tmp", implementation: { kind: { case: "tool", value: workspaceTool } } }],
        })
      ).session!.id;
    const write = async (id: string) =>
      (await postJson(service.url, `/v1/sessions/${id}/tools/fs:call`, { input: { v: 1, op: "write", path: "/scratch/note.txt", data: "x" } }, KEY_A)).body
        .receipt;
    expect(await write(await scratchSession("write"))).toEqual({ returned: { output: { v: 1, ok: true, bytes: 1 } } });
    expect((await write(await scratchSession("read"))).failure.code).toBe("read-only");
  });

  it("mounts granted secrets from the process environment, read at each invocation", async () => {
    const secretSession = async (name: string) =>
      (
        await a.createSession({
          environments: [{ name: "keys", kind: { case: "service", value: { grants: { secrets: [name] } } } }],
          tools: [{ name: "secret", environment: "keys", implementation: { kind: { case: "tool", value: secretsTool } } }],
        })
      ).session!.id;
    const call = async (id: string, name: string) =>
      (await postJson(service.url, `/v1/sessions/${id}/tools/secret:call`, { input: { v: 1, name } }, KEY_A)).body.receipt;
    const granted = await secretSession("SKILLENV_TEST_SECRET");
    expect((await call(granted, "SKILLENV_TEST_SECRET")).returned.output.value).toBe(SECRET_VALUE);
    expect((await call(granted, "HOME")).failure.code).toBe("no-entry");

    delete process.env.SKILLENV_UNSET_SECRET;
    const unset = await secretSession("SKILLENV_UNSET_SECRET");
    expect((await call(unset, "SKILLENV_UNSET_SECRET")).failure.code).toBe("secret_unavailable");
    process.env.SKILLENV_UNSET_SECRET = "set later";
    expect((await call(unset, "SKILLENV_UNSET_SECRET")).returned.output.value).toBe("set later");
    delete process.env.SKILLENV_UNSET_SECRET;
  });

  it("gives every tool of an environment its grants, and the tools of another environment only theirs (SPEC 4.5.7)", async () => {
    const placed = (name: string, environment: string, tool: string) => ({
      name,
      environment,
      implementation: { kind: { case: "tool" as const, value: tool } },
    });
    const { session } = await a.createSession({
      environments: [
        { name: "files", kind: { case: "service", value: { grants: { filesystem: { workspace: "write" }, secrets: ["SKILLENV_TEST_SECRET"] } } } },
        { name: "plain", kind: { case: "service", value: {} } },
      ],
      tools: [
        placed("writer", "files", workspaceTool),
        placed("reader", "files", workspaceTool),
        placed("secret", "files", secretsTool),
        placed("plain-fs", "plain", workspaceTool),
        placed("plain-secret", "plain", secretsTool),
      ],
    });
    const call = async (tool: string, input: object) =>
      (await postJson(service.url, `/v1/sessions/${session!.id}/tools/${tool}:call`, { input }, KEY_A)).body.receipt;
    // Two placements of one environment: one workspace, the same write grant, the same secrets.
    expect(await call("writer", { v: 1, op: "write", path: "/workspace/shared.txt", data: "from writer" })).toMatchObject({ returned: {} });
    expect(await call("reader", { v: 1, op: "read", path: "/workspace/shared.txt" })).toEqual({
      returned: { output: { v: 1, ok: true, data: "from writer" } },
    });
    expect(await call("reader", { v: 1, op: "write", path: "/workspace/by-reader.txt", data: "x" })).toMatchObject({ returned: {} });
    expect((await call("secret", { v: 1, name: "SKILLENV_TEST_SECRET" })).returned.output.value).toBe(SECRET_VALUE);
    // The same components placed in an environment granted nothing reach neither.
    expect((await call("plain-fs", { v: 1, op: "read", path: "/workspace/shared.txt" })).failure).toMatchObject({
      code: "not-permitted",
      message: "no directory is preopened",
    });
    expect((await call("plain-fs", { v: 1, op: "write", path: "/workspace/shared.txt", data: "overwritten" })).failure.code).toBe("not-permitted");
    expect((await call("plain-secret", { v: 1, name: "SKILLENV_TEST_SECRET" })).failure).toMatchObject({
      code: "not-permitted",
      message: expect.stringContaining("no secrets are granted"),
    });
    expect(await fs.readFile(path.join(service.root, "workspaces", "a", session!.id, "files", "shared.txt"), "utf8")).toBe("from writer");
  });

  it("widens no grant after creation: not through setup, a placement's configuration or a call's input (SPEC 4.5.4)", async () => {
    const asking = { grants: { filesystem: { workspace: "write" }, secrets: ["SKILLENV_TEST_SECRET"] } };
    const { session } = await a.createSession({
      environments: [{ name: "ro", setup: "manual", kind: { case: "service", value: { grants: { filesystem: { workspace: "read" } } } } }],
      tools: [
        { name: "fs", environment: "ro", implementation: { kind: { case: "tool", value: workspaceTool } }, configuration: fromJson(ValueSchema, asking) },
        { name: "secret", environment: "ro", implementation: { kind: { case: "tool", value: secretsTool } }, configuration: fromJson(ValueSchema, asking) },
      ],
    } as never);
    const sessionId = session!.id;
    // Setup takes no grants (SetupEnvironmentRequest has no field for them; the JSON route maps
    // no body): the environment is set up with the grants it was created with.
    const setup = await postJson(service.url, `/v1/sessions/${sessionId}/environments/ro:setup`, asking, KEY_A);
    expect(setup.body.environment).toMatchObject({ state: "ready", service: { grants: { filesystem: { workspace: "read" } } } });

    const call = async (tool: string, input: object) =>
      (await postJson(service.url, `/v1/sessions/${sessionId}/tools/${tool}:call`, { input }, KEY_A)).body.receipt;
    expect(await call("fs", { v: 1, op: "list", path: "/workspace" })).toEqual({ returned: { output: { v: 1, ok: true, entries: [] } } });
    expect((await call("fs", { v: 1, op: "write", path: "/workspace/x.txt", data: "x", ...asking })).failure.code).toBe("read-only");
    expect((await call("secret", { v: 1, name: "SKILLENV_TEST_SECRET", ...asking })).failure).toMatchObject({
      code: "not-permitted",
      message: expect.stringContaining("no secrets are granted"),
    });
    expect((await a.getSession({ sessionId })).session?.environments[0]).toMatchObject({ state: "ready" });
    expect(await fs.readdir(path.join(service.root, "workspaces", "a", sessionId, "ro"))).toEqual([]);
  });

  it("never writes a granted secret's value to the data directory, the events or the log", async () => {
    const own = await startAllowingService();
    try {
      const client = sessionClient(own.url, KEY_A);
      const tool = await admitTool(own.url, KEY_A, "echo-wat");
      const { session } = await client.createSession({
        environments: [{ name: "keys", kind: { case: "service", value: { grants: { secrets: ["SKILLENV_TEST_SECRET"] } } } }],
        tools: [{ name: "echo", environment: "keys", implementation: { kind: { case: "tool", value: tool } } }],
      });
      await client.callTool({ sessionId: session!.id, tool: "echo", input: { kind: { case: "stringValue", value: "no secret here" } } });
      await client.endSession({ sessionId: session!.id });
      const events = [];
      for await (const { event } of client.watchSession({ sessionId: session!.id })) events.push(JSON.stringify(event?.data));
      expect(events.join("\n")).toContain("SKILLENV_TEST_SECRET");
      expect(events.join("\n")).not.toContain(SECRET_VALUE);
      expect(await filesContaining(own.dataDir, SECRET_VALUE)).toEqual([]);
      expect(own.logs.join("\n")).not.toContain(SECRET_VALUE);
    } finally {
      await own.close();
    }
  });

  it.runIf(onEmbeddedStorage)("keeps an admitted program's source out of the session's configuration and journal (SPEC 4.4.3)", async () => {
    const own = await startTestService();
    try {
      const client = sessionClient(own.url, KEY_A);
      const marker = "program-source-marker-3b9e1d";
      const runtime = await admitTool(own.url, KEY_A, "js-program-tool");
      // The marker is in the source only: the output is computed, never the marker itself.
      const program = await admitProgram(own.url, KEY_A, `function run(input) { /* ${marker} */ return input.n + 1; }`);
      const { session } = await client.createSession({
        environments: [{ name: "s", kind: { case: "service", value: {} } }],
        tools: [{ name: "inc", environment: "s", implementation: { kind: { case: "program", value: { id: program, runtime } } } }],
      });
      const sessionId = session!.id;
      const called = await postJson(own.url, `/v1/sessions/${sessionId}/tools/inc:call`, { input: { n: 41 } }, KEY_A);
      expect(called.body.receipt).toEqual({ returned: { output: 42 } });
      await client.endSession({ sessionId });
      const events = (await eventsUntil(client, sessionId, () => false)).map((event) => JSON.stringify(event.data));
      expect(events.join("\n")).toContain('"tool":"inc"');
      expect(events.join("\n")).not.toContain(marker);
      // The only copy at rest is the admitted blob itself; the metadata names the program by its id.
      expect(await filesContaining(own.dataDir, marker)).toEqual([path.join(own.dataDir, "blobs", "sha256", program.slice(0, 2), program)]);
      expect(await filesContaining(path.join(own.dataDir, "metadata"), program)).not.toEqual([]);
    } finally {
      await own.close();
    }
  });

  it("keeps a session of workspace A out of workspace B's reach", async () => {
    const { session } = await a.createSession(echoSession());
    const sessionId = session!.id;
    expect(await refusedWith(b.getSession({ sessionId }))).toBe("session_not_found");
    expect(await refusedWith(b.callTool({ sessionId, tool: "echo" }))).toBe("session_not_found");
    expect(await refusedWith(b.endSession({ sessionId }))).toBe("session_not_found");
    expect(await refusedWith(b.deleteSession({ sessionId }))).toBe("session_not_found");
    expect(await refusedWith(b.setupEnvironment({ sessionId, environment: "sandbox" }))).toBe("session_not_found");
    expect(
      await refusedWith(
        (async () => {
          for await (const _ of b.watchSession({ sessionId })) break;
        })(),
      ),
    ).toBe("session_not_found");
    expect((await b.listSessions({})).sessions.map((s) => s.id)).not.toContain(sessionId);
    expect((await a.getSession({ sessionId })).session?.state).toBe("ready");
  });

  it("sets up a manual environment only when asked", async () => {
    const request = echoSession();
    request.environments[0] = { ...request.environments[0]!, setup: "manual" } as never;
    const { session } = await a.createSession(request);
    const sessionId = session!.id;
    expect(session?.environments[0]?.state).toBe("pending");
    expect(await refusedWith(a.callTool({ sessionId, tool: "echo" }))).toBe("environment_not_ready");
    const setup = await a.setupEnvironment({ sessionId, environment: "sandbox" });
    expect(setup.environment?.state).toBe("ready");
    expect(setup.receipt?.outcome.case).toBe("returned");
    expect((await a.callTool({ sessionId, tool: "echo" })).receipt?.outcome.case).toBe("returned");
    expect(await refusedWith(a.setupEnvironment({ sessionId, environment: "nowhere" }))).toBe("environment_not_found");
  });

  it("sets a manual environment up once when asked twice at once: the second finds it ready", async () => {
    const request = echoSession();
    request.environments[0] = { ...request.environments[0]!, setup: "manual" } as never;
    const { session } = await a.createSession(request);
    const sessionId = session!.id;
    const both = await Promise.all([1, 2].map(() => a.setupEnvironment({ sessionId, environment: "sandbox" })));
    expect(both.map((setup) => setup.environment?.state)).toEqual(["ready", "ready"]);
    expect(both.filter((setup) => setup.receipt !== undefined)).toHaveLength(1);
    const events = await eventsUntil(a, sessionId, (event) => event.type === "environment.ready");
    expect(events.filter((event) => event.type === "operation.sent" && event.data?.kind === "setup")).toHaveLength(1);
  });

  it("refuses new work once ended, and lists newest first", async () => {
    const first = (await a.createSession(echoSession())).session!.id;
    const second = (await a.createSession(echoSession())).session!.id;
    const ended = await a.endSession({ sessionId: first });
    expect(ended.session?.state).toBe("ended");
    expect(ended.session?.environments[0]?.state).toBe("detached");
    expect(ended.session?.endedAt).toBeDefined();
    expect(await refusedWith(a.callTool({ sessionId: first, tool: "echo" }))).toBe("session_ended");
    const ids = (await a.listSessions({ pageSize: 2 })).sessions.map((s) => s.id);
    expect(ids).toEqual([second, first]);
    const page = await a.listSessions({ pageSize: 1 });
    const next = await a.listSessions({ pageSize: 1, pageToken: page.nextPageToken });
    expect(next.sessions[0]?.id).toBe(first);
  });

  it("refuses an unknown tool and an input above the journal's payload limit, journaling nothing", async () => {
    const small = await startTestService({ SERVICE_JOURNAL_MAX_PAYLOAD_BYTES: "64" });
    try {
      const client = sessionClient(small.url, KEY_A);
      const tool = await admitTool(small.url, KEY_A, "echo-wat");
      const { session } = await client.createSession({
        environments: [{ name: "s", kind: { case: "service", value: {} } }],
        tools: [{ name: "echo", environment: "s", implementation: { kind: { case: "tool", value: tool } } }],
      });
      const sessionId = session!.id;
      expect(await refusedWith(client.callTool({ sessionId, tool: "missing" }))).toBe("tool_not_found");
      expect(await refusedWith(client.callTool({ sessionId, tool: "echo", input: { kind: { case: "stringValue", value: "x".repeat(100) } } }))).toBe(
        "input_too_large",
      );
      await client.endSession({ sessionId });
      const sent = [];
      for await (const { event } of client.watchSession({ sessionId })) if (event!.type === "operation.sent") sent.push(event!.data?.kind);
      // No execute: the refused calls were neither journaled nor sent.
      expect(sent).toEqual(["setup", "detach"]);
    } finally {
      await small.close();
    }
  });

  it("ends an output above the payload limit as output_too_large, and runs programs", async () => {
    const small = await startTestService({ SERVICE_JOURNAL_MAX_PAYLOAD_BYTES: "1000" });
    try {
      const client = sessionClient(small.url, KEY_A);
      const runtime = await admitTool(small.url, KEY_A, "js-program-tool");
      const program = await admitProgram(small.url, KEY_A, "function run(input) { return 'x'.repeat(input.n); }");
      const { session } = await client.createSession({
        environments: [{ name: "s", kind: { case: "service", value: {} } }],
        tools: [{ name: "repeat", environment: "s", implementation: { kind: { case: "program", value: { id: program, runtime } } } }],
      });
      const call = (n: number) => postJson(small.url, `/v1/sessions/${session!.id}/tools/repeat:call`, { input: { n } }, KEY_A);
      expect((await call(10)).body.receipt).toEqual({ returned: { output: "xxxxxxxxxx" } });
      const big = (await call(5000)).body.receipt.failure;
      expect(big.code).toBe("output_too_large");
      expect(big.details).toMatchObject({ sizeBytes: "5002", maxBytes: "1000" });
      expect(big.details.sha256).toMatch(/^[0-9a-f]{64}$/);
    } finally {
      await small.close();
    }
  });

  it("ends an output nested deeper than SERVICE_JOURNAL_MAX_JSON_DEPTH as output_too_deep, refuses such an input, and keeps the events readable", async () => {
    const runtime = await admitTool(service.url, KEY_A, "js-program-tool");
    const program = await admitProgram(
      service.url,
      KEY_A,
      `function run(input) { let value = 0; for (let i = 0; i < input.depth; i++) value = [value]; return value; }`,
    );
    const { session } = await a.createSession({
      environments: [{ name: "s", kind: { case: "service", value: {} } }],
      tools: [{ name: "nest", environment: "s", implementation: { kind: { case: "program", value: { id: program, runtime } } } }],
    });
    const sessionId = session!.id;
    const route = `/v1/sessions/${sessionId}/tools/nest:call`;
    const call = (input: unknown) => postJson(service.url, route, { input }, KEY_A);
    expect((await call({ depth: 32 })).body.receipt).toEqual({ returned: { output: nested(32) } });
    // A tool (or a prompt-injected model driving it) returns JSON 50 levels deep: the tool did
    // run, its receipt says so, and nothing that cannot be read back is kept.
    const deep = await call({ depth: 50 });
    expect(deep.status).toBe(200);
    expect(deep.body.receipt.failure).toMatchObject({ code: "output_too_deep", retryable: false, details: { depth: "50", maxDepth: "32" } });
    expect(deep.body.receipt.failure.details.sha256).toMatch(/^[0-9a-f]{64}$/);
    expect(await refusedWith(a.callTool({ sessionId, tool: "nest", input: fromJson(ValueSchema, nested(33)) }))).toBe("input_too_deep");
    const refused = await call(nested(33));
    expect(refused).toMatchObject({ status: 400, body: { code: "input_too_deep" } });
    expect((await requestLogSince(service, 0)).filter((line) => line.path === route).map((line) => [line.code, line.httpStatus])).toEqual([
      ["ok", 200],
      ["ok", 200],
      ["input_too_deep", 400],
    ]);

    await a.endSession({ sessionId });
    const events = [];
    for await (const { event } of a.watchSession({ sessionId })) events.push(event!);
    const executes = events.filter((event) => event.type === "operation.receipt" && event.data?.kind === "execute");
    expect(executes.map((event) => (event.data!.receipt as { failure?: { code: string } }).failure?.code)).toEqual([undefined, "output_too_deep"]);
    expect(events.at(-1)?.type).toBe("session.ended");
    const sse = await fetch(`${service.url}/v1/sessions/${sessionId}/events`, { headers: bearer(KEY_A) });
    expect(
      (await sse.text())
        .trim()
        .split("\n\n")
        .map((chunk) => JSON.parse(chunk.replace(/^data: /, "")).event.type),
    ).toEqual(events.map((event) => event.type));
  });

  it("keeps a tool's failure code and message within SERVICE_MAX_FIELD_BYTES each, saying what was cut", async () => {
    const runtime = await admitTool(service.url, KEY_A, "js-program-tool");
    const program = await admitProgram(service.url, KEY_A, "function run() { throw { code: 'c'.repeat(70000), message: 'm'.repeat(100000) }; }");
    const { session } = await a.createSession({
      environments: [{ name: "s", kind: { case: "service", value: {} } }],
      tools: [{ name: "fails", environment: "s", implementation: { kind: { case: "program", value: { id: program, runtime } } } }],
    });
    const { receipt } = (await postJson(service.url, `/v1/sessions/${session!.id}/tools/fails:call`, { input: {} }, KEY_A)).body;
    expect(receipt.failure.code).toBe("c".repeat(64 * 1024));
    expect(Buffer.byteLength(receipt.failure.message)).toBe(64 * 1024);
    expect(receipt.failure.message).toMatch(/^m+ \[cut: 100000 bytes in all\]$/);
    // The journal keeps what the call answered, not the guest's 170 KB.
    const events = await eventsUntil(a, session!.id, (event) => event.type === "operation.receipt" && event.data?.kind === "execute");
    expect(events.at(-1)?.data?.receipt).toMatchObject({ failure: { code: receipt.failure.code, message: receipt.failure.message } });
  });

  it("bounds every call by SERVICE_MAX_TURN_SECS, whatever timeout the caller asks", async () => {
    const bounded = await startTestService({ SERVICE_MAX_TURN_SECS: "1" });
    try {
      const client = sessionClient(bounded.url, KEY_A);
      const loop = await admitTool(bounded.url, KEY_A, "loop-wat");
      const { session } = await client.createSession({
        environments: [{ name: "s", kind: { case: "service", value: {} } }],
        tools: [{ name: "spin", environment: "s", implementation: { kind: { case: "tool", value: loop } } }],
      });
      const called = await client.callTool({ sessionId: session!.id, tool: "spin", timeout: { seconds: 3600n, nanos: 0 } });
      expect(called.receipt?.outcome).toMatchObject({ case: "failure", value: { code: "timeout" } });
    } finally {
      await bounded.close();
    }
  });

  it("gives each call SERVICE_ENV_FUEL fuel units (default 10 billion: settings.test.ts)", async () => {
    const metered = await startTestService({ SERVICE_ENV_FUEL: "1000000" });
    try {
      const client = sessionClient(metered.url, KEY_A);
      const loop = await admitTool(metered.url, KEY_A, "loop-wat");
      const { session } = await client.createSession({
        environments: [{ name: "s", kind: { case: "service", value: {} } }],
        tools: [{ name: "spin", environment: "s", implementation: { kind: { case: "tool", value: loop } } }],
      });
      const called = await client.callTool({ sessionId: session!.id, tool: "spin" });
      expect(called.receipt?.outcome).toMatchObject({
        case: "failure",
        value: { code: "fuel_exhausted", message: expect.stringContaining("(1000000 units)") },
      });
    } finally {
      await metered.close();
    }
  });

  it.runIf(onEmbeddedStorage)("keeps prepared code through a session's end and deletion (SPEC 3.4)", async () => {
    const own = await startTestService();
    try {
      const client = sessionClient(own.url, KEY_A);
      const tool = await admitTool(own.url, KEY_A, "echo-wat");
      expect((await postJson(own.url, "/v1/service-env/prepare", { tools: [tool] }, KEY_A)).body).toEqual({
        artifacts: [{ id: tool, kind: "tool", ready: true }],
      });
      const pool = own.serviceEnv.pool!;
      // Loaded on every worker, and nothing prepared, transpiled, reloaded or unloaded since.
      const preparation = () => {
        const { prepared, transpiles, preparedFromDisk, unloads } = pool.stats();
        return { ready: pool.isPrepared(tool), prepared, transpiles, preparedFromDisk, unloads };
      };
      const before = preparation();
      expect(before.ready).toBe(true);
      const echo = async () => {
        const { session } = await client.createSession({
          environments: [{ name: "s", kind: { case: "service", value: {} } }],
          tools: [{ name: "echo", environment: "s", implementation: { kind: { case: "tool", value: tool } } }],
        });
        const called = await client.callTool({ sessionId: session!.id, tool: "echo", input: fromJson(ValueSchema, { v: 1 }) });
        expect(called.receipt?.outcome).toMatchObject({ case: "returned" });
        return session!.id;
      };
      await client.endSession({ sessionId: await echo() });
      expect(preparation()).toEqual(before);
      await client.deleteSession({ sessionId: await echo() });
      expect(preparation()).toEqual(before);
      // With its bytes gone, the tool can only run from what its preparation left on the workers.
      await fs.rm(path.join(own.dataDir, "blobs", "sha256", tool.slice(0, 2), tool));
      await echo();
      expect(preparation()).toEqual(before);
    } finally {
      await own.close();
    }
  });

  it("reports a worker that dies mid-call as unknown, once", async () => {
    const loop = await admitTool(service.url, KEY_A, "loop-wat");
    const { session } = await a.createSession({
      environments: [{ name: "s", kind: { case: "service", value: {} } }],
      tools: [{ name: "spin", environment: "s", implementation: { kind: { case: "tool", value: loop } } }],
    });
    const sessionId = session!.id;
    const calling = a.callTool({ sessionId, tool: "spin", timeout: { seconds: 30n, nanos: 0 } });
    const pool = service.serviceEnv.pool!;
    // Killed once its guest runs: before that the call did not start, and ends `unavailable`.
    await waitUntil(() => pool.stats().workers.some((worker) => worker.running > 0));
    const busy = pool.stats().workers.find((worker) => worker.running > 0)!;
    killWorker(pool, busy.index);
    const called = await calling;
    expect(called.receipt?.outcome.case).toBe("unknown");
    await a.endSession({ sessionId });
    const receipts = [];
    for await (const { event } of a.watchSession({ sessionId }))
      if (event?.type === "operation.receipt" && event.data?.operationId === called.operationId) receipts.push(event);
    expect(receipts).toHaveLength(1);
  });
});

async function waitUntil(check: () => boolean, timeoutMs = 10_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > until) throw new Error("condition not reached");
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
