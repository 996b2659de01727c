import { Code, createClient } from "@connectrpc/connect";
import * as fs from "node:fs/promises";
import * as http2 from "node:http2";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createNodeTransport } from "@skillenv/client/node";
import { Health, HealthCheckResponse_ServingStatus } from "../../gen/grpc/health/v1/health_pb.js";
import { spawnService, type ServiceProcess } from "./helpers/process.ts";
import { KEY_A, postJson, startTestService, type TestService } from "./helpers/service.ts";

/** Generous bound for "this happens at all": a hang fails the test instead of stalling it. */
const EVENTUALLY_MS = 10_000;

function connect(url: string): Promise<net.Socket> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname, () => resolve(socket));
    socket.once("error", reject);
  });
}

/** Resolves with what the server sent once it closes the connection, or undefined if it stays open for EVENTUALLY_MS. */
function closedByServer(socket: net.Socket): Promise<string | undefined> {
  let received = "";
  socket.on("data", (chunk: Buffer) => (received += chunk.toString("latin1")));
  socket.on("error", () => {});
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(undefined), EVENTUALLY_MS);
    socket.once("close", () => {
      clearTimeout(timer);
      resolve(received);
    });
  });
}

async function presignStatus(url: string): Promise<number> {
  const response = await fetch(`${url}/assets/presign`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${KEY_A}` },
    body: JSON.stringify({ sha256: "0".repeat(64), sizeBytes: 1 }),
    signal: AbortSignal.timeout(EVENTUALLY_MS),
  });
  return response.status;
}

async function healthOver(transportUrl: string): Promise<HealthCheckResponse_ServingStatus> {
  const health = createClient(Health, createNodeTransport({ baseUrl: transportUrl, apiKey: "unused-key-0000000", protocol: "grpc" }));
  return (await health.check({}, { timeoutMs: EVENTUALLY_MS })).status;
}

/**
 * A TCP proxy that delivers the first bytes of each connection in two pieces, a moment apart,
 * as a network may deliver an h2c client's preface.
 */
async function splittingProxy(target: string): Promise<{ url: string; close(): void }> {
  const { hostname, port } = new URL(target);
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(port), hostname);
    upstream.setNoDelay(true);
    client.once("data", (first: Buffer) => {
      client.pause();
      upstream.write(first.subarray(0, 5));
      setTimeout(() => {
        upstream.write(first.subarray(5));
        client.pipe(upstream);
      }, 50);
    });
    upstream.pipe(client);
    for (const socket of [client, upstream]) socket.on("error", () => (client.destroy(), upstream.destroy()));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`, close: () => server.close() };
}

describe("a plaintext connection before it has said which protocol it speaks", () => {
  // A child process: a server that spins on such a connection would freeze the test runner too.
  let service: ServiceProcess;
  beforeAll(async () => {
    const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "skillenv-conn-"));
    service = await spawnService({ SERVICE_DATA_DIR: dataDir, SERVICE_API_KEYS: `a=${KEY_A}`, SERVICE_HEADERS_TIMEOUT_SECS: "1", SERVICE_ENV_WORKERS: "1" });
  });
  afterAll(() => {
    service.child.kill("SIGKILL");
  });

  it("a strict prefix of the HTTP/2 preface does not stop the server from answering others, and is closed", async () => {
    const hostile = await connect(service.url);
    hostile.write("P");
    const closed = closedByServer(hostile);
    expect(await presignStatus(service.url)).toBe(200);
    expect(await closed).toBe("");
  });

  it("a connection that sends nothing is closed after the deadline", async () => {
    expect(await closedByServer(await connect(service.url))).toBe("");
  });

  it("an h2c client whose preface arrives in two pieces is served", async () => {
    const proxy = await splittingProxy(service.url);
    try {
      expect(await healthOver(proxy.url)).toBe(HealthCheckResponse_ServingStatus.SERVING);
    } finally {
      proxy.close();
    }
  });

  it("HTTP/1.1 request headers that never finish get 408 and the connection closed", async () => {
    const slow = await connect(service.url);
    slow.write("POST /assets/presign HTTP/1.1\r\nHost: x\r\n");
    expect(await closedByServer(slow)).toMatch(/^HTTP\/1\.1 408 /);
  });

  it("SIGTERM drains and exits while such connections are open", async () => {
    const silent = await connect(service.url);
    const oneByte = await connect(service.url);
    oneByte.write("P");
    service.child.kill("SIGTERM");
    const exit = await Promise.race([service.exited, new Promise((resolve) => setTimeout(() => resolve("still running"), EVENTUALLY_MS))]);
    expect(exit).toBe(0);
    silent.destroy();
    oneByte.destroy();
  });
});

describe("connection limits", () => {
  let service: TestService;
  beforeAll(async () => {
    service = await startTestService({
      SERVICE_MAX_CONNECTIONS: "3",
      SERVICE_MAX_CONCURRENT_STREAMS: "7",
      SERVICE_IDLE_CONNECTION_SECS: "1",
      SERVICE_ENV_WORKERS: "1",
    });
  });
  afterAll(() => service.close());

  it("advertises the configured HTTP/2 stream limit", async () => {
    const session = http2.connect(service.url);
    try {
      const [settings] = (await new Promise((resolve) => session.once("remoteSettings", (s) => resolve([s])))) as [http2.Settings];
      expect(settings.maxConcurrentStreams).toBe(7);
    } finally {
      session.close();
    }
  });

  it("closes an HTTP/2 connection without streams once idle, but not one with an open stream", async () => {
    const watch = createClient(Health, createNodeTransport({ baseUrl: service.url, apiKey: "unused-key-0000000", protocol: "grpc" }));
    const controller = new AbortController();
    const updates = watch.watch({}, { signal: controller.signal })[Symbol.asyncIterator]();
    expect((await updates.next()).value?.status).toBe(HealthCheckResponse_ServingStatus.SERVING);

    const idle = http2.connect(service.url);
    const idleClosed = new Promise((resolve) => idle.once("close", () => resolve("closed")));
    expect(await Promise.race([idleClosed, new Promise((resolve) => setTimeout(() => resolve("open"), EVENTUALLY_MS))])).toBe("closed");
    // The watching connection has been idle at least as long: its stream keeps it open.
    const stillServing = updates.next();
    controller.abort();
    await expect(stillServing).rejects.toMatchObject({ code: Code.Canceled });
  });

  it("closes connections beyond the configured maximum as they are accepted", async () => {
    const held = [await connect(service.url), await connect(service.url), await connect(service.url)];
    const extra = await connect(service.url);
    expect(await closedByServer(extra)).toBe("");
    for (const socket of held) socket.destroy();
    await expect
      .poll(
        () =>
          postJson(service.url, "/assets/presign", { sha256: "0".repeat(64), sizeBytes: 1 }, KEY_A).then(
            (r) => r.status,
            () => 0,
          ),
        { timeout: EVENTUALLY_MS },
      )
      .toBe(200);
  });
});
