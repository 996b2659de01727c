import type { DescMethod } from "@bufbuild/protobuf";
import { ConnectError, createContextValues, type ContextValues } from "@connectrpc/connect";
import type { UniversalHandler, UniversalServerResponse } from "@connectrpc/connect/protocol";
import { universalResponseToNodeResponse } from "@connectrpc/connect-node";
import type { WorkspaceRateLimiter } from "../auth/index.ts";
import type { HttpLimits } from "../config/index.ts";
import { describeError, RETRY_AFTER, serviceError } from "../errors/index.ts";
import { runWithin } from "../tracing/index.ts";
import type { Transcoder } from "../transcoder/index.ts";
import { BodyBudget } from "./body-budget.ts";
import { applyCors } from "./cors.ts";
import type { NodeRequest, NodeResponse } from "./node-types.ts";
import { answerProbe, isProbePath, type ReadinessOf } from "./probes.ts";
import type { ProtocolEndpoint } from "./protocol-endpoint.ts";
import { RequestBody, type ReadLimits } from "./request-body.ts";
import { protocolOf, requestLogEntry, requestRecordKey, type LogWriter, type RequestRecord } from "./request-log.ts";
import { endRequestSpan, startRequestSpan } from "./request-span.ts";
import type { StaticAnswer, StaticSite } from "./static-files.ts";
import { universalRequest } from "./universal-request.ts";

/** A plain HTTP endpoint outside the API (the embedded object store). */
export interface RawEndpoint {
  matches(pathname: string): boolean;
  /** Serves the request, reading its body from `body`, and returns the JSON body of the 200 answer; throws service errors. */
  handle(req: NodeRequest, url: URL, body: AsyncIterable<Uint8Array>): Promise<RawEndpointResult>;
}

export interface RawEndpointResult {
  workspace: string;
  body: unknown;
}

export interface RequestHandlerOptions {
  handlers: readonly UniversalHandler[];
  /** The request bodies held in memory; default: one made from `limits` (the metrics read a shared one). */
  bodyBudget?: BodyBudget;
  transcoder: Transcoder;
  rawEndpoints: readonly RawEndpoint[];
  /** Endpoints answering in a protocol of their own (the MCP endpoint), by path. */
  protocolEndpoints?: readonly ProtocolEndpoint[];
  /** Fixed JSON documents anyone may GET without a key, by path (the OpenAPI document). */
  publicJson: ReadonlyMap<string, Uint8Array>;
  /** Static files anyone may GET without a key (the web console), with their redirects. */
  staticSites: readonly StaticSite[];
  corsOrigins: readonly string[];
  corsHeaders: readonly string[];
  /** The body idle timeout and in-memory budgets. */
  limits: HttpLimits;
  log: LogWriter | undefined;
  /** Told of every request once it is over, with its record and how long it took (the metrics). */
  onRequestDone?: ((record: RequestRecord, durationSeconds: number) => void) | undefined;
  /** Answers the liveness and readiness probes (probes.ts) from this. */
  readiness: ReadinessOf;
  /** Each workspace's share of the server: an API method's response bytes are charged to it once sent. */
  workspaceRates?: WorkspaceRateLimiter | undefined;
}

export type RequestListener = (req: NodeRequest, res: NodeResponse) => void;

/** One request on its way through the listener. */
interface Exchange {
  req: NodeRequest;
  res: NodeResponse;
  url: URL;
  record: RequestRecord;
  contextValues: ContextValues;
  /** Every request has one, read or not, so an unread body is drained under the idle timeout too. */
  body: RequestBody;
  /** Settles when the response has closed (sent, or the client gone). */
  closed: Promise<void>;
}

/**
 * The one listener behind every protocol: CORS, then the probes, then the object store, then the
 * protocol endpoints (MCP), then Connect routes
 * (gRPC, gRPC-Web, Connect), then the public JSON documents, then the static sites, then the REST
 * transcoder, else a JSON 404. Every request body is read through a RequestBody (idle timeout,
 * memory budget, drained when left unread). Authentication is the Connect request gate's: it runs
 * before the body is read, for REST too.
 */
export function createRequestListener(options: RequestHandlerOptions): RequestListener {
  const routes = new Map(options.handlers.map((handler) => [handler.requestPath, handler]));
  const idleMs = options.limits.bodyIdleSecs * 1000;
  const budget =
    options.bodyBudget ?? new BodyBudget({ total: options.limits.maxBodyBytesInFlight, perConnection: options.limits.maxConnectionBodyBytesInFlight });
  const heldInMemory: ReadLimits = { idleMs, budget };

  return (req, res) => {
    const startedAt = process.hrtime.bigint();
    const url = new URL(req.url ?? "/", "http://localhost");
    const record: RequestRecord = { protocol: protocolOf(req), method: req.method ?? "", path: url.pathname, code: "ok" };
    const closed = new Promise<void>((resolve) => res.once("close", resolve));
    const contextValues = createContextValues().set(requestRecordKey, record);
    const body = new RequestBody(req, res, idleMs);
    const exchange: Exchange = { req, res, url, record, contextValues, body, closed };
    // Every request but the probes (asked every few seconds by load balancers) is a span, and
    // everything it causes (journal writes, tool calls, a run's turn) happens within it.
    const traced = isProbePath(url.pathname) ? undefined : startRequestSpan(req, url);
    const served = traced ? runWithin(traced.context, () => dispatch(exchange)) : dispatch(exchange);
    const handled = served.catch((error: unknown) => writeError(res, body, record, error));
    // Logged once the outcome is known and the response is over, whichever comes last: a client
    // that leaves mid-upload closes the response before the upload handler has failed.
    void Promise.all([handled, closed]).then(() => {
      record.httpStatus = res.statusCode;
      if (record.code === "ok" && !res.writableFinished) record.code = "canceled";
      options.log?.(requestLogEntry(record, startedAt));
      options.onRequestDone?.(record, Number(process.hrtime.bigint() - startedAt) / 1e9);
      if (record.workspace !== undefined && record.responseBytes) options.workspaceRates?.charge(record.workspace, record.responseBytes);
      if (traced) endRequestSpan(traced.span, record);
    });
  };

  async function dispatch(exchange: Exchange) {
    const { req, res, url, record, contextValues, body } = exchange;
    if (applyCors(req, res, options.corsOrigins, options.corsHeaders)) return;
    if (isProbePath(url.pathname)) {
      body.prepareResponse(res);
      if (answerProbe(req, res, url.pathname, options.readiness)) return;
    }
    const raw = options.rawEndpoints.find((endpoint) => endpoint.matches(url.pathname));
    if (raw) {
      record.protocol = "object-store";
      // Uploads stream to disk, not memory: only the idle timeout applies.
      const result = await raw.handle(req, url, body.read({ idleMs, budget: undefined }));
      record.workspace = result.workspace;
      writeJson(res, body, 200, result.body);
      return;
    }
    const endpoint = options.protocolEndpoints?.find((candidate) => candidate.matches(url.pathname));
    if (endpoint) {
      record.protocol = endpoint.protocol;
      const prepareResponse = () => body.prepareResponse(res);
      await endpoint.serve({ req, res, url, body: body.read(heldInMemory), record, prepareResponse, closed: exchange.closed });
      return;
    }
    const handler = routes.get(url.pathname);
    if (handler) {
      if (record.protocol === "http") record.protocol = "connect";
      const response = await handler(universalRequest(req, res, contextValues, body.read(readLimitsOf(handler.method))));
      refuseBareResponse(response, req, res, url);
      await writeResponse(response, exchange);
      return;
    }
    const document = req.method === "GET" ? options.publicJson.get(url.pathname) : undefined;
    if (document) {
      writeJsonBytes(res, body, 200, document);
      return;
    }
    const page = req.method === "GET" || req.method === "HEAD" ? findStatic(options.staticSites, url.pathname, req) : undefined;
    if (page) {
      writeStatic(res, body, req.method === "HEAD", page);
      return;
    }
    const rest = options.transcoder.match(req.method ?? "", req.url ?? "");
    if (rest) {
      record.protocol = "rest";
      await writeResponse(await rest.serve(universalRequest(req, res, contextValues, body.read(heldInMemory))), exchange);
      return;
    }
    throw serviceError("route_not_found", `no API method is bound to ${req.method} ${url.pathname}`);
  }

  /** A streaming call reads its messages one at a time over its whole life: quiet spells are normal and nothing accumulates. */
  function readLimitsOf(method: DescMethod): ReadLimits {
    const streamsRequests = method.methodKind === "client_streaming" || method.methodKind === "bidi_streaming";
    return streamsRequests ? { idleMs: undefined, budget: undefined } : heldInMemory;
  }
}

/**
 * Connect answers a request that no protocol of the route takes with a bare status and no body: a
 * method other than POST (405), a content type of none of gRPC, gRPC-Web and Connect (415), a
 * bidirectional stream over HTTP/1.1 (505). Thrown instead, each becomes the API's JSON error with
 * a stable code, like every other refusal, and none is answered as a server fault.
 */
function refuseBareResponse(response: UniversalServerResponse, req: NodeRequest, res: NodeResponse, url: URL): void {
  if (response.body !== undefined) return;
  const procedure = url.pathname.slice(1);
  switch (response.status) {
    case 405:
      throw serviceError("route_not_found", `no API method is bound to ${req.method} ${url.pathname}: call ${procedure} with POST`);
    case 415:
      throw serviceError(
        "malformed_request",
        `${procedure} does not take content-type ${JSON.stringify(req.headers["content-type"] ?? "")}: use application/json or application/proto (Connect), application/grpc or application/grpc-web`,
      );
    case 505:
      // As Connect does: a client that expects a full-duplex stream may hang until the connection closes.
      res.setHeader("connection", "close");
      throw serviceError("malformed_request", `${procedure} is a bidirectional stream: it needs HTTP/2`);
  }
}

/**
 * connect-node's writer waits for an "end" event that Node's responses never emit, so its promise
 * never settles on success; the response's close is its end.
 */
function writeResponse(response: UniversalServerResponse, { res, body, closed, record }: Exchange): Promise<void> {
  body.prepareResponse(res);
  return Promise.race([universalResponseToNodeResponse(counted(response, record), res), closed]);
}

/** The response, adding up its body's bytes in `record.responseBytes` as they are written. */
function counted(response: UniversalServerResponse, record: RequestRecord): UniversalServerResponse {
  const { body } = response;
  if (body === undefined) return response;
  record.responseBytes = 0;
  if (body instanceof Uint8Array) {
    record.responseBytes = body.byteLength;
    return response;
  }
  return {
    ...response,
    body: (async function* () {
      for await (const chunk of body) {
        record.responseBytes! += chunk.byteLength;
        yield chunk;
      }
    })(),
  };
}

function writeError(res: NodeResponse, body: RequestBody, record: RequestRecord, error: unknown): void {
  const { body: errorBody, httpStatus } = describeError(error);
  record.code = errorBody.code;
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const retryAfter = error instanceof ConnectError ? error.metadata.get(RETRY_AFTER) : null;
  if (retryAfter !== null) res.setHeader(RETRY_AFTER, retryAfter);
  writeJson(res, body, httpStatus, errorBody);
}

function findStatic(sites: readonly StaticSite[], pathname: string, req: NodeRequest): StaticAnswer | undefined {
  for (const site of sites) {
    const answer = site.answer(pathname, req.headers);
    if (answer) return answer;
  }
  return undefined;
}

function writeStatic(res: NodeResponse, body: RequestBody, head: boolean, page: StaticAnswer): void {
  body.prepareResponse(res);
  res.statusCode = page.status;
  for (const [name, value] of Object.entries(page.headers)) res.setHeader(name, value);
  // A 304 stands for the cached copy and says nothing of a length; a HEAD is told the length its GET would have.
  if (page.status !== 304) res.setHeader("content-length", page.body.byteLength);
  if (head) res.end();
  else res.end(page.body);
}

function writeJson(res: NodeResponse, body: RequestBody, status: number, json: unknown): void {
  writeJsonBytes(res, body, status, Buffer.from(JSON.stringify(json)));
}

function writeJsonBytes(res: NodeResponse, body: RequestBody, status: number, bytes: Uint8Array): void {
  body.prepareResponse(res);
  res.statusCode = status;
  res.setHeader("content-type", "application/json");
  res.setHeader("content-length", bytes.byteLength);
  res.end(bytes);
}
