import { fromBinary } from "@bufbuild/protobuf";
import { createHash, randomBytes } from "node:crypto";
import * as fs from "node:fs/promises";
import * as http from "node:http";
import * as http2 from "node:http2";
import * as net from "node:net";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ErrorInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { StatusSchema } from "../../gen/google/rpc/status_pb.js";
import { bearer, KEY_A, postJson, startTestService, type TestService } from "./helpers/service.ts";

const KiB = 1024;
const MiB = 1024 * KiB;
/** Generous bound for "this happens at all": a hang fails the test instead of stalling it. */
const EVENTUALLY_MS = 10_000;
const PRESIGN = "/skillenv.assets.v1.AssetService/Presign";
const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/**
 * An HTTP/1.1 request that declares `declaredBytes` but sends only `sent`, and keeps the rest back
 * until `finish` or `abort`: a slow or stalled sender. `answer` settles when the response is complete.
 */
function partialRequest(
  url: string,
  options: { method?: string; headers?: Record<string, string>; declaredBytes: number; sent?: Uint8Array; agent?: http.Agent },
) {
  const request = http.request(url, {
    method: options.method ?? "POST",
    agent: options.agent,
    headers: { "content-type": "application/json", ...options.headers, "content-length": options.declaredBytes },
  });
  const answer = new Promise<Answer>((resolve, reject) => {
    request.once("response", (response) => {
      let body = "";
      response.setEncoding("latin1").on("data", (chunk: string) => (body += chunk));
      response.once("end", () => resolve({ status: response.statusCode ?? 0, headers: response.headers, body }));
      response.once("error", reject);
    });
    request.once("error", reject);
  });
  if (options.sent) request.write(options.sent);
  else request.flushHeaders();
  return {
    answer,
    closed: new Promise<void>((resolve) => request.once("close", resolve)),
    finish: (rest: Uint8Array) => request.end(rest),
    /** Whether every byte has left the client. */
    sentAll: () => request.writableFinished,
    abort: () => request.destroy(),
  };
}

/** A whole HTTP/1.1 request with a body, answered in full. */
function request(url: string, body: Uint8Array | string, headers: Record<string, string> = {}, agent?: http.Agent): Promise<Answer> {
  const bytes = typeof body === "string" ? Buffer.from(body) : body;
  const call = partialRequest(url, { headers, declaredBytes: bytes.byteLength, agent });
  call.finish(bytes);
  return call.answer;
}

function withTimeout<T>(promise: Promise<T>, what: string): Promise<T> {
  return Promise.race([
    promise,
    new Promise<T>((_, reject) => setTimeout(() => reject(new Error(`${what}: no answer within ${EVENTUALLY_MS} ms`)), EVENTUALLY_MS)),
  ]);
}

/** A JSON Presign body padded with spaces to `size` bytes. */
function presignBody(size: number): Buffer {
  const json = JSON.stringify({ sha256: "0".repeat(64), sizeBytes: 1 });
  return Buffer.concat([Buffer.from(json), Buffer.alloc(size - json.length, " ")]);
}

interface GrpcAnswer {
  headers: http2.IncomingHttpHeaders;
  trailers: http2.IncomingHttpHeaders;
}

/** A raw gRPC call over its own HTTP/2 connection; `body` undefined keeps the request body open. */
function grpcCall(url: string, headers: Record<string, string>, body?: Uint8Array): Promise<GrpcAnswer> {
  const session = http2.connect(url);
  const stream = session.request({ ":method": "POST", ":path": PRESIGN, "content-type": "application/grpc+proto", te: "trailers", ...headers });
  if (body) stream.end(body);
  return withTimeout(
    new Promise<GrpcAnswer>((resolve, reject) => {
      let responseHeaders: http2.IncomingHttpHeaders = {};
      let trailers: http2.IncomingHttpHeaders = {};
      stream.once("response", (h) => (responseHeaders = h));
      stream.once("trailers", (t) => (trailers = t));
      stream.resume();
      stream.once("close", () => resolve({ headers: responseHeaders, trailers }));
      stream.once("error", reject);
    }),
    "gRPC call",
  ).finally(() => session.destroy());
}

/** grpc-status and friends, from the trailers or, for a trailers-only answer, the headers. */
function grpcStatus({ headers, trailers }: GrpcAnswer): { code: number; message: string; reason: string | undefined } {
  const source = trailers["grpc-status"] === undefined ? headers : trailers;
  const details = source["grpc-status-details-bin"];
  const status = details ? fromBinary(StatusSchema, Buffer.from(String(details), "base64")) : undefined;
  const info = status?.details[0] ? fromBinary(ErrorInfoSchema, status.details[0].value) : undefined;
  return { code: Number(source["grpc-status"]), message: decodeURIComponent(String(source["grpc-message"] ?? "")), reason: info?.reason };
}

function envelope(flags: number, payload: Uint8Array): Buffer {
  const head = Buffer.alloc(5);
  head.writeUInt8(flags, 0);
  head.writeUInt32BE(payload.byteLength, 1);
  return Buffer.concat([head, payload]);
}

/** Varint tag 0xffffffff0f: field 536870911, wire type 7, which no message has. */
const GARBAGE = Buffer.from([0xff, 0xff, 0xff, 0xff, 0x0f]);

async function loggedLine(service: TestService, matches: (line: Record<string, unknown>) => boolean): Promise<Record<string, unknown>> {
  let found: Record<string, unknown> | undefined;
  await expect
    .poll(() => (found = service.logs.map((line) => JSON.parse(line) as Record<string, unknown>).find(matches)), { timeout: EVENTUALLY_MS })
    .toBeDefined();
  return found!;
}

describe("requests without a valid key", () => {
  let service: TestService;
  beforeAll(async () => {
    service = await startTestService({ SERVICE_ENV_WORKERS: "1", SERVICE_MAX_PUBLIC_REQUEST_BYTES: "1024" });
  });
  afterAll(() => service.close());

  it("REST: answered 401 from the headers, before the body is sent", async () => {
    const call = partialRequest(`${service.url}/assets/presign`, { declaredBytes: 10 * MiB });
    const answer = await withTimeout(call.answer, "REST");
    expect(answer.status).toBe(401);
    expect(JSON.parse(answer.body)).toMatchObject({ code: "unauthenticated" });
    call.abort();
  });

  it("Connect: answered 401 in Connect's JSON error format, before the body is sent", async () => {
    const call = partialRequest(`${service.url}${PRESIGN}`, { headers: { "connect-protocol-version": "1" }, declaredBytes: 10 * MiB });
    const answer = await withTimeout(call.answer, "Connect");
    expect(answer.status).toBe(401);
    expect(JSON.parse(answer.body)).toMatchObject({ code: "unauthenticated", details: [{ type: "google.rpc.ErrorInfo" }] });
    call.abort();
  });

  it("gRPC-Web: answered with grpc-status 16 in the trailer frame, before the body is sent", async () => {
    const call = partialRequest(`${service.url}${PRESIGN}`, { headers: { "content-type": "application/grpc-web+proto" }, declaredBytes: 10 * MiB });
    const answer = await withTimeout(call.answer, "gRPC-Web");
    expect(answer.status).toBe(200);
    expect(answer.body).toContain("grpc-status: 16");
    call.abort();
  });

  it("gRPC: answered trailers-only with UNAUTHENTICATED, while the request stream is still open", async () => {
    const answer = await grpcCall(service.url, {});
    expect(grpcStatus(answer)).toMatchObject({ code: 16, reason: "unauthenticated" });
  });

  it("a Basic (or any non-Bearer) Authorization is told the scheme must be Bearer", async () => {
    const response = await request(`${service.url}/assets/presign`, "{}", { authorization: "Basic abc" });
    expect(response.status).toBe(401);
    expect(JSON.parse(response.body).message).toMatch(/^the Authorization scheme must be Bearer/);
  });

  it("the refusal is logged with its procedure and code", async () => {
    const line = await loggedLine(service, (l) => l.protocol === "grpc" && l.code === "unauthenticated");
    expect(line).toMatchObject({ procedure: "skillenv.assets.v1.AssetService/Presign", httpStatus: 200 });
  });

  it("an HTTP/1.1 connection carries the next request after a refused body was drained", async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const refused = await request(`${service.url}/assets/presign`, presignBody(128 * KiB), {}, agent);
      expect(refused.status).toBe(401);
      const accepted = http.request(`${service.url}/assets/presign`, {
        method: "POST",
        agent,
        headers: { "content-type": "application/json", ...bearer(KEY_A) },
      });
      accepted.end(presignBody(100));
      const reused = await new Promise<boolean>((resolve) => accepted.once("response", (response) => (response.resume(), resolve(accepted.reusedSocket))));
      expect(reused).toBe(true);
    } finally {
      agent.destroy();
    }
  });

  it("an HTTP/1.1 connection carries the next request after a GET, which has no body to read", async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const get = () =>
      new Promise<{ reused: boolean; connection: string | undefined }>((resolve, reject) => {
        const call = http.get(`${service.url}/openapi.json`, { agent }, (response) => {
          response.resume();
          response.once("end", () => resolve({ reused: call.reusedSocket, connection: response.headers.connection }));
        });
        call.once("error", reject);
      });
    try {
      expect(await get()).toEqual({ reused: false, connection: "keep-alive" });
      expect(await get()).toEqual({ reused: true, connection: "keep-alive" });
    } finally {
      agent.destroy();
    }
  });

  it("a public method (health) takes only a small body", async () => {
    const body = JSON.stringify({ service: "x".repeat(2048) });
    const response = await request(`${service.url}/grpc.health.v1.Health/Check`, body, { "connect-protocol-version": "1" });
    expect(JSON.parse(response.body)).toMatchObject({ code: "resource_exhausted" });
  });
});

describe("bodies that cannot be decoded", () => {
  let service: TestService;
  beforeAll(async () => {
    service = await startTestService({
      SERVICE_ENV_WORKERS: "1",
      SERVICE_MAX_REQUEST_BYTES: String(MiB),
      SERVICE_MAX_CONNECTION_BODY_BYTES_IN_FLIGHT: String(2 * MiB),
    });
  });
  afterAll(() => service.close());

  it("gRPC: invalid protobuf binary is INVALID_ARGUMENT malformed_request, without parser internals", async () => {
    const status = grpcStatus(await grpcCall(service.url, bearer(KEY_A), envelope(0, GARBAGE)));
    expect(status).toEqual({ code: 3, message: "the request message is not valid protobuf binary", reason: "malformed_request" });
  });

  it("gRPC: a message flagged compressed without grpc-encoding is INVALID_ARGUMENT malformed_request", async () => {
    const status = grpcStatus(await grpcCall(service.url, bearer(KEY_A), envelope(1, Buffer.from("not compressed"))));
    expect(status).toMatchObject({ code: 3, reason: "malformed_request" });
  });

  it("Connect: invalid protobuf binary is 400 invalid_argument with a plain message", async () => {
    const response = await request(`${service.url}${PRESIGN}`, GARBAGE, {
      "content-type": "application/proto",
      "connect-protocol-version": "1",
      ...bearer(KEY_A),
    });
    expect(response.status).toBe(400);
    expect(JSON.parse(response.body)).toMatchObject({ code: "invalid_argument", message: "the request message is not valid protobuf binary" });
    const line = await loggedLine(service, (l) => l.protocol === "connect" && l.code !== "ok");
    expect(line).toMatchObject({ code: "malformed_request", httpStatus: 400 });
  });

  it("REST refusals are logged as refusals: malformed_request and payload_too_large", async () => {
    expect((await postJson(service.url, "/assets/finalize", { unknownField: 1 }, KEY_A)).status).toBe(400);
    expect(await loggedLine(service, (l) => l.path === "/assets/finalize")).toMatchObject({ code: "malformed_request", httpStatus: 400 });
    const tooLarge = await request(`${service.url}/assets/presign`, presignBody(MiB + 1), bearer(KEY_A));
    expect(tooLarge.status).toBe(413);
    expect(await loggedLine(service, (l) => l.path === "/assets/presign" && l.code !== "ok")).toMatchObject({ code: "payload_too_large", httpStatus: 413 });
  });

  it("an HTTP/1.0 request without Host is malformed_request, not a server fault", async () => {
    const { hostname, port } = new URL(service.url);
    const socket = net.connect(Number(port), hostname);
    socket.end(`POST ${PRESIGN} HTTP/1.0\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}`);
    let received = "";
    socket.on("data", (chunk: Buffer) => (received += chunk.toString()));
    await withTimeout(new Promise((resolve) => socket.once("close", resolve)), "HTTP/1.0");
    expect(received).toMatch(/^HTTP\/1\.[01] 400 /);
    expect(received).toContain('"code":"malformed_request"');
  });

  it("an API request the client abandons mid-body is logged as canceled", async () => {
    const call = http.request(`${service.url}/assets/finalize`, {
      method: "POST",
      // The server's 100 Continue says the request has reached the service.
      headers: { "content-type": "application/json", "content-length": 1000, expect: "100-continue", ...bearer(KEY_A) },
    });
    call.on("error", () => {});
    call.flushHeaders();
    await withTimeout(new Promise((resolve) => call.once("continue", resolve)), "100 Continue");
    call.write("{");
    call.destroy();
    expect(await loggedLine(service, (l) => l.path === "/assets/finalize" && l.code !== "malformed_request")).toMatchObject({ code: "canceled" });
  });

  it("an upload the client abandons is logged as canceled and stores nothing", async () => {
    const bytes = randomBytes(256 * KiB);
    const presigned = (await postJson(service.url, "/assets/presign", { sha256: sha256(bytes), sizeBytes: bytes.byteLength }, KEY_A)).body;
    const upload = partialRequest(presigned.uploadUrl, {
      method: "PUT",
      headers: presigned.uploadHeaders,
      declaredBytes: bytes.byteLength,
      sent: bytes.subarray(0, 64 * KiB),
    });
    upload.answer.catch(() => {});
    await expect.poll(() => fs.readdir(path.join(service.dataDir, "blobs/tmp")), { timeout: EVENTUALLY_MS }).toHaveLength(1);
    upload.abort();
    expect(await loggedLine(service, (l) => l.protocol === "object-store")).toMatchObject({ code: "canceled", httpStatus: 499 });
    expect(await fs.readdir(path.join(service.dataDir, "blobs/tmp"))).toEqual([]);
  });
});

describe("bodies that stall", () => {
  let service: TestService;
  beforeAll(async () => {
    service = await startTestService({ SERVICE_ENV_WORKERS: "1", SERVICE_BODY_IDLE_SECS: "1" });
  });
  afterAll(() => service.close());

  it("an upload that stalls is abandoned: its connection closes and its temp file goes", async () => {
    const bytes = randomBytes(256 * KiB);
    const presigned = (await postJson(service.url, "/assets/presign", { sha256: sha256(bytes), sizeBytes: bytes.byteLength }, KEY_A)).body;
    const upload = partialRequest(presigned.uploadUrl, {
      method: "PUT",
      headers: presigned.uploadHeaders,
      declaredBytes: bytes.byteLength,
      sent: bytes.subarray(0, 64 * KiB),
    });
    upload.answer.catch(() => {});
    await withTimeout(upload.closed, "stalled upload");
    await expect.poll(() => fs.readdir(path.join(service.dataDir, "blobs/tmp")), { timeout: EVENTUALLY_MS }).toEqual([]);
    expect(await loggedLine(service, (l) => l.protocol === "object-store")).toMatchObject({ code: "request_timeout" });
  });

  it("an API request body that stalls is abandoned", async () => {
    const call = partialRequest(`${service.url}/assets/presign`, { headers: bearer(KEY_A), declaredBytes: 1000, sent: Buffer.from('{"sha256":') });
    call.answer.catch(() => {});
    await withTimeout(call.closed, "stalled REST body");
    const line = await loggedLine(service, (l) => l.path === "/assets/presign" && l.code !== "ok");
    expect(line).toMatchObject({ code: "request_timeout", procedure: "skillenv.assets.v1.AssetService/Presign" });
  });

  it("a large body refused without a key is left unread: its connection is given up, not drained", async () => {
    const call = partialRequest(`${service.url}/assets/presign`, { declaredBytes: 30 * MiB });
    call.answer.catch(() => {});
    call.finish(Buffer.alloc(30 * MiB, " "));
    await withTimeout(call.closed, "connection given up");
    expect(call.sentAll()).toBe(false);
  });

  it.each([
    ["refused without a key", "/assets/presign", 401],
    ["sent to no route", "/no/such/route", 404],
  ])("a body %s that stalls while it is drained is abandoned too", async (_, route, status) => {
    const call = partialRequest(`${service.url}${route}`, { declaredBytes: 1000, sent: Buffer.from("{") });
    expect((await withTimeout(call.answer, "refusal")).status).toBe(status);
    await withTimeout(call.closed, "stalled drain");
  });
});

describe("request bodies held in memory", () => {
  let service: TestService;
  const held: { abort(): void }[] = [];
  beforeAll(async () => {
    service = await startTestService({
      SERVICE_ENV_WORKERS: "1",
      SERVICE_MAX_REQUEST_BYTES: String(MiB),
      SERVICE_MAX_CONNECTION_BODY_BYTES_IN_FLIGHT: String(MiB),
      SERVICE_MAX_BODY_BYTES_IN_FLIGHT: String(2 * MiB),
      SERVICE_METRICS_LISTEN: "127.0.0.1:0",
    });
  });

  /** A sample's value in the service's exposition (its metrics port, scraped as Prometheus would). */
  async function sample(name: string): Promise<number> {
    const exposition = await (await fetch(`${service.metricsUrl}/metrics`)).text();
    const line = exposition.split("\n").find((each) => each.startsWith(`${name} `));
    return Number(line?.split(" ")[1]);
  }
  afterAll(async () => {
    for (const call of held) call.abort();
    await service.close();
  });

  /** Starts a request that declares `size` bytes and sends only its first byte. */
  function hold(size: number) {
    const call = partialRequest(`${service.url}/assets/presign`, { headers: bearer(KEY_A), declaredBytes: size, sent: Buffer.from("{") });
    call.answer.catch(() => {});
    held.push(call);
    return call;
  }

  it("refuses a body that would pass the server's budget with server_busy, and takes it again once there is room", async () => {
    const first = hold(800 * KiB);
    hold(800 * KiB);
    const refused = () => request(`${service.url}/assets/presign`, presignBody(800 * KiB), bearer(KEY_A));
    await expect.poll(async () => JSON.parse((await refused()).body).code, { timeout: EVENTUALLY_MS }).toBe("server_busy");
    expect((await refused()).status).toBe(503);
    // The metrics count the refusals and show the two held bodies' bytes.
    expect(await sample("skillenv_request_body_refusals_total")).toBeGreaterThanOrEqual(2);
    expect(await sample("skillenv_request_body_bytes")).toBe(2 * 800 * KiB);
    // A small body still fits beside the two held ones.
    expect((await request(`${service.url}/assets/presign`, presignBody(100), bearer(KEY_A))).status).toBe(200);
    first.abort();
    await expect.poll(async () => (await refused()).status, { timeout: EVENTUALLY_MS }).toBe(200);
  });

  it("refuses a body that would pass one connection's budget, while another connection is served", async () => {
    const session = http2.connect(service.url);
    try {
      const stream = (end: Uint8Array | undefined, size: number) => {
        const s = session.request({
          ":method": "POST",
          ":path": "/assets/presign",
          "content-type": "application/json",
          "content-length": String(size),
          ...bearer(KEY_A),
        });
        if (end) s.end(end);
        else s.write("{");
        return s;
      };
      stream(undefined, 600 * KiB);
      const codeOf = (s: http2.ClientHttp2Stream) =>
        new Promise<string>((resolve) => {
          let text = "";
          s.setEncoding("utf8").on("data", (chunk: string) => (text += chunk));
          s.once("end", () => resolve(JSON.parse(text).code ?? "ok"));
        });
      await expect.poll(() => codeOf(stream(presignBody(600 * KiB), 600 * KiB)), { timeout: EVENTUALLY_MS }).toBe("server_busy");
      expect((await request(`${service.url}/assets/presign`, presignBody(600 * KiB), bearer(KEY_A))).status).toBe(200);
    } finally {
      session.destroy();
    }
  });
});
