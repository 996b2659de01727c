import * as http from "node:http";
import * as http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { Code, ConnectError, createConnectRouter, createContextKey, createContextValues, type ContextValues, type Interceptor } from "@connectrpc/connect";
import { universalRequestFromNodeRequest, universalResponseToNodeResponse } from "@connectrpc/connect-node";
import { TranscodingTestService } from "./gen/skillenv/testing/v1/transcoding_pb.js";
import { serviceError } from "../src/errors/index.ts";
import { RequestBody, type NodeRequest, type NodeResponse } from "../src/http/index.ts";
import { createTranscoder } from "../src/transcoder/index.ts";

const MAX_BODY_BYTES = 1024;
const requestTag = createContextKey<string>("none", { description: "set by the test server" });

/** What the router's interceptor saw, per call. */
const seen: { procedure: string; header: Headers; tag: string }[] = [];
let waitAborted = false;

const interceptor: Interceptor = (next) => async (req) => {
  seen.push({ procedure: req.method.name, header: req.header, tag: req.contextValues.get(requestTag) });
  if (req.header.get("authorization") === "Bearer revoked") throw new ConnectError("key revoked", Code.Unauthenticated);
  return next(req);
};

const router = createConnectRouter({ interceptors: [interceptor] });
router.service(TranscodingTestService, {
  echo(request) {
    if (request.id === "missing") throw serviceError("asset_not_found", "no asset named missing");
    return { request };
  },
  getMessage: (request) => ({ request }),
  getLatestMessage: (request) => ({ request }),
  updateMessage: (request) => ({ request }),
  replaceMessage: (request) => ({ request }),
  getObject: (request) => ({ request }),
  getObjectMetadata: (request) => ({ request }),
  updateBook: (request) => ({ request }),
  cancelOperation: (request) => ({ request }),
  uploadBlob: (request) => ({ request }),
  echoRaw: (body) => ({ contentType: body.contentType, data: new TextEncoder().encode(new TextDecoder().decode(body.data).toUpperCase()) }),
  async wait(_request, context) {
    await new Promise((resolve) => context.signal.addEventListener("abort", resolve));
    waitAborted = true;
    return {};
  },
  async *watch(request) {
    for (let n = 1; n <= request.count; n++) yield { n };
    if (request.fail) throw serviceError("invalid_argument", "the stream was asked to fail");
  },
});

const transcoder = createTranscoder({ services: [TranscodingTestService], handlers: router.handlers, maxBodyBytes: MAX_BODY_BYTES });

/** Serves REST as the service's request listener does: the matched call, its body read through a RequestBody. */
function serveRest(req: NodeRequest, res: NodeResponse, contextValues?: ContextValues): void {
  const call = transcoder.match(req.method ?? "", req.url ?? "");
  if (call === undefined) {
    res.statusCode = 404;
    return void res.end("not transcoded");
  }
  const body = new RequestBody(req, res, 60_000).read({ idleMs: undefined, budget: undefined });
  void call
    .serve({ ...universalRequestFromNodeRequest(req, res, undefined, contextValues), body })
    .then((response) => universalResponseToNodeResponse(response, res))
    // A client that went away cannot be written to.
    .catch(() => undefined);
}

const server = http.createServer((req, res) => serveRest(req, res, createContextValues().set(requestTag, "from-server")));
let base = "";

beforeAll(async () => {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

interface Call {
  method?: string;
  path: string;
  body?: string;
  headers?: Record<string, string>;
}

async function call({ method = "GET", path, body, headers }: Call): Promise<{ status: number; contentType: string | null; text: string }> {
  const response = await fetch(base + path, { method, body, headers: { "content-type": "application/json", ...headers } });
  return { status: response.status, contentType: response.headers.get("content-type"), text: await response.text() };
}

/** Each row is one documented mapping: HTTP request in, the request message the RPC received out. */
const mappings: { name: string; call: Call; request: unknown }[] = [
  { name: "path variable with a pattern {name=messages/*}", call: { path: "/v1/messages/123456" }, request: { name: "messages/123456" } },
  {
    name: "unbound fields from the query, nested by a dotted path",
    call: { path: "/v1/messages/123456?revision=2&sub.subfield=foo" },
    request: { name: "messages/123456", revision: "2", sub: { subfield: "foo" } },
  },
  {
    name: "repeated fields by repetition, enums by name or number",
    call: { path: "/v1/messages/1?tags=a&tags=b&kinds=KIND_ALPHA&kinds=2" },
    request: { name: "messages/1", tags: ["a", "b"], kinds: ["KIND_ALPHA", "KIND_BETA"] },
  },
  {
    name: "scalar query values: bool, enum number, double, explicit-presence zero, JSON name",
    call: { path: "/v1/messages/1?verbose=true&kind=1&ratio=0.5&limit=0&userId=u%201" },
    request: { name: "messages/1", verbose: true, kind: "KIND_ALPHA", ratio: 0.5, limit: 0, userId: "u 1" },
  },
  {
    name: "additional_bindings",
    call: { path: "/v1/users/me/messages/123456" },
    request: { userId: "me", messageId: "123456" },
  },
  {
    name: 'body: "message" maps the JSON body to that field; other fields come from the query',
    call: { method: "PATCH", path: "/v1/messages/123456?allow_missing=true", body: '{"text":"Hi!"}' },
    request: { messageId: "123456", message: { text: "Hi!" }, allowMissing: true },
  },
  {
    name: 'body: "*" maps the JSON body to the whole message',
    call: { method: "PUT", path: "/v1/messages/123456", body: '{"text":"Hi!"}' },
    request: { messageId: "123456", text: "Hi!" },
  },
  {
    name: 'body: "*" cannot override a path variable',
    call: { method: "PUT", path: "/v1/messages/123456", body: '{"messageId":"other","text":"Hi!"}' },
    request: { messageId: "123456", text: "Hi!" },
  },
  {
    name: "single-segment variables are fully percent-decoded, multi-segment ones keep %2F",
    call: { path: "/v1/buckets/b%2F1%20x/objects/a/b%2Fc%20d%3F%2f" },
    request: { bucket: "b/1 x", object: "a/b%2Fc d?%2f" },
  },
  { name: "{name=**} matches many segments", call: { path: "/v1/buckets/b/objects/x/y/z" }, request: { bucket: "b", object: "x/y/z" } },
  { name: "non-ASCII in a single-segment variable", call: { path: "/v1/echo/caf%C3%A9" }, request: { id: "café" } },
  {
    name: "a dotted path variable {book.name=shelves/*/books/*} lands inside the body field",
    call: { method: "PATCH", path: "/v1/shelves/1/books/2", body: '{"title":"T","name":"ignored"}' },
    request: { book: { name: "shelves/1/books/2", title: "T" } },
  },
  {
    name: "custom verb :cancel",
    call: { method: "POST", path: "/v1/operations/a/b:cancel", body: '{"reason":"r"}' },
    request: { name: "operations/a/b", reason: "r" },
  },
  { name: "an empty body is an empty message", call: { method: "POST", path: "/v1/operations/a:cancel" }, request: { name: "operations/a" } },
  { name: "custom HTTP method PURGE", call: { method: "PURGE", path: "/v1/operations/x" }, request: { name: "operations/x" } },
  { name: 'custom kind "*" matches any method', call: { method: "DELETE", path: "/v1/cancel/abc" }, request: { name: "abc" } },
  { name: "a literal rule beats an overlapping pattern", call: { path: "/v1/messages/latest" }, request: {} },
  { name: "a verb rule beats the same template without it", call: { path: "/v1/buckets/b/objects/a/b:metadata" }, request: { bucket: "b", object: "a/b" } },
  {
    name: "another verb falls back to the multi-segment variable",
    call: { path: "/v1/buckets/b/objects/a:other" },
    request: { bucket: "b", object: "a:other" },
  },
  {
    name: "google.api.HttpBody as the body field takes the raw bytes and Content-Type",
    call: { method: "POST", path: "/v1/blobs/x?note=n", body: "{not json", headers: { "content-type": "text/plain" } },
    request: { name: "x", content: { contentType: "text/plain", data: Buffer.from("{not json").toString("base64") }, note: "n" },
  },
];

describe("HTTP/JSON transcoding (google/api/http.proto semantics)", () => {
  it.each(mappings)("$name", async ({ call: request, request: expected }) => {
    const response = await call(request);
    expect(response.status, response.text).toBe(200);
    expect(response.contentType).toBe("application/json");
    expect(withoutDefaults(JSON.parse(response.text), { request: expected })).toEqual({ request: expected });
  });

  it("writes every field, unset ones with their default", async () => {
    const { request } = JSON.parse((await call({ path: "/v1/messages/1" })).text);
    expect(request).toMatchObject({ name: "messages/1", verbose: false, kind: "KIND_UNSPECIFIED", ratio: 0, userId: "" });
  });

  it("serves a server-streaming method as server-sent events, one event per message", async () => {
    const response = await call({ path: "/v1/watch?count=3" });
    expect(response.status).toBe(200);
    expect(response.contentType).toBe("text/event-stream");
    expect(response.text).toBe([1, 2, 3].map((n) => `data: {"n":${n},"tags":[]}\n\n`).join(""));
  });

  it("answers a stream that fails before its first message as a plain JSON error", async () => {
    const response = await call({ path: "/v1/watch?count=0&fail=true" });
    expect(response).toMatchObject({ status: 400, contentType: "application/json" });
    expect(JSON.parse(response.text).code).toBe("invalid_argument");
  });

  it("ends a server-sent event stream with an error event in the API's error shape", async () => {
    const response = await call({ path: "/v1/watch?count=1&fail=true" });
    expect(response.text).toBe(
      `data: {"n":1,"tags":[]}\n\nevent: error\ndata: {"code":"invalid_argument","message":"the stream was asked to fail","status":"invalid_argument"}\n\n`,
    );
  });

  it("reads a google.api.HttpBody request raw and writes a google.api.HttpBody response raw", async () => {
    const response = await call({ method: "POST", path: "/v1/raw:echo", body: "{not json", headers: { "content-type": "text/x-shout" } });
    expect(response).toEqual({ status: 200, contentType: "text/x-shout", text: "{NOT JSON" });
  });

  it.each([
    { name: "unknown path", call: { path: "/v2/messages/1" } },
    { name: "known path, other method", call: { method: "POST", path: "/v1/echo/x" } },
    { name: "too many segments for a single-segment variable", call: { path: "/v1/echo/a/b" } },
    { name: "empty single-segment variable", call: { path: "/v1/echo/" } },
    { name: "bad percent-encoding", call: { path: "/v1/echo/%ZZ" } },
  ])("returns false for $name", async ({ call: request }) => {
    expect(await call(request)).toMatchObject({ status: 404, text: "not transcoded" });
  });

  it.each([
    { name: "invalid JSON", call: { method: "PATCH", path: "/v1/messages/1", body: '{"text":' } },
    { name: "unknown body field", call: { method: "PATCH", path: "/v1/messages/1", body: '{"nope":1}' } },
    { name: "wrong body type", call: { method: "PUT", path: "/v1/messages/1", body: '{"text":5}' } },
    { name: "invalid UTF-8", call: { method: "PUT", path: "/v1/messages/1", body: "\ud800" } },
    { name: "unknown query parameter", call: { path: "/v1/messages/1?nope=1" } },
    { name: "wrong query type", call: { path: "/v1/messages/1?revision=abc" } },
    { name: "non-boolean bool", call: { path: "/v1/messages/1?verbose=yes" } },
    { name: "unknown enum name", call: { path: "/v1/messages/1?kind=KIND_GAMMA" } },
    { name: "repeated message as query parameter", call: { path: "/v1/messages/1?subs.subfield=x" } },
    { name: "map as query parameter", call: { path: "/v1/messages/1?labels=x" } },
    { name: "message as query parameter", call: { path: "/v1/messages/1?sub=x" } },
    { name: "singular query parameter given twice", call: { path: "/v1/messages/1?revision=1&revision=2" } },
    { name: "query parameter for a path-bound field", call: { path: "/v1/messages/1?name=x" } },
    { name: "query parameter inside the body field", call: { method: "PATCH", path: "/v1/messages/1?message.text=x", body: "{}" } },
    { name: 'query parameter with body "*"', call: { method: "PUT", path: "/v1/messages/1?text=x", body: "{}" } },
  ])("rejects $name with 400 malformed_request", async ({ call: request }) => {
    const response = await call(request);
    expect(response.status).toBe(400);
    expect(JSON.parse(response.text)).toMatchObject({ code: "malformed_request", status: "invalid_argument" });
  });

  it("rejects a body over maxBodyBytes with 413 payload_too_large and keeps the connection usable", async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const post = (body: string) => rawRequest(agent, "PUT", "/v1/messages/1", body);
    const big = await post(JSON.stringify({ text: "x".repeat(64 * MAX_BODY_BYTES) }));
    expect(big.status).toBe(413);
    expect(JSON.parse(big.text)).toMatchObject({ code: "payload_too_large", status: "resource_exhausted" });
    const small = await post(JSON.stringify({ text: "x".repeat(MAX_BODY_BYTES - 20) }));
    expect(small.status).toBe(200);
    expect(small.reusedSocket).toBe(true);
    agent.destroy();
  });

  it("writes a handler's service error with its catalogue status and JSON body", async () => {
    const response = await call({ path: "/v1/echo/missing" });
    expect(response.status).toBe(404);
    expect(response.contentType).toBe("application/json");
    expect(JSON.parse(response.text)).toEqual({ code: "asset_not_found", message: "no asset named missing", status: "not_found" });
  });

  it("runs the router's interceptors with the original credentials and context values", async () => {
    seen.length = 0;
    const headers = { authorization: "Bearer k1", "x-trace-id": "t1", cookie: "c=1", "user-agent": "tests/1" };
    expect((await call({ path: "/v1/echo/a", headers })).status).toBe(200);
    expect(seen).toHaveLength(1);
    const [{ procedure, header, tag }] = seen as [(typeof seen)[0]];
    expect({ procedure, tag }).toEqual({ procedure: "Echo", tag: "from-server" });
    expect(header.get("authorization")).toBe("Bearer k1");
    expect(header.get("x-trace-id")).toBe("t1");
    expect(header.get("user-agent")).toBe("tests/1");
    expect(header.get("cookie")).toBeNull();
    expect(header.get("content-type")).toBe("application/proto");
  });

  it("maps an interceptor's Connect error without ErrorInfo by its code", async () => {
    const response = await call({ path: "/v1/echo/a", headers: { authorization: "Bearer revoked" } });
    expect(response.status).toBe(401);
    expect(JSON.parse(response.text)).toEqual({ code: "unauthenticated", message: "key revoked", status: "unauthenticated" });
  });

  it("aborts the handler's signal when the client disconnects", async () => {
    const controller = new AbortController();
    const pending = fetch(`${base}/v1/wait`, { signal: controller.signal }).catch((error: unknown) => error);
    await vi.waitFor(() => expect(seen.at(-1)?.procedure).toBe("Wait"));
    controller.abort();
    expect(await pending).toBeInstanceOf(Error);
    await vi.waitFor(() => expect(waitAborted).toBe(true));
  });

  it("refuses to start when a rule's method has no handler", () => {
    expect(() => createTranscoder({ services: [TranscodingTestService], handlers: [], maxBodyBytes: 1 })).toThrow(/no Connect handler/);
  });
});

describe("HTTP/2 (h2c)", () => {
  const h2server = http2.createServer((req, res) => serveRest(req, res));
  let session: http2.ClientHttp2Session;

  beforeAll(async () => {
    await new Promise<void>((resolve) => h2server.listen(0, "127.0.0.1", resolve));
    session = http2.connect(`http://127.0.0.1:${(h2server.address() as AddressInfo).port}`);
  });
  afterAll(async () => {
    session.close();
    await new Promise((resolve) => h2server.close(resolve));
  });

  function h2call(headers: http2.OutgoingHttpHeaders, body: string): Promise<{ status: number; text: string }> {
    return new Promise((resolve, reject) => {
      const stream = session.request({ "content-type": "application/json", ...headers });
      let status = 0;
      let text = "";
      stream.on("response", (response) => (status = Number(response[":status"])));
      stream.setEncoding("utf8").on("data", (chunk: string) => (text += chunk));
      stream.on("end", () => resolve({ status, text }));
      stream.on("error", reject);
      stream.end(body);
    });
  }

  it("transcodes a request with a body and forwards the authority and credentials", async () => {
    seen.length = 0;
    const response = await h2call({ ":method": "PATCH", ":path": "/v1/messages/7", authorization: "Bearer h2" }, '{"text":"Hi!"}');
    expect(response.status).toBe(200);
    const expected = { request: { messageId: "7", message: { text: "Hi!" } } };
    expect(withoutDefaults(JSON.parse(response.text), expected)).toEqual(expected);
    expect(seen[0]?.header.get("authorization")).toBe("Bearer h2");
    expect(seen[0]?.header.get("host")).toMatch(/^127\.0\.0\.1:\d+$/);
  });

  it("answers an oversized body with 413 on the same stream", async () => {
    const response = await h2call({ ":method": "PUT", ":path": "/v1/messages/7" }, "x".repeat(64 * MAX_BODY_BYTES));
    expect(response.status).toBe(413);
    expect(JSON.parse(response.text)).toMatchObject({ code: "payload_too_large" });
  });
});

/** node:http instead of fetch, to see whether the keep-alive socket was reused. */
/**
 * The JSON without the default-valued fields the transcoder writes only because it writes every
 * field, unless `expected` names them (an explicit-presence zero must still be there).
 */
function withoutDefaults(value: unknown, expected: unknown): unknown {
  if (Array.isArray(value)) return value.map((item, i) => withoutDefaults(item, (expected as unknown[] | undefined)?.[i]));
  if (value === null || typeof value !== "object") return value;
  const wanted = (expected ?? {}) as Record<string, unknown>;
  const entries = Object.entries(value).map(([key, field]) => [key, withoutDefaults(field, wanted[key])] as const);
  return Object.fromEntries(entries.filter(([key, field]) => key in wanted || !isDefault(field)));
}

function isDefault(value: unknown): boolean {
  if (Array.isArray(value)) return value.length === 0;
  if (value !== null && typeof value === "object") return Object.keys(value).length === 0;
  return value === "" || value === 0 || value === false || value === "0" || value === "KIND_UNSPECIFIED";
}

function rawRequest(agent: http.Agent, method: string, path: string, body: string): Promise<{ status: number; text: string; reusedSocket: boolean }> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${base}${path}`, { method, agent, headers: { "content-type": "application/json" } }, (res) => {
      let text = "";
      res.setEncoding("utf8").on("data", (chunk: string) => (text += chunk));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, text, reusedSocket: req.reusedSocket }));
    });
    req.on("error", reject);
    req.end(body);
  });
}
