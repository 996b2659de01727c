/**
 * Two replicas behind HAProxy (round robin, HTTP/2 cleartext and HTTP/1.1 on one port, gRPC
 * streams), as docs/operations.md configures it: clients work through it as through one server,
 * whichever replica each call lands on. Real HAProxy, PostgreSQL and S3, started here.
 */
import { fromJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { execFile, spawn, type ChildProcess } from "node:child_process";
import * as fs from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import { promisify } from "node:util";
import { createNodeTransport, createServiceClient, hostEnv, tool } from "@skillenv/client/node";
import { chromium } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SessionService } from "../../gen/skillenv/sessions/v1/sessions_pb.js";
import { buildTestComponents } from "./helpers/pool.ts";
import { freePort } from "./helpers/ports.ts";
import { spawnService } from "./helpers/process.ts";
import { startPostgres } from "./helpers/postgres.ts";
import { startS3 } from "./helpers/s3.ts";
import { bearer, KEY_A, requestLogSince, startTestService, type TestService } from "./helpers/service.ts";
import { hostClient, TestBrowserHost, TestHost } from "./helpers/hosts.ts";
import { admitTool, eventsUntil, sessionClient, whenServed } from "./helpers/sessions.ts";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

/** As server/test/console.test.ts: root has no sandbox here, and the network outside loopback is closed. */
const CHROMIUM_ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking"];

const ROOT = path.resolve(import.meta.dirname, "../..");
const BUF = path.join(ROOT, "node_modules/.bin/buf");
const PYTHON_SRC = path.join(ROOT, "clients/python/src");

let postgres: Awaited<ReturnType<typeof startPostgres>>;
let s3: Awaited<ReturnType<typeof startS3>>;
let replicas: TestService[];
let balancer: string;
let directory: string;

/** The configuration docs/operations.md gives, with the test's ports. */
function haproxyConfig(port: number, backends: string[], checks = false): string {
  return `global
  maxconn 4096

defaults
  mode http
  timeout connect 5s
  timeout client 1h
  timeout server 1h
  timeout tunnel 1h

frontend skillenv
  # HTTP/1.1, and HTTP/2 cleartext (detected by its preface) on one port.
  bind 127.0.0.1:${port}
  default_backend replicas

backend replicas
  balance roundrobin
${checks ? "  option httpchk\n  http-check send meth GET uri /readyz ver HTTP/1.1 hdr host replica\n" : ""}  # HTTP/2 to every replica, so that gRPC (and its streams) pass through.
${backends.map((backend, i) => `  server replica-${i} ${new URL(backend).host} proto h2${checks ? " check inter 500 fall 1 rise 1" : ""}`).join("\n")}
`;
}

beforeAll(async () => {
  await buildTestComponents();
  [postgres, s3] = await Promise.all([startPostgres(), startS3()]);
  Object.assign(process.env, s3.env);
  directory = await fs.mkdtemp(path.join(os.tmpdir(), "skillenv-haproxy-"));
  const shared = { SERVICE_DATABASE_URL: await postgres.createDatabase(), SERVICE_BLOB_URL: s3.blobUrl("balanced") };
  replicas = [await startTestService(shared), await startTestService(shared)];
  balancer = await startHaproxy(replicas.map((replica) => replica.url));
}, 600_000);

const balancers: ChildProcess[] = [];

/** HAProxy in front of `backends` (the configuration above); its URL once it answers the probe through to a replica. */
async function startHaproxy(backends: string[], checks = false): Promise<string> {
  const port = await freePort();
  const config = path.join(directory, `haproxy-${port}.cfg`);
  await fs.writeFile(config, haproxyConfig(port, backends, checks));
  await promisify(execFile)("haproxy", ["-c", "-q", "-f", config]);
  balancers.push(spawn("haproxy", ["-db", "-f", config], { stdio: ["ignore", "ignore", "pipe"] }));
  const url = `http://127.0.0.1:${port}`;
  for (;;) {
    const ready = await fetch(`${url}/readyz`).then(
      (response) => response.status === 200,
      () => false,
    );
    if (ready) return url;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

afterAll(async () => {
  for (const child of balancers) child.kill("SIGKILL");
  await Promise.allSettled((replicas ?? []).map((replica) => replica.close()));
  await Promise.allSettled([postgres?.stop(), s3?.stop()]);
  if (directory) await fs.rm(directory, { recursive: true, force: true });
});

describe("two replicas behind HAProxy", () => {
  it("serve a session's calls, watch stream and JSON paths through the balancer, whichever replica each lands on", async () => {
    const marks = replicas.map((replica) => replica.logs.length);
    const tool = await admitTool(balancer, KEY_A, "echo-wat");
    const client = sessionClient(balancer, KEY_A);
    const { session } = await client.createSession({
      environments: [{ name: "box", kind: { case: "service", value: {} } }],
      tools: [{ name: "echo", environment: "box", implementation: { kind: { case: "tool", value: tool } } }],
    });
    const sessionId = session!.id;

    // A watch held open through the balancer while calls land on both replicas.
    const watched: string[] = [];
    const watching = (async () => {
      for await (const { event } of client.watchSession({ sessionId })) {
        if (event!.type === "operation.receipt" && event!.data?.kind === "execute") watched.push(String(event!.data?.operationId));
        if (event!.type === "session.ended") return;
      }
    })();
    // gRPC (grpc-js-compatible framing, HTTP/2) and Connect over HTTP/2, on new connections each, so round robin spreads them.
    for (let i = 0; i < 6; i++) {
      const transport = createGrpcTransport({
        baseUrl: balancer,
        interceptors: [(next) => (request) => (request.header.set("authorization", `Bearer ${KEY_A}`), next(request))],
      });
      const called = await createClient(SessionService, transport).callTool({ sessionId, tool: "echo", input: fromJson(ValueSchema, { i }) });
      expect(called.receipt?.outcome.case).toBe("returned");
    }
    // JSON over HTTP/1.1.
    const json = await fetch(`${balancer}/v1/sessions/${sessionId}/tools/echo:call`, {
      method: "POST",
      headers: { ...bearer(KEY_A), "content-type": "application/json" },
      body: JSON.stringify({ input: { over: "http/1.1" } }),
    });
    expect(json.status).toBe(200);
    expect((await json.json()).receipt.returned).toBeDefined();

    await client.endSession({ sessionId });
    await watching;
    // Every call's receipt reached the watcher, once.
    expect(new Set(watched).size).toBe(7);
    expect(watched).toHaveLength(7);
    // The JSON path's server-sent events, over HTTP/1.1 through the balancer: the whole journal, ending with the session.
    const sse = await fetch(`${balancer}/v1/sessions/${sessionId}/events`, { headers: { ...bearer(KEY_A), accept: "text/event-stream" } });
    expect(sse.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const sent = (await sse.text())
      .split("\n")
      .filter((line) => line.startsWith("data:"))
      .map((line) => JSON.parse(line.slice(5)));
    expect(
      sent
        .filter((body) => body.event?.type === "operation.receipt" && body.event?.data?.kind === "execute")
        .map((body) => body.event.data.operationId)
        .sort(),
    ).toEqual([...watched].sort());
    expect(sent.at(-1)?.event?.type).toBe("session.ended");

    // Both replicas took calls of the session from the balancer: one served them, the other forwarded them.
    for (const [i, replica] of replicas.entries()) {
      const lines = await requestLogSince(replica, marks[i]!);
      expect(lines.some((line) => line.procedure === "skillenv.sessions.v1.SessionService/CallTool")).toBe(true);
    }
  });

  it("carry both host stream forms to the session's owner: commands out, receipts and Reports back", async () => {
    const marks = replicas.map((replica) => replica.logs.length);
    const client = sessionClient(balancer, KEY_A);
    const { session } = await client.createSession({
      environments: [
        { name: "laptop", kind: { case: "host", value: {} } },
        { name: "browser", kind: { case: "host", value: {} } },
      ],
      tools: [
        { name: "local", environment: "laptop" },
        { name: "page", environment: "browser" },
      ],
    });
    const sessionId = session!.id;
    const laptop = new TestHost(hostClient(balancer, KEY_A, "grpc"), sessionId, "laptop");
    const browser = new TestBrowserHost(hostClient(balancer, KEY_A), sessionId, "browser");
    await Promise.all([laptop.attached(), browser.attached()]);
    for (let i = 0; i < 4; i++) {
      const local = client.callTool({ sessionId, tool: "local", input: fromJson(ValueSchema, { i }) });
      const page = client.callTool({ sessionId, tool: "page", input: fromJson(ValueSchema, { i }) });
      laptop.returned((await laptop.command("local", i)).operationId, { laptop: i });
      // Each Report is a call of its own, which the balancer sends to either replica.
      await browser.returned((await browser.command("page", i)).operationId, { browser: i });
      expect((await local).receipt?.outcome.case).toBe("returned");
      expect((await page).receipt?.outcome.case).toBe("returned");
    }
    // Reports reached both replicas: the owner, and the other, which forwarded them.
    for (const [i, replica] of replicas.entries()) {
      const lines = await requestLogSince(replica, marks[i]!);
      expect(lines.some((line) => line.procedure === "skillenv.env.v1.HostService/Report")).toBe(true);
    }
    await client.endSession({ sessionId });
    laptop.close();
  });

  it("serve a session's tools over MCP through the balancer, each call the owner's journaled CallTool", async () => {
    const marks = replicas.map((replica) => replica.logs.length);
    const tool = await admitTool(balancer, KEY_A, "echo-wat");
    const { session } = await sessionClient(balancer, KEY_A).createSession({
      environments: [{ name: "box", kind: { case: "service", value: {} } }],
      tools: [{ name: "echo", environment: "box", implementation: { kind: { case: "tool", value: tool } } }],
    });
    const sessionId = session!.id;
    const client = new Client({ name: "load-balancer-test", version: "1.0.0" });
    await client.connect(new StreamableHTTPClientTransport(new URL(`/mcp/sessions/${sessionId}`, balancer), { requestInit: { headers: bearer(KEY_A) } }));
    try {
      for (let i = 0; i < 4; i++) {
        const result = await client.callTool({ name: "echo", arguments: { i } });
        expect(result.isError).toBeFalsy();
      }
    } finally {
      await client.close();
    }
    // Requests reached both replicas; every call is in the one journal.
    for (const [i, replica] of replicas.entries()) {
      const lines = await requestLogSince(replica, marks[i]!);
      expect(lines.some((line) => line.protocol === "mcp")).toBe(true);
    }
    let calls = 0;
    const events = await eventsUntil(
      sessionClient(balancer, KEY_A),
      sessionId,
      (event) => event.type === "operation.receipt" && event.data?.kind === "execute" && event.data?.receipt !== undefined && ++calls === 4,
    );
    expect(events.filter((event) => event.type === "operation.sent" && event.data?.kind === "execute")).toHaveLength(4);
  });

  it("serve the console in Chromium: it signs in, starts a session the tab serves, and the tab answers calls that land on either replica", async () => {
    const browser = await chromium.launch({ executablePath: "/usr/bin/chromium", args: CHROMIUM_ARGS });
    try {
      const page = await browser.newPage();
      await page.goto(`${balancer}/console/`);
      await page.getByLabel("API key").fill(KEY_A);
      await page.getByRole("button", { name: "Sign in" }).click();
      await page.getByRole("link", { name: "Host" }).click();
      await page.getByRole("button", { name: "Start a session served by this tab" }).click();
      await page.waitForURL(/#\/sessions\/ses_/);
      const sessionId = decodeURIComponent(new URL(page.url()).hash.split("/")[2]!);
      await page.locator('tr[data-environment="browser"] .badge-connected').waitFor();
      const client = sessionClient(balancer, KEY_A);
      for (let i = 0; i < 4; i++) {
        const called = await client.callTool({ sessionId, tool: "page_title", input: fromJson(ValueSchema, {}) });
        expect(called.receipt?.outcome.case).toBe("returned");
      }
      // The calls reach the tab's live transcript, watched through the balancer.
      await page.locator(".entry-tool", { hasText: "page_title" }).nth(3).locator(".badge-returned").waitFor();
    } finally {
      await browser.close();
    }
  });

  it("serve the project's own clients, TypeScript and Python, each serving a host tool through the balancer", async () => {
    const client = createServiceClient(createNodeTransport({ baseUrl: balancer, apiKey: KEY_A }));
    const laptop = hostEnv({ name: "laptop", tools: { clock: () => ({ served: "typescript" }) } });
    const session = await client.sessions.create({ environments: [laptop], tools: [tool({ name: "clock", environment: laptop })] });
    try {
      for (let i = 0; i < 3; i++) expect(await session.callTool("clock", {})).toMatchObject({ outcome: "returned", output: { served: "typescript" } });
    } finally {
      await session.delete();
    }
    const script = `
import sys
from skillenv import Client, host_env, tool
with Client(sys.argv[1], sys.argv[2]) as client:
    laptop = host_env("laptop", {"clock": lambda input, context: {"served": "python"}})
    session = client.sessions.create(environments=[laptop], tools=[tool("clock", environment=laptop)])
    for _ in range(3):
        print(session.call_tool("clock", {}).output["served"])
    session.delete()
`;
    const { stdout } = await promisify(execFile)("/usr/bin/python3", ["-c", script, balancer, KEY_A], { env: { ...process.env, PYTHONPATH: PYTHON_SRC } });
    expect(stdout.trim().split("\n")).toEqual(["python", "python", "python"]);
  });

  it("serve buf curl and the Python client (grpcio) through the balancer", async () => {
    const { session } = await sessionClient(balancer, KEY_A).createSession({ environments: [{ name: "box", kind: { case: "service", value: {} } }] });
    const sessionId = session!.id;
    for (let i = 0; i < 2; i++) {
      const { stdout } = await promisify(execFile)(BUF, [
        "curl",
        "--protocol",
        "grpc",
        "--http2-prior-knowledge",
        "--header",
        `authorization: Bearer ${KEY_A}`,
        "--data",
        JSON.stringify({ sessionId }),
        `${balancer}/skillenv.sessions.v1.SessionService/GetSession`,
      ]);
      expect(JSON.parse(stdout).session.id).toBe(sessionId);
    }
    const script = `
import grpc, sys
from skillenv._gen.skillenv.sessions.v1 import sessions_pb2, sessions_pb2_grpc
for _ in range(2):
    with grpc.insecure_channel(sys.argv[1]) as channel:
        reply = sessions_pb2_grpc.SessionServiceStub(channel).GetSession(
            sessions_pb2.GetSessionRequest(session_id=sys.argv[2]), metadata=[("authorization", "Bearer " + sys.argv[3])])
        print(reply.session.id)
`;
    const { stdout } = await promisify(execFile)("/usr/bin/python3", ["-c", script, new URL(balancer).host, sessionId, KEY_A], {
      env: { ...process.env, PYTHONPATH: PYTHON_SRC },
    });
    expect(stdout.trim().split("\n")).toEqual([sessionId, sessionId]);
  });
});

describe("a replica killed behind HAProxy", () => {
  it("leaves its sessions to the other once its lease expired: the next call through the balancer succeeds, one unknown receipt", async () => {
    const shared = {
      ...s3.env,
      SERVICE_DATABASE_URL: await postgres.createDatabase(),
      SERVICE_BLOB_URL: s3.blobUrl("killed"),
      SERVICE_API_KEYS: `a=${KEY_A}`,
      // As in replicas.test.ts: soon over, and above what a loaded machine holds a renewal up.
      SERVICE_SESSION_LEASE_SECS: "4",
    };
    const [owner, other] = await Promise.all(
      ["owner", "other"].map((name) => spawnService({ ...shared, SERVICE_DATA_DIR: path.join(directory, name), SERVICE_REPLICA_ID: name })),
    );
    const url = await startHaproxy([owner!.url, other!.url], true);
    try {
      // Created on the owner itself, so the test knows which replica to kill; then used through the balancer.
      const { session } = await sessionClient(owner!.url, KEY_A).createSession({
        environments: [{ name: "laptop", kind: { case: "host", value: {} } }],
        tools: [{ name: "local", environment: "laptop" }],
      });
      const sessionId = session!.id;
      const host = new TestHost(hostClient(url, KEY_A, "grpc"), sessionId, "laptop");
      await host.attached();
      const client = sessionClient(url, KEY_A);
      const held = client.callTool({ sessionId, tool: "local", input: fromJson(ValueSchema, {}) }).catch(() => undefined);
      const command = await host.command("local");
      owner!.child.kill("SIGKILL");
      await owner!.exited;
      await held;

      const { session: after } = await whenServed(() => client.getSession({ sessionId }));
      expect(after?.id).toBe(sessionId);
      const events = await eventsUntil(client, sessionId, (event) => event.type === "session.moved");
      const receipts = events.filter((event) => event.type === "operation.receipt" && event.data?.operationId === command.operationId);
      expect(receipts).toHaveLength(1);
      expect(receipts[0]?.data?.receipt).toMatchObject({ unknown: {} });
      expect(events.at(-1)?.data).toMatchObject({ replica: "other", previousReplica: "owner", operationsUnknown: 1 });
    } finally {
      owner!.child.kill("SIGKILL");
      other!.child.kill("SIGKILL");
    }
  });
});
