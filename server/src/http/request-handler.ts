import { ConnectError, createContextValues, type ContextValues, type Interceptor } from "@connectrpc/connect";
import type { UniversalHandler } from "@connectrpc/connect/protocol";
import { universalRequestFromNodeRequest, universalResponseToNodeResponse } from "@connectrpc/connect-node";
import { workspaceContextKey } from "../auth/index.ts";
import { describeError, serviceError, stableCodeOf } from "../errors/index.ts";
import type { Transcoder } from "../transcoder/index.ts";
import { applyCors } from "./cors.ts";
import type { NodeRequest, NodeResponse } from "./node-types.ts";
import { logRequest, protocolOf, requestRecordKey, type LogSink, type RequestRecord } from "./request-log.ts";

/** A plain HTTP endpoint outside the API (the embedded object store). */
export interface RawEndpoint {
  matches(pathname: string): boolean;
  /** Serves the request and returns the JSON body of the 200 answer; throws service errors. */
  handle(req: NodeRequest, url: URL): Promise<RawEndpointResult>;
}

export interface RawEndpointResult {
  workspace: string;
  body: unknown;
}

export interface RequestHandlerOptions {
  handlers: readonly UniversalHandler[];
  transcoder: Transcoder;
  rawEndpoints: readonly RawEndpoint[];
  corsOrigins: readonly string[];
  corsHeaders: readonly string[];
  log: LogSink | undefined;
}

export type RequestListener = (req: NodeRequest, res: NodeResponse) => void;

/**
 * The one listener behind every protocol: CORS, then the object store, then Connect routes
 * (gRPC, gRPC-Web, Connect), then the REST transcoder, else a JSON 404.
 */
export function createRequestListener(options: RequestHandlerOptions): RequestListener {
  const routes = new Map(options.handlers.map((handler) => [handler.requestPath, handler]));
  return (req, res) => {
    const startedAt = process.hrtime.bigint();
    const url = new URL(req.url ?? "/", "http://localhost");
    const record: RequestRecord = { protocol: protocolOf(req), method: req.method ?? "", path: url.pathname, code: "ok" };
    res.once("close", () => {
      record.httpStatus = res.statusCode;
      if (options.log) logRequest(options.log, record, startedAt);
    });
    const contextValues = createContextValues().set(requestRecordKey, record);
    dispatch(req, res, url, record, contextValues).catch((error: unknown) => writeError(res, record, error));
  };

  async function dispatch(req: NodeRequest, res: NodeResponse, url: URL, record: RequestRecord, contextValues: ContextValues) {
    if (applyCors(req, res, options.corsOrigins, options.corsHeaders)) return;
    const raw = options.rawEndpoints.find((endpoint) => endpoint.matches(url.pathname));
    if (raw) {
      record.protocol = "object-store";
      const result = await raw.handle(req, url);
      record.workspace = result.workspace;
      writeJson(res, 200, result.body);
      return;
    }
    const handler = routes.get(url.pathname);
    if (handler) {
      if (record.protocol === "http") record.protocol = "connect";
      const response = await handler(universalRequestFromNodeRequest(req, res, undefined, contextValues));
      await universalResponseToNodeResponse(response, res);
      return;
    }
    record.protocol = "rest";
    if (await options.transcoder.handle(req, res, contextValues)) return;
    record.protocol = "http";
    throw serviceError("route_not_found", `no API method is bound to ${req.method} ${url.pathname}`);
  }
}

/**
 * Records procedure, workspace and outcome of every RPC for the request log. It must run
 * outside the auth interceptor so that refused calls are logged too.
 */
export function requestLogInterceptor(): Interceptor {
  return (next) => async (request) => {
    const record = request.contextValues.get(requestRecordKey);
    try {
      return await next(request);
    } catch (error) {
      if (record) record.code = stableCodeOf(ConnectError.from(error));
      throw error;
    } finally {
      if (record) {
        record.procedure = `${request.service.typeName}/${request.method.name}`;
        record.workspace = request.contextValues.get(workspaceContextKey);
      }
    }
  };
}

function writeError(res: NodeResponse, record: RequestRecord, error: unknown): void {
  const { body, httpStatus } = describeError(error);
  record.code = body.code;
  if (res.headersSent) {
    res.destroy();
    return;
  }
  writeJson(res, httpStatus, body);
}

function writeJson(res: NodeResponse, status: number, body: unknown): void {
  const bytes = Buffer.from(JSON.stringify(body));
  res.statusCode = status;
  res.setHeader("content-type", "application/json");
  res.setHeader("content-length", bytes.byteLength);
  res.end(bytes);
}
