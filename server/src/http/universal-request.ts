import { ConnectError, type ContextValues } from "@connectrpc/connect";
import type { UniversalServerRequest } from "@connectrpc/connect/protocol";
import { serviceError } from "../errors/index.ts";
import type { NodeRequest, NodeResponse } from "./node-types.ts";

/**
 * A Node request as Connect's handlers take it, its body read by `body`.
 *
 * connect-node's universalRequestFromNodeRequest does the same, but it aborts the request's signal
 * whenever the request closes, also after a call that went well, and an abort without a reason
 * makes a DOMException, stack trace and all: a cost on every call, for a signal nobody listens to
 * by then (Connect lets go of it when the call is over). Here the signal is aborted only when the
 * response closes before it has ended, that is when the client went away or the stream was reset
 * mid-call, so that the handler's context is aborted then and only then.
 */
export function universalRequest(req: NodeRequest, res: NodeResponse, contextValues: ContextValues, body: AsyncIterable<Uint8Array>): UniversalServerRequest {
  const authority = "authority" in req ? req.authority : req.headers.host;
  // HTTP/1.0 allows leaving out Host, but Connect needs an authority; a request without one is the caller's error.
  if (authority === undefined) throw serviceError("malformed_request", "the request has no Host header");
  const scheme = "encrypted" in req.socket && req.socket.encrypted ? "https" : "http";
  const call = new AbortController();
  // Ended, not finished: HTTP/2's compatibility response reports itself finished even when reset.
  res.once("close", () => {
    if (!res.writableEnded) call.abort(whyUnfinished(req));
  });
  return {
    httpVersion: req.httpVersion,
    method: req.method ?? "",
    url: new URL(req.url ?? "", `${scheme}://${authority}`).href,
    header: webHeaders(req.headers),
    body,
    signal: call.signal,
    contextValues,
  };
}

/** Our own refusal (a body that stalled, say) when the request was destroyed with one; otherwise the client left. */
function whyUnfinished(req: NodeRequest): ConnectError {
  return req.errored instanceof ConnectError ? req.errored : serviceError("canceled", "the client went away before the call was over");
}

/** The request's headers without HTTP/2's pseudo-headers (`:path`, ...), which are not headers to Connect. */
function webHeaders(headers: NodeRequest["headers"]): Headers {
  const web = new Headers();
  for (const name in headers) {
    const value = headers[name];
    if (name.startsWith(":") || value === undefined) continue;
    if (typeof value === "string") web.append(name, value);
    else for (const each of value) web.append(name, each);
  }
  return web;
}
