import { codeToString } from "@connectrpc/connect/protocol-connect";
import { errorCatalogue, isErrorCode } from "../errors/index.ts";
import { markFailed, startServerSpan, type Context, type Span } from "../tracing/index.ts";
import type { NodeRequest } from "./node-types.ts";
import type { RequestRecord } from "./request-log.ts";

/** The RPC systems of the semantic conventions, by the protocol a call came in with (the JSON API is HTTP, not one of them). */
const RPC_SYSTEMS: Partial<Record<RequestRecord["protocol"], string>> = { grpc: "grpc", "grpc-web": "grpc", connect: "connect_rpc" };

/**
 * The server span of one request, every protocol alike, started as it arrives: a W3C
 * `traceparent` from the client makes it a child of the client's span. Named by the HTTP method
 * until the request is known to be an API call (endRequestSpan).
 */
export function startRequestSpan(req: NodeRequest, url: URL): { span: Span; context: Context } {
  const method = req.method ?? "";
  return startServerSpan(method, req.headers, {
    "http.request.method": method,
    "url.path": url.pathname,
    "network.protocol.version": req.httpVersion,
  });
}

/**
 * Ends the span with what the request's record says (the OpenTelemetry RPC and HTTP server
 * conventions): an API call is named `package.Service/Method` and carries rpc.system,
 * rpc.service, rpc.method and its protocol's status; every request its HTTP status and, when it
 * failed, its stable code as error.type. Only a failure of the server's (5xx) marks the span an
 * error, as the conventions ask of server spans.
 */
export function endRequestSpan(span: Span, record: RequestRecord): void {
  const spec = isErrorCode(record.code) ? errorCatalogue[record.code] : undefined;
  if (record.procedure !== undefined) {
    const slash = record.procedure.indexOf("/");
    span.updateName(record.procedure);
    const system = RPC_SYSTEMS[record.protocol];
    if (system !== undefined) span.setAttribute("rpc.system", system);
    span.setAttribute("rpc.service", record.procedure.slice(0, slash));
    span.setAttribute("rpc.method", record.procedure.slice(slash + 1));
    if (system === "grpc") span.setAttribute("rpc.grpc.status_code", spec?.code ?? 0);
    if (system === "connect_rpc" && spec !== undefined) span.setAttribute("rpc.connect_rpc.error_code", codeToString(spec.code));
  }
  span.setAttribute("skillenv.protocol", record.protocol);
  if (record.workspace !== undefined) span.setAttribute("skillenv.workspace", record.workspace);
  if (record.httpStatus !== undefined) span.setAttribute("http.response.status_code", record.httpStatus);
  if (record.code !== "ok") {
    span.setAttribute("error.type", record.code);
    if ((spec?.httpStatus ?? 500) >= 500) markFailed(span, record.code);
  }
  span.end();
}
