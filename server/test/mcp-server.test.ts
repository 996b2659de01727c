import { createHash } from "node:crypto";
import { fromJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ErrorCode, McpError, ResultSchema } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CallsInFlight } from "../src/mcp-server/calls-in-flight.ts";
import { progressNotifier, toolResult } from "../src/mcp-server/session-tools-server.ts";
import { readBundle } from "../src/skills/bundle/index.ts";
import { bearer, KEY_A, KEY_B, postJson, startTestService, type TestService } from "./helpers/service.ts";
import { startEverything, type EverythingServer } from "./helpers/mcp.ts";
import { admitTool, eventsUntil, sessionClient } from "./helpers/sessions.ts";
import { bundleOf, publish, type Bundle } from "./helpers/skills.ts";

/** Bodies above this are refused (SERVICE_MAX_REQUEST_BYTES of the service under test). */
const MAX_REQUEST_BYTES = 256 * 1024;
/** A tool's input above this is refused before it is journaled (SERVICE_JOURNAL_MAX_PAYLOAD_BYTES). */
const MAX_PAYLOAD_BYTES = 8 * 1024;

const digest = (bytes: Uint8Array) => `sha256:${createHash("sha256").update(bytes).digest("hex")}`;

/** Bytes that are not UTF-8: answered as a blob, whose base64 gives them back exactly. */
const BINARY = new Uint8Array([0xff, 0xfe, 0x00, 0x80, 0xc3, 0x28, 0x9f]);

const PDF_FILES = {
  "SKILL.md":
    "---\nname: pdf-tools\ndescription: Fill and assemble PDF forms.\nlicense: Apache-2.0\nmetadata:\n  owner: docs-team\n---\n# PDF tools\nSee references/GUIDE.md.\n",
  "references/GUIDE.md": "# Guide\nStep one.\n",
  "scripts/fill.py": "print('filled')\n",
  "data/sample.bin": BINARY,
};
/** Bound under a name its frontmatter does not carry. */
const RENAMED_FILES = { "SKILL.md": "---\ndescription: Notes without a name of their own.\n---\nTake notes.\n" };
const B_FILES = { "SKILL.md": "---\nname: b-secret\ndescription: Workspace B's own skill.\n---\nSecret instructions of B.\n" };

interface SkillEntry {
  uri: string;
  frontmatter: Record<string, unknown>;
  resources: Array<{ uri: string; digest: string; size: number }>;
}

describe("the service as an MCP server (the official SDK's client over Streamable HTTP)", () => {
  let service: TestService;
  /** The reference MCP server, mounted by a session whose tools the service then serves on. */
  let everything: EverythingServer;
  let pdf: Bundle;
  let sessionId: string;
  let echo: string;
  let trap: string;
  const clients: Client[] = [];

  beforeAll(async () => {
    everything = await startEverything();
    service = await startTestService({
      SERVICE_MCP_ALLOW: everything.origin,
      SERVICE_MAX_REQUEST_BYTES: String(MAX_REQUEST_BYTES),
      SERVICE_JOURNAL_MAX_PAYLOAD_BYTES: String(MAX_PAYLOAD_BYTES),
    });
    pdf = bundleOf(PDF_FILES);
    await publish(service, "pdf-tools", pdf);
    await publish(service, "notes", bundleOf(RENAMED_FILES));
    await publish(service, "b-secret", bundleOf(B_FILES), KEY_B);
    [echo, trap] = await Promise.all([admitTool(service.url, KEY_A, "echo-wat"), admitTool(service.url, KEY_A, "trap-wat")]);
    sessionId = await echoSession();
  }, 120_000);
  afterAll(async () => {
    await Promise.all(clients.map((client) => client.close()));
    await service?.close();
    await everything?.kill();
  });

  async function echoSession(): Promise<string> {
    const created = await postJson(
      service.url,
      "/v1/sessions",
      {
        environments: [{ name: "sandbox", service: {} }],
        tools: [
          {
            name: "echo",
            description: "Echoes its input.",
            environment: "sandbox",
            implementation: { tool: echo },
            inputSchema: { type: "object", properties: { text: { type: "string" } } },
          },
          { name: "trap", description: "Always fails.", environment: "sandbox", implementation: { tool: trap } },
        ],
      },
      KEY_A,
    );
    expect(created).toMatchObject({ status: 200 });
    return created.body.session.id;
  }

  async function connect(path: string, key = KEY_A): Promise<Client> {
    const client = new Client({ name: "mcp-server-test", version: "1.0.0" });
    const transport = new StreamableHTTPClientTransport(new URL(path, service.url), { requestInit: { headers: bearer(key) } });
    await client.connect(transport);
    clients.push(client);
    return client;
  }

  const listSkills = async (client: Client) => {
    const skills: SkillEntry[] = [];
    let cursor: string | undefined;
    do {
      const page = (await client.request({ method: "skills/list", params: cursor ? { cursor } : {} }, ResultSchema)) as {
        skills: SkillEntry[];
        nextCursor?: string;
      };
      skills.push(...page.skills);
      cursor = page.nextCursor;
    } while (cursor);
    return skills;
  };
  const getSkill = async (client: Client, uri: string) =>
    ((await client.request({ method: "skills/get", params: { uri } }, ResultSchema)) as { skill: SkillEntry }).skill;
  const mcpCodeOf = (call: Promise<unknown>) =>
    call.then(
      () => undefined,
      (error: unknown) => (error instanceof McpError ? error.code : error),
    );

  /** The bytes a resources/read content holds: text as UTF-8, a blob decoded from base64. */
  const bytesOf = (content: { text?: unknown; blob?: unknown }) =>
    typeof content.text === "string" ? new TextEncoder().encode(content.text) : new Uint8Array(Buffer.from(content.blob as string, "base64"));

  it("speaks MCP 2025-11-25 and declares the skills extension beside resources", async () => {
    const client = await connect("/mcp");
    expect(client.getServerVersion()).toMatchObject({ name: "skillenv" });
    expect(client.getServerCapabilities()).toMatchObject({ resources: {}, extensions: { "io.modelcontextprotocol/skills": {} } });
    expect((client.transport as StreamableHTTPClientTransport).protocolVersion).toBe("2025-11-25");
  });

  it("lists the workspace's skills with their frontmatter and every file's digest and size from the canonical bundle", async () => {
    const client = await connect("/mcp");
    const skills = await listSkills(client);
    expect(skills.map((skill) => skill.uri).sort()).toEqual(["skill://notes/SKILL.md", "skill://pdf-tools/SKILL.md"]);
    const entry = skills.find((skill) => skill.uri === "skill://pdf-tools/SKILL.md")!;
    expect(entry.frontmatter).toEqual({
      name: "pdf-tools",
      description: "Fill and assemble PDF forms.",
      license: "Apache-2.0",
      metadata: { owner: "docs-team" },
    });
    // The files the registry's canonical bundle holds, read back from the very bytes uploaded.
    const canonical = (await readBundle(pdf.zip)).files;
    expect(entry.resources).toHaveLength(canonical.size);
    expect(entry.resources).toEqual(
      Array.from(canonical, ([path, bytes]) => ({ uri: `skill://pdf-tools/${path}`, digest: digest(bytes), size: bytes.byteLength })),
    );
    expect(entry.resources).toContainEqual({ uri: "skill://pdf-tools/data/sample.bin", digest: digest(BINARY), size: BINARY.byteLength });
    // Bound under a name its frontmatter lacks: the entry carries the bound name, as its URI does.
    const renamed = skills.find((skill) => skill.uri === "skill://notes/SKILL.md")!;
    expect(renamed.frontmatter).toEqual({ name: "notes", description: "Notes without a name of their own." });
  });

  it("gets one skill's entry by its SKILL.md URI, and answers -32602 for a URI that names no skill", async () => {
    const client = await connect("/mcp");
    const [listed] = (await listSkills(client)).filter((skill) => skill.uri === "skill://pdf-tools/SKILL.md");
    expect(await getSkill(client, "skill://pdf-tools/SKILL.md")).toEqual(listed);
    expect(await mcpCodeOf(getSkill(client, "skill://no-such-skill/SKILL.md"))).toBe(ErrorCode.InvalidParams);
    expect(await mcpCodeOf(getSkill(client, "skill://pdf-tools/references/GUIDE.md"))).toBe(ErrorCode.InvalidParams);
    expect(await mcpCodeOf(getSkill(client, "https://example.com/SKILL.md"))).toBe(ErrorCode.InvalidParams);
  });

  it("serves every file as a resource whose bytes match the entry's digest and size", async () => {
    const client = await connect("/mcp");
    const { resources } = await client.listResources();
    const entry = await getSkill(client, "skill://pdf-tools/SKILL.md");
    expect(resources.filter((resource) => resource.uri.startsWith("skill://pdf-tools/")).map((resource) => resource.uri)).toEqual(
      entry.resources.map((file) => file.uri),
    );
    expect(resources.find((resource) => resource.uri === "skill://pdf-tools/SKILL.md")).toMatchObject({
      name: "pdf-tools",
      description: "Fill and assemble PDF forms.",
      mimeType: "text/markdown",
    });
    for (const file of entry.resources) {
      const { contents } = await client.readResource({ uri: file.uri });
      expect(contents).toHaveLength(1);
      expect(contents[0]!.uri).toBe(file.uri);
      const bytes = bytesOf(contents[0]!);
      expect({ digest: digest(bytes), size: bytes.byteLength }).toEqual({ digest: file.digest, size: file.size });
    }
    const skillMd = (await client.readResource({ uri: "skill://pdf-tools/SKILL.md" })).contents[0]!;
    expect(skillMd).toMatchObject({ mimeType: "text/markdown", text: PDF_FILES["SKILL.md"] });
    expect((await client.readResource({ uri: "skill://pdf-tools/data/sample.bin" })).contents[0]).toHaveProperty("blob");
    expect(await mcpCodeOf(client.readResource({ uri: "skill://pdf-tools/no/such/file.md" }))).toBe(ErrorCode.InvalidParams);
  });

  it("serves a session's placed tools; a call is a journaled CallTool its events show", async () => {
    const client = await connect(`/mcp/sessions/${sessionId}`);
    expect(client.getServerCapabilities()).toMatchObject({ tools: {} });
    const { tools } = await client.listTools();
    expect(tools).toEqual([
      { name: "echo", description: "Echoes its input.", inputSchema: { type: "object", properties: { text: { type: "string" } } } },
      // Placed without an input schema: offered as MCP's object of arguments.
      { name: "trap", description: "Always fails.", inputSchema: { type: "object" } },
    ]);
    const result = await client.callTool({ name: "echo", arguments: { text: "hello over mcp" } });
    expect(result.isError).toBeFalsy();
    expect(result.content).toEqual([{ type: "text", text: JSON.stringify({ text: "hello over mcp" }) }]);
    expect(result.structuredContent).toEqual({ text: "hello over mcp" });
    const operationId = result._meta?.["skillenv/operationId"] as string;
    expect(operationId).toMatch(/^op_/);
    expect(result._meta?.["skillenv/outcome"]).toBe("returned");

    const events = await eventsUntil(
      sessionClient(service.url, KEY_A),
      sessionId,
      (event) => event.type === "operation.receipt" && event.data?.operationId === operationId,
    );
    const ofCall = events.filter((event) => event.data?.operationId === operationId);
    expect(ofCall.map((event) => event.type)).toEqual(["operation.sent", "operation.receipt"]);
    expect(ofCall[0]!.data).toMatchObject({ kind: "execute", tool: "echo", input: { text: "hello over mcp" } });
    expect(ofCall[1]!.data?.receipt).toEqual({ returned: { output: { text: "hello over mcp" } } });
  });

  it("answers a tool's failure receipt as an isError result carrying its code, journaled like any call", async () => {
    const client = await connect(`/mcp/sessions/${sessionId}`);
    const failed = await client.callTool({ name: "trap", arguments: {} });
    expect(failed).toMatchObject({
      isError: true,
      content: [{ type: "text", text: expect.stringMatching(/^guest_trap: /) }],
      _meta: { "skillenv/outcome": "failure", "skillenv/code": "guest_trap", "skillenv/retryable": false },
    });
    const operationId = failed._meta?.["skillenv/operationId"];
    const events = await eventsUntil(
      sessionClient(service.url, KEY_A),
      sessionId,
      (event) => event.type === "operation.receipt" && event.data?.operationId === operationId,
    );
    expect(events.at(-1)?.data?.receipt).toMatchObject({ failure: { code: "guest_trap" } });
  });

  it("streams a call's progress as MCP progress notifications, which the session's events keep too", async () => {
    // An MCP environment's tool served on: the reference server's long-running tool reports progress.
    const long = "trigger-long-running-operation";
    const created = await postJson(service.url, "/v1/sessions", { environments: [{ name: "ev", mcp: { url: everything.url, tools: [long] } }] }, KEY_A);
    expect(created).toMatchObject({ status: 200, body: { session: { state: "ready" } } });
    const mounted = created.body.session.id as string;
    const client = await connect(`/mcp/sessions/${mounted}`);
    const progress: unknown[] = [];
    const result = await client.callTool({ name: `ev__${long}`, arguments: { duration: 0.3, steps: 3 } }, undefined, {
      onprogress: (notification) => progress.push(notification),
    });
    expect(result.isError).toBeFalsy();
    expect(result.content).toEqual([{ type: "text", text: expect.stringContaining("Long running operation completed") }]);
    expect(progress).toEqual([
      { progress: 1, total: 3 },
      { progress: 2, total: 3 },
      { progress: 3, total: 3 },
    ]);
    const operationId = result._meta?.["skillenv/operationId"];
    const events = await eventsUntil(
      sessionClient(service.url, KEY_A),
      mounted,
      (event) => event.type === "operation.receipt" && event.data?.operationId === operationId,
    );
    expect(events.filter((event) => event.type === "operation.progress" && event.data?.operationId === operationId)).toHaveLength(3);
  });

  describe("a call its client withdraws is cancelled in the session, as a cancelled run's call is", () => {
    const long = "trigger-long-running-operation";
    const sessions = () => sessionClient(service.url, KEY_A);

    async function mountedSession(): Promise<string> {
      const created = await postJson(service.url, "/v1/sessions", { environments: [{ name: "ev", mcp: { url: everything.url, tools: [long] } }] }, KEY_A);
      expect(created).toMatchObject({ status: 200, body: { session: { state: "ready" } } });
      return created.body.session.id as string;
    }

    /** Once the call has reported progress (the server is running it): its operation id. */
    async function runningCall(mounted: string): Promise<string> {
      const events = await eventsUntil(sessions(), mounted, (event) => event.type === "operation.progress");
      return events.find((event) => event.type === "operation.sent" && event.data?.kind === "execute")?.data?.operationId as string;
    }

    /** The call's receipt, and the cancel the session sent for it with that cancel's receipt. */
    async function cancelledCall(mounted: string, operationId: string) {
      const untilReceipt = (id: string) => (event: { type: string; data?: Record<string, unknown> }) =>
        event.type === "operation.receipt" && event.data?.operationId === id;
      const events = await eventsUntil(sessions(), mounted, untilReceipt(operationId));
      const cancel = events.find((event) => event.type === "operation.sent" && event.data?.kind === "cancel");
      const cancelEvents = await eventsUntil(sessions(), mounted, untilReceipt(cancel?.data?.operationId as string));
      return { receipt: events.at(-1)?.data?.receipt, cancel: cancel?.data, cancelReceipt: cancelEvents.at(-1)?.data?.receipt };
    }

    it("on notifications/cancelled (the SDK's client sends it when its request's signal aborts)", async () => {
      const mounted = await mountedSession();
      const client = await connect(`/mcp/sessions/${mounted}`);
      const abort = new AbortController();
      const firstProgress = Promise.withResolvers<void>();
      const call = client
        .callTool({ name: `ev__${long}`, arguments: { duration: 60, steps: 60 } }, undefined, {
          signal: abort.signal,
          onprogress: () => firstProgress.resolve(),
        })
        .catch((error: unknown) => error);
      await firstProgress.promise;
      const operationId = await runningCall(mounted);

      abort.abort("the user pressed stop");

      // The SDK rejects at once (its own error, carrying the reason), sends the notification, and ignores a late result.
      expect(await call).toMatchObject({ message: expect.stringContaining("the user pressed stop") });
      const { receipt, cancel, cancelReceipt } = await cancelledCall(mounted, operationId);
      expect(receipt).toMatchObject({ failure: { code: "cancelled" } });
      expect(cancel).toMatchObject({ targetOperationId: operationId });
      // The MCP environment told its server in turn.
      expect(cancelReceipt).toMatchObject({ returned: { output: { sent: true } } });
    });

    it("when the API's CallTool client leaves before the receipt (Connect), as when an MCP client does", async () => {
      const mounted = await mountedSession();
      const abort = new AbortController();
      const call = sessions()
        .callTool({ sessionId: mounted, tool: `ev__${long}`, input: fromJson(ValueSchema, { duration: 60, steps: 60 }) }, { signal: abort.signal })
        .catch((error: unknown) => ConnectError.from(error));
      const operationId = await runningCall(mounted);

      abort.abort();

      expect(await call).toMatchObject({ code: Code.Canceled });
      const { receipt, cancel } = await cancelledCall(mounted, operationId);
      expect(receipt).toMatchObject({ failure: { code: "cancelled" } });
      expect(cancel).toMatchObject({ targetOperationId: operationId });
    });

    it("when the client closes its response stream before the result", async () => {
      const mounted = await mountedSession();
      const abort = new AbortController();
      const response = await fetch(new URL(`/mcp/sessions/${mounted}`, service.url), {
        method: "POST",
        headers: { ...bearer(KEY_A), "content-type": "application/json", accept: "application/json, text/event-stream" },
        body: JSON.stringify({
          jsonrpc: "2.0",
          id: 7,
          method: "tools/call",
          params: { name: `ev__${long}`, arguments: { duration: 60, steps: 60 }, _meta: { progressToken: "p" } },
        }),
        signal: abort.signal,
      });
      expect(response.headers.get("content-type")).toContain("text/event-stream");
      // Read until the first progress notification: the call is running.
      const reader = response.body!.getReader();
      let text = "";
      while (!text.includes("notifications/progress")) text += new TextDecoder().decode((await reader.read()).value);
      const operationId = await runningCall(mounted);

      abort.abort();

      const { receipt, cancel } = await cancelledCall(mounted, operationId);
      expect(receipt).toMatchObject({ failure: { code: "cancelled" } });
      expect(cancel).toMatchObject({ targetOperationId: operationId });
    });
  });

  it("ignores a cancellation naming a request id two calls of one session share, rather than stopping another client's call", () => {
    const calls = new CallsInFlight();
    const [mine, theirs, other] = [new AbortController(), new AbortController(), new AbortController()];
    const untrackMine = calls.track("ws", "ses_1", 3, mine);
    calls.track("ws", "ses_1", 3, theirs);
    calls.track("ws", "ses_1", "3", other);
    expect(calls.cancel("ws", "ses_1", 3, "stop")).toBe(false);
    expect([mine.signal.aborted, theirs.signal.aborted]).toEqual([false, false]);
    untrackMine();
    expect(calls.cancel("ws", "ses_1", 3, "stop")).toBe(true);
    expect([mine.signal.aborted, theirs.signal.aborted, other.signal.aborted]).toEqual([false, true, false]);
    // Another workspace's or session's id is another call.
    expect(calls.cancel("other", "ses_1", "3", "stop")).toBe(false);
    expect(calls.cancel("ws", "ses_2", "3", "stop")).toBe(false);
  });

  it("makes any progress report an MCP progress that grows", () => {
    const sent: unknown[] = [];
    const report = progressNotifier((params) => sent.push(params));
    report('{"progress":2,"total":4,"message":"half"}');
    report('{"progress":2}'); // not growing: dropped
    report('{"v":1,"kind":"log","text":"a guest\'s own report"}');
    report('"plain words"');
    report("not json");
    expect(sent).toEqual([
      { progress: 2, total: 4, message: "half" },
      { progress: 3, message: '{"v":1,"kind":"log","text":"a guest\'s own report"}' },
      { progress: 4, message: "plain words" },
      { progress: 5, message: "not json" },
    ]);
  });

  it("answers a tool the session does not place with -32602, journaling nothing", async () => {
    const client = await connect(`/mcp/sessions/${sessionId}`);
    expect(await mcpCodeOf(client.callTool({ name: "no-such-tool", arguments: {} }))).toBe(ErrorCode.InvalidParams);
  });

  it("answers refusals a model can act on as isError results with their stable code, journaling nothing", async () => {
    const ended = await echoSession();
    const client = await connect(`/mcp/sessions/${ended}`);
    expect((await postJson(service.url, `/v1/sessions/${ended}/end`, {}, KEY_A)).status).toBe(200);
    const refused = await client.callTool({ name: "echo", arguments: { text: "too late" } });
    expect(refused).toMatchObject({
      isError: true,
      content: [{ type: "text", text: expect.stringMatching(/^session_ended: .*nothing ran\)$/) }],
      _meta: { "skillenv/outcome": "refused", "skillenv/code": "session_ended", "skillenv/retryable": false },
    });
    expect(refused._meta).not.toHaveProperty("skillenv/operationId");

    const open = await connect(`/mcp/sessions/${sessionId}`);
    const tooLarge = await open.callTool({ name: "echo", arguments: { text: "x".repeat(MAX_PAYLOAD_BYTES) } });
    expect(tooLarge).toMatchObject({ isError: true, _meta: { "skillenv/outcome": "refused", "skillenv/code": "input_too_large" } });
    const deep = await open.callTool({ name: "echo", arguments: { text: JSON.parse(`${"[".repeat(40)}${"]".repeat(40)}`) } });
    expect(deep).toMatchObject({ isError: true, _meta: { "skillenv/outcome": "refused", "skillenv/code": "input_too_deep" } });
    const events = await eventsUntil(sessionClient(service.url, KEY_A), ended, (event) => event.type === "session.ended");
    expect(events.filter((event) => event.type === "operation.sent" && event.data?.kind === "execute")).toEqual([]);
  });

  it("maps receipts to results: a failure and an unknown outcome are isError, saying which", () => {
    const failed = toolResult("op_1", { outcome: "failure", code: "pool_saturated", message: "all workers are busy", retryable: true });
    expect(failed).toEqual({
      content: [{ type: "text", text: "pool_saturated: all workers are busy" }],
      isError: true,
      _meta: { "skillenv/operationId": "op_1", "skillenv/outcome": "failure", "skillenv/code": "pool_saturated", "skillenv/retryable": true },
    });
    const unknown = toolResult("op_2", { outcome: "unknown", message: "the worker died" });
    expect(unknown.isError).toBe(true);
    expect(unknown._meta).toEqual({ "skillenv/operationId": "op_2", "skillenv/outcome": "unknown" });
    expect(unknown.content).toEqual([{ type: "text", text: expect.stringMatching(/^outcome unknown: .*not retried \(the worker died\)$/) }]);
    expect(toolResult("op_3", { outcome: "returned", output: '"plain text"' }).content).toEqual([{ type: "text", text: "plain text" }]);
  });

  it("refuses a wrong or missing key with unauthenticated, before MCP is involved, and never logs the key", async () => {
    // The SDK's StreamableHTTPError: the HTTP status as its code, the API's JSON error in its message.
    const refused = { code: 401, message: expect.stringContaining('"code":"unauthenticated"') };
    await expect(connect("/mcp", "not-a-key")).rejects.toMatchObject(refused);
    await expect(connect(`/mcp/sessions/${sessionId}`, "not-a-key")).rejects.toMatchObject(refused);
    const missing = await mcpPost("/mcp", initialize(), {});
    expect(missing.status).toBe(401);
    expect(missing.body).toMatchObject({ code: "unauthenticated" });
    const lines = service.logs.filter((line) => JSON.parse(line).protocol === "mcp");
    expect(lines.length).toBeGreaterThan(0);
    expect(lines.some((line) => JSON.parse(line).code === "unauthenticated")).toBe(true);
    expect(service.logs.join("\n")).not.toContain(KEY_A);
    expect(service.logs.join("\n")).not.toContain("not-a-key");
  });

  it("keeps workspaces apart: B sees none of A's skills, files or sessions", async () => {
    const b = await connect("/mcp", KEY_B);
    expect((await listSkills(b)).map((skill) => skill.uri)).toEqual(["skill://b-secret/SKILL.md"]);
    expect(await mcpCodeOf(getSkill(b, "skill://pdf-tools/SKILL.md"))).toBe(ErrorCode.InvalidParams);
    expect(await mcpCodeOf(b.readResource({ uri: "skill://pdf-tools/SKILL.md" }))).toBe(ErrorCode.InvalidParams);
    expect((await b.listResources()).resources.map((resource) => resource.uri)).toEqual(["skill://b-secret/SKILL.md"]);
    const a = await connect("/mcp");
    expect(await mcpCodeOf(a.readResource({ uri: "skill://b-secret/SKILL.md" }))).toBe(ErrorCode.InvalidParams);

    // A's session through B's key: session_not_found, exactly as an unknown id.
    await expect(connect(`/mcp/sessions/${sessionId}`, KEY_B)).rejects.toMatchObject({
      code: 404,
      message: expect.stringContaining('"code":"session_not_found"'),
    });
    const foreign = await mcpPost(`/mcp/sessions/${sessionId}`, callEcho(), bearer(KEY_B));
    const unknown = await mcpPost("/mcp/sessions/ses_00000000000000000000000000", callEcho(), bearer(KEY_B));
    expect(foreign).toEqual({ status: 404, body: { code: "session_not_found", status: "not_found", message: expect.any(String) } });
    expect(unknown.body.code).toBe("session_not_found");
    // Nothing of B's attempts reached A's journal: read up to a call A makes after them.
    const own = await connect(`/mcp/sessions/${sessionId}`);
    const after = (await own.callTool({ name: "echo", arguments: { text: "from a" } }))._meta?.["skillenv/operationId"];
    const events = await eventsUntil(
      sessionClient(service.url, KEY_A),
      sessionId,
      (event) => event.data?.operationId === after && event.type === "operation.receipt",
    );
    expect(JSON.stringify(events.map((event) => event.data))).not.toContain("from b");
  });

  it("refuses what Streamable HTTP does not allow, each with a stable code", async () => {
    const get = await fetch(new URL("/mcp", service.url), { headers: { ...bearer(KEY_A), accept: "text/event-stream" } });
    expect(get.status).toBe(405);
    expect(get.headers.get("allow")).toBe("POST");
    expect(await get.json()).toMatchObject({ code: "mcp_method_not_allowed" });
    const del = await fetch(new URL(`/mcp/sessions/${sessionId}`, service.url), { method: "DELETE", headers: bearer(KEY_A) });
    expect((await del.json()).code).toBe("mcp_method_not_allowed");

    expect(await mcpPost("/mcp", initialize(), bearer(KEY_A), { accept: "application/json" })).toMatchObject({
      status: 406,
      body: { code: "mcp_not_acceptable" },
    });
    expect(await mcpPost("/mcp", initialize(), bearer(KEY_A), { "content-type": "text/plain" })).toMatchObject({
      status: 400,
      body: { code: "malformed_request" },
    });
    expect(await mcpPost("/mcp", "{not json", bearer(KEY_A))).toMatchObject({ status: 400, body: { code: "malformed_request" } });
    expect(await mcpPost("/mcp", [initialize()], bearer(KEY_A))).toMatchObject({ status: 400, body: { code: "malformed_request" } });
    expect(await mcpPost("/mcp", { method: "skills/list" }, bearer(KEY_A))).toMatchObject({ status: 400, body: { code: "malformed_request" } });
    expect(await mcpPost("/mcp", initialize(), bearer(KEY_A), { "mcp-protocol-version": "1999-01-01" })).toMatchObject({
      status: 400,
      body: { code: "mcp_protocol_version_unsupported" },
    });
    const huge = JSON.stringify({ ...callEcho(), params: { name: "echo", arguments: { text: "x".repeat(MAX_REQUEST_BYTES) } } });
    expect(await mcpPost(`/mcp/sessions/${sessionId}`, huge, bearer(KEY_A))).toMatchObject({ status: 413, body: { code: "payload_too_large" } });
    expect(await mcpPost("/mcp/sessions/", initialize(), bearer(KEY_A))).toMatchObject({ status: 404, body: { code: "route_not_found" } });
  });

  async function mcpPost(path: string, body: unknown, auth: Record<string, string>, headers: Record<string, string> = {}) {
    const response = await fetch(new URL(path, service.url), {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream", ...auth, ...headers },
      body: typeof body === "string" ? body : JSON.stringify(body),
    });
    const text = await response.text();
    return { status: response.status, body: text ? JSON.parse(text) : undefined };
  }
});

function initialize() {
  return {
    jsonrpc: "2.0",
    id: 1,
    method: "initialize",
    params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "raw", version: "1" } },
  };
}

function callEcho() {
  return { jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "echo", arguments: { text: "from b" } } };
}
