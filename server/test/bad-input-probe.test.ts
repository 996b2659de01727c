// Bad input that used to be answered without a stable code (a bare status, an empty body, no
// google.rpc.ErrorInfo) or as a server fault (5xx), found by probing a running service.
import { fromBinary } from "@bufbuild/protobuf";
import { base64Decode } from "@bufbuild/protobuf/wire";
import * as http2 from "node:http2";
import * as net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ErrorInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { StatusSchema } from "../../gen/google/rpc/status_pb.js";
import { bearer, KEY_A, startTestService, type TestService } from "./helpers/service.ts";

const PRESIGN = "/skillenv.assets.v1.AssetService/Presign";
const EVENTUALLY_MS = 10_000;

let service: TestService;
beforeAll(async () => {
  service = await startTestService({ SERVICE_ENV_WORKERS: "1" });
});
afterAll(() => service.close());

/** A Connect unary call over HTTP/1.1 (fetch). */
async function connectCall(path: string, body: string, headers: Record<string, string>): Promise<{ status: number; body: any }> {
  const response = await fetch(service.url + path, {
    method: "POST",
    headers: { ...bearer(KEY_A), ...headers },
    body,
    signal: AbortSignal.timeout(EVENTUALLY_MS),
  });
  const text = await response.text();
  return { status: response.status, body: text === "" ? undefined : JSON.parse(text) };
}

/** The stable code a Connect client reads: google.rpc.ErrorInfo.reason in the error's details. */
function connectReason(body: { details?: { type: string; value: string }[] }): string | undefined {
  const info = body.details?.find((detail) => detail.type === "google.rpc.ErrorInfo");
  return info ? fromBinary(ErrorInfoSchema, base64Decode(info.value)).reason : undefined;
}

/** Raw bytes on a fresh TCP connection; resolves with everything the server sent before closing. */
function rawExchange(bytes: Buffer): Promise<string> {
  const { hostname, port } = new URL(service.url);
  const socket = net.connect(Number(port), hostname);
  let received = "";
  socket.on("data", (chunk: Buffer) => (received += chunk.toString("latin1")));
  socket.on("error", () => undefined);
  socket.write(bytes);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no close within ${EVENTUALLY_MS} ms; received ${JSON.stringify(received)}`)), EVENTUALLY_MS);
    socket.once("close", () => {
      clearTimeout(timer);
      resolve(received);
    });
  });
}

function parseRaw(text: string): { status: number; headers: string; body: any } {
  const split = text.indexOf("\r\n\r\n");
  const head = text.slice(0, split);
  const body = text.slice(split + 4);
  return { status: Number(/^HTTP\/1\.1 (\d{3}) /.exec(head)?.[1]), headers: head.toLowerCase(), body: body === "" ? undefined : JSON.parse(body) };
}

/** A gRPC call over its own HTTP/2 connection; grpc-status, message and ErrorInfo reason from trailers (or a trailers-only head). */
function grpcCall(headers: Record<string, string>, body: Buffer): Promise<{ code: number; message: string; reason: string | undefined }> {
  const session = http2.connect(service.url);
  const stream = session.request({ ":method": "POST", ":path": PRESIGN, "content-type": "application/grpc", te: "trailers", ...bearer(KEY_A), ...headers });
  stream.end(body);
  return new Promise<{ code: number; message: string; reason: string | undefined }>((resolve, reject) => {
    let status: http2.IncomingHttpHeaders = {};
    stream.once("response", (h) => (status = { ...status, ...h }));
    stream.once("trailers", (t) => (status = { ...status, ...t }));
    stream.resume();
    stream.once("error", reject);
    stream.once("close", () => {
      const details = status["grpc-status-details-bin"];
      const info = details
        ? fromBinary(StatusSchema, Buffer.from(String(details), "base64")).details.find((any) => any.typeUrl.endsWith("/google.rpc.ErrorInfo"))
        : undefined;
      resolve({
        code: Number(status["grpc-status"]),
        message: decodeURIComponent(String(status["grpc-message"] ?? "")),
        reason: info ? fromBinary(ErrorInfoSchema, info.value).reason : undefined,
      });
    });
  }).finally(() => session.destroy());
}

function envelope(payload: Buffer, flags = 0): Buffer {
  const head = Buffer.alloc(5);
  head.writeUInt8(flags, 0);
  head.writeUInt32BE(payload.byteLength, 1);
  return Buffer.concat([head, payload]);
}

describe("errors Connect raises itself carry the stable code in their details", () => {
  it("Connect: JSON that is not the request message is malformed_request in ErrorInfo", async () => {
    for (const body of ["", "not json", "[]", "null", '"str"', '{"sizeBytes": "abc"}']) {
      const answer = await connectCall(PRESIGN, body, { "content-type": "application/json" });
      expect(answer.status, body).toBe(400);
      expect(answer.body.code, body).toBe("invalid_argument");
      expect(connectReason(answer.body), body).toBe("malformed_request");
    }
  });

  it("Connect: a bad connect-timeout-ms is malformed_request in ErrorInfo", async () => {
    const answer = await connectCall(PRESIGN, "{}", { "content-type": "application/json", "connect-timeout-ms": "soon" });
    expect(answer.status).toBe(400);
    expect(connectReason(answer.body)).toBe("malformed_request");
  });

  it("Connect: a compressed request is unimplemented (as the protocol requires) with the stable code compression_unsupported", async () => {
    for (const encoding of ["gzip", "br", "x-unknown"]) {
      const answer = await connectCall(PRESIGN, "{}", { "content-type": "application/json", "content-encoding": encoding });
      expect(answer.status, encoding).toBe(501);
      expect(answer.body).toMatchObject({
        code: "unimplemented",
        message: "the request is compressed, but this server accepts no compression: send it uncompressed",
      });
      expect(connectReason(answer.body), encoding).toBe("compression_unsupported");
    }
  });

  it("gRPC: a compressed message is UNIMPLEMENTED compression_unsupported; a broken envelope or a unary call with two messages INVALID_ARGUMENT malformed_request", async () => {
    expect(await grpcCall({ "grpc-encoding": "gzip" }, envelope(Buffer.from("xx"), 1))).toMatchObject({ code: 12, reason: "compression_unsupported" });
    expect(await grpcCall({}, Buffer.from([0, 0, 0]))).toMatchObject({ code: 3, reason: "malformed_request" });
    expect(await grpcCall({}, Buffer.concat([envelope(Buffer.alloc(0)), envelope(Buffer.alloc(0))]))).toEqual({
      code: 3,
      message: "a unary call takes exactly one request message, and more were sent",
      reason: "malformed_request",
    });
    expect(await grpcCall({ "grpc-timeout": "forever" }, envelope(Buffer.alloc(0)))).toMatchObject({ code: 3, reason: "malformed_request" });
  });

  it("gRPC: JSON that does not decode is INVALID_ARGUMENT malformed_request", async () => {
    expect(await grpcCall({ "content-type": "application/grpc+json" }, envelope(Buffer.from("[]")))).toMatchObject({ code: 3, reason: "malformed_request" });
  });
});

describe("requests no protocol of a procedure takes get the API's JSON error", () => {
  it("a content type that is none of Connect, gRPC and gRPC-Web is 400 malformed_request, not a bare 415", async () => {
    for (const contentType of ["text/plain", "application/x-www-form-urlencoded", "application/connect+json"]) {
      const answer = await connectCall(PRESIGN, "{}", { "content-type": contentType });
      expect(answer.status, contentType).toBe(400);
      expect(answer.body, contentType).toMatchObject({ code: "malformed_request", status: "invalid_argument" });
      expect(answer.body.message).toContain("does not take content-type");
    }
  });

  it("a method other than POST is 404 route_not_found, not a bare 405", async () => {
    for (const method of ["GET", "PUT", "DELETE"]) {
      const response = await fetch(service.url + PRESIGN, { method, headers: bearer(KEY_A), signal: AbortSignal.timeout(EVENTUALLY_MS) });
      expect(response.status, method).toBe(404);
      expect(await response.json(), method).toMatchObject({ code: "route_not_found" });
    }
  });

  it("a bidirectional stream over HTTP/1.1 is 400 malformed_request and closes the connection, not a bare 505", async () => {
    const body = envelope(Buffer.from("{}"));
    const request = Buffer.concat([
      Buffer.from(
        `POST /skillenv.env.v1.HostService/Connect HTTP/1.1\r\nhost: x\r\ncontent-type: application/connect+json\r\n` +
          `authorization: Bearer ${KEY_A}\r\ncontent-length: ${body.byteLength}\r\n\r\n`,
      ),
      body,
    ]);
    const answer = parseRaw(await rawExchange(request));
    expect(answer.status).toBe(400);
    expect(answer.headers).toContain("connection: close");
    expect(answer.body).toMatchObject({ code: "malformed_request", message: "skillenv.env.v1.HostService/Connect is a bidirectional stream: it needs HTTP/2" });
  });
});

describe("HTTP/1.1 requests that do not parse get the API's JSON error", () => {
  it("bytes a URL may not hold (raw UTF-8 in a path parameter) are 400 malformed_request", async () => {
    const request = Buffer.concat([
      Buffer.from("GET /skills/"),
      Buffer.from("été", "utf8"),
      Buffer.from(` HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${KEY_A}\r\n\r\n`),
    ]);
    const answer = parseRaw(await rawExchange(request));
    expect(answer.status).toBe(400);
    expect(answer.headers).toContain("connection: close");
    expect(answer.body).toMatchObject({ code: "malformed_request", status: "invalid_argument" });
  });

  it("an unknown HTTP method is 400 malformed_request", async () => {
    const answer = parseRaw(await rawExchange(Buffer.from("FROB /skills HTTP/1.1\r\nhost: x\r\n\r\n")));
    expect(answer.status).toBe(400);
    expect(answer.body).toMatchObject({ code: "malformed_request" });
  });

  it("a malformed header line is 400 malformed_request", async () => {
    const answer = parseRaw(await rawExchange(Buffer.from("GET /skills HTTP/1.1\r\nhost: x\r\nno colon here\r\n\r\n")));
    expect(answer.status).toBe(400);
    expect(answer.body).toMatchObject({ code: "malformed_request" });
  });

  it("an oversized API key (headers over Node's limit) is 431 headers_too_large", async () => {
    const response = await fetch(`${service.url}/skills`, { headers: bearer("k".repeat(20_000)), signal: AbortSignal.timeout(EVENTUALLY_MS) });
    expect(response.status).toBe(431);
    expect(await response.json()).toMatchObject({ code: "headers_too_large", status: "resource_exhausted" });
  });
});

describe("after the bad input", () => {
  it("the service is healthy and answers a normal call", async () => {
    const health = await fetch(`${service.url}/grpc.health.v1.Health/Check`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
    expect(await health.json()).toEqual({ status: "SERVING" });
    const skills = await fetch(`${service.url}/skills`, { headers: bearer(KEY_A) });
    expect(skills.status).toBe(200);
    expect(await skills.json()).toEqual({ skills: [], nextPageToken: "" });
  });
});
