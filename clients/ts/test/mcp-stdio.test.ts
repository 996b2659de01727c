import { execFileSync } from "node:child_process";
import * as fs from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { KEY_A, startTestService, type TestService } from "../../../server/test/helpers/service.ts";
import { startScriptedProvider, type ScriptedProvider } from "../../../testing/scripted-provider/index.ts";
import { hostEnv as browserHostEnv } from "../src/index.ts";
import { createNodeTransport, createServiceClient, hostEnv, PlacementError, tool, type ServiceClient, type Session, type SessionEvent } from "../src/node.ts";

const EVERYTHING = path.resolve(import.meta.dirname, "../../../node_modules/@modelcontextprotocol/server-everything/dist/index.js");
const RECORDER = path.resolve(import.meta.dirname, "fixtures/stdin-recorder.mjs");
const LONG = "trigger-long-running-operation";
/** server-everything over stdio, as an MCP host's configuration names it. */
const EVERYTHING_STDIO = { command: process.execPath, args: [EVERYTHING, "stdio"] };

let provider: ScriptedProvider;
let service: TestService;
let client: ServiceClient;
beforeAll(async () => {
  provider = await startScriptedProvider();
  service = await startTestService({ SERVICE_ANTHROPIC_BASE_URL: provider.anthropicBaseUrl, SERVICE_MODEL_MAX_RETRIES: "0" });
  client = createServiceClient(createNodeTransport({ baseUrl: service.url, apiKey: KEY_A, httpVersion: "2" }));
});
afterAll(async () => {
  await service?.close();
  await provider?.close();
});

/** The session's events from the start until one satisfies `until`. */
async function eventsUntil(session: Session, until: (event: SessionEvent) => boolean): Promise<SessionEvent[]> {
  const abort = new AbortController();
  const events: SessionEvent[] = [];
  for await (const event of session.events({ signal: abort.signal })) {
    events.push(event);
    if (until(event)) abort.abort();
  }
  return events;
}

/** This process's children running server-everything over stdio, by pid. */
function everythingChildren(): number[] {
  const lines = execFileSync("ps", ["-o", "pid=,args=", "--ppid", String(process.pid)], { encoding: "utf8" }).split("\n");
  return lines.filter((line) => line.includes(EVERYTHING)).map((line) => Number.parseInt(line.trim(), 10));
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe("hostEnv({ name, mcp })", () => {
  it("defines a host environment serving a stdio MCP server, without starting it", () => {
    const before = everythingChildren().length;
    const laptop = hostEnv({ name: "laptop", mcp: EVERYTHING_STDIO });
    expect(laptop).toMatchObject({
      kind: "host",
      name: "laptop",
      tools: {},
      server: { description: `the MCP server ${process.execPath} ${EVERYTHING} stdio` },
    });
    expect(everythingChildren().length).toBe(before);
    // Its tools are the server's: none is placed by hand, and it takes no handlers besides.
    expect(() => tool({ name: "mine", environment: laptop })).toThrow(PlacementError);
    expect(() => hostEnv({ name: "laptop", mcp: EVERYTHING_STDIO, tools: { mine: () => 1 } })).toThrow(TypeError);
    // The environment's name prefixes its tools' names, as an MCP environment's does.
    expect(() => hostEnv({ name: "lap__top", mcp: EVERYTHING_STDIO })).toThrow(/no "__"/);
    expect(() => hostEnv({ name: "x".repeat(33), mcp: EVERYTHING_STDIO })).toThrow(/at most 32 characters/);
    expect(() => hostEnv({ name: "laptop", mcp: { command: "" } })).toThrow(TypeError);
    // Spawning a process needs Node: the entry browsers use refuses it.
    expect(() => browserHostEnv({ name: "laptop", mcp: EVERYTHING_STDIO } as never)).toThrow(/@skillenv\/client\/node/);
  });

  it("places the server's tools as <environment>__<tool>, answers calls by tools/call, and stops the server with the session", async () => {
    const before = new Set(everythingChildren());
    const laptop = hostEnv({ name: "laptop", mcp: EVERYTHING_STDIO });
    const session = await client.sessions.create({ environments: [laptop] });
    const started = everythingChildren().filter((pid) => !before.has(pid));
    expect(started).toHaveLength(1);
    expect(session.hosts.get("laptop")?.state).toBe("connected");

    const names = session.record.tools.map((placed) => placed.name);
    expect(names).toEqual(expect.arrayContaining(["laptop__echo", "laptop__get-sum", `laptop__${LONG}`]));
    expect(session.record.tools.find((placed) => placed.name === "laptop__get-sum")).toEqual({
      name: "laptop__get-sum",
      description: "Returns the sum of two numbers",
      environment: "laptop",
      approval: "never",
    });

    expect(await session.callTool("laptop__echo", { message: "over stdio" })).toMatchObject({ outcome: "returned", output: { content: "Echo: over stdio" } });
    expect(await session.callTool("laptop__get-sum", { a: 2, b: 40 })).toMatchObject({
      outcome: "returned",
      output: { content: "The sum of 2 and 40 is 42." },
    });
    // isError: the tool ran and said no; its content is the failure's message.
    expect(await session.callTool("laptop__get-sum", { a: "two", b: 2 })).toMatchObject({
      outcome: "failure",
      code: "mcp_tool_error",
      message: expect.stringContaining("a"),
    });
    // Non-text content is described, as for MCP environments.
    const image = await session.callTool("laptop__get-tiny-image", {});
    expect(image).toMatchObject({
      outcome: "returned",
      output: { content: expect.stringMatching(/\[image: image\/png, \d+ bytes, attached\]/), images: [{ mimeType: "image/png" }] },
    });

    // Progress notifications become progress receipts, journaled with the notification's numbers.
    const long = await session.callTool(`laptop__${LONG}`, { duration: 0.3, steps: 3 });
    expect(long).toMatchObject({ outcome: "returned", output: { content: expect.stringContaining("Long running operation completed") } });
    const events = await eventsUntil(session, (event) => event.type === "operation.receipt" && event.data.operationId === long.operationId);
    const progress = events.filter((event) => event.type === "operation.progress" && event.data.operationId === long.operationId);
    // The last notification comes just before the result, often in the same read: the SDK then
    // handles the result first and drops that notification as one for a request that has ended.
    const numbers = progress.map((event) => JSON.parse(event.data.data as string));
    expect(numbers.slice(0, 2)).toEqual([
      { progress: 1, total: 3 },
      { progress: 2, total: 3 },
    ]);
    expect(numbers.slice(2)).toEqual(numbers.length === 3 ? [{ progress: 3, total: 3 }] : []);

    await session.delete();
    expect(session.hosts.get("laptop")?.state).toBe("closed");
    expect(alive(started[0]!)).toBe(false);
  });

  it("serves a run's calls of the server's tools", async () => {
    provider.script("stdio-mcp-run", [
      {
        toolCalls: [
          { id: "e1", name: "laptop__echo", input: { message: "from the model" } },
          { id: "s1", name: "laptop__get-sum", input: { a: 20, b: 22 } },
        ],
      },
      { text: "done" },
    ]);
    const laptop = hostEnv({ name: "laptop", mcp: EVERYTHING_STDIO });
    const first = provider.requests.length;
    const { session, run } = await client.sessions.create({
      environments: [laptop],
      run: { message: "Echo and add.", model: { provider: "anthropic", name: "stdio-mcp-run" }, providerKeys: { anthropic: "k" } },
    });
    expect(await run.result()).toMatchObject({ status: "completed", outputText: "done", toolCalls: 2 });
    // The model was offered the server's tools with the server's input schemas.
    const offered = (provider.requests[first]?.body.tools ?? []) as Array<{ name: string; input_schema: unknown }>;
    expect(offered.find((offer) => offer.name === "laptop__get-sum")?.input_schema).toMatchObject({
      type: "object",
      properties: { a: { type: "number" }, b: { type: "number" } },
      required: ["a", "b"],
    });
    const results = [];
    for await (const event of run.events()) if (event.type === "tool.result") results.push(event.data);
    expect(results).toMatchObject([
      { name: "laptop__echo", outcome: "returned", output: { content: "Echo: from the model" } },
      { name: "laptop__get-sum", outcome: "returned", output: { content: "The sum of 20 and 22 is 42." } },
    ]);
    await session.delete();
  });

  it("sends notifications/cancelled for a call whose run is cancelled", async () => {
    const directory = await fs.mkdtemp(path.join(os.tmpdir(), "stdio-mcp-"));
    const received = path.join(directory, "stdin.jsonl");
    const laptop = hostEnv({ name: "laptop", mcp: { command: process.execPath, args: [RECORDER, received, process.execPath, EVERYTHING, "stdio"] } });
    provider.script("stdio-mcp-cancel", [{ toolCalls: [{ id: "l1", name: `laptop__${LONG}`, input: { duration: 60, steps: 60 } }] }, { text: "never" }]);
    const session = await client.sessions.create({ environments: [laptop] });
    const run = await session.run({ message: "Wait.", model: { provider: "anthropic", name: "stdio-mcp-cancel" }, providerKeys: { anthropic: "k" } });
    // Synchronised on the call's first progress: the server is running it.
    const progressed = await eventsUntil(session, (event) => event.type === "operation.progress" && event.data.runId === run.id);
    const sent = progressed.findLast((event) => event.type === "operation.sent" && event.data.tool === `laptop__${LONG}`)!;

    expect((await run.cancel()).status).toBe("cancelled");

    const receipt = (await eventsUntil(session, (event) => event.type === "operation.receipt" && event.data.operationId === sent.data.operationId)).at(-1)!;
    expect(receipt.data.receipt).toMatchObject({ failure: { code: "cancelled" } });
    await session.delete();
    // The server received the protocol's cancellation of that very tools/call (the recorder has exited: its log is complete).
    const messages = (await fs.readFile(received, "utf8"))
      .split("\n")
      .filter((line) => line !== "")
      .map((line) => JSON.parse(line) as { method?: string; id?: number; params?: { name?: string; requestId?: number } });
    const call = messages.find((message) => message.method === "tools/call" && message.params?.name === LONG)!;
    expect(messages.find((message) => message.method === "notifications/cancelled")?.params?.requestId).toBe(call.id);
    await fs.rm(directory, { recursive: true, force: true });
  });

  it("closes the host when the server's process ends by itself", async () => {
    const laptop = hostEnv({ name: "laptop", mcp: EVERYTHING_STDIO });
    const before = new Set(everythingChildren());
    const session = await client.sessions.create({ environments: [laptop] });
    const host = session.hosts.get("laptop")!;
    const [pid] = everythingChildren().filter((child) => !before.has(child));
    const closed = new Promise<void>((resolve) => host.onStateChange((state) => state === "closed" && resolve()));

    process.kill(pid!, "SIGKILL");

    await closed;
    expect(host.error).toMatchObject({ name: "ToolServerExitedError", message: expect.stringContaining("its process ended") });
    await session.delete();
  });

  it("refuses to create the session when the server cannot start, and creates nothing", async () => {
    const laptop = hostEnv({ name: "laptop", mcp: { command: "/nonexistent/mcp-server" } });
    const before = (await client.sessions.list()).sessions.length;
    await expect(client.sessions.create({ environments: [laptop] })).rejects.toThrow(/could not start the MCP server \/nonexistent\/mcp-server/);
    expect((await client.sessions.list()).sessions.length).toBe(before);
  });
});
