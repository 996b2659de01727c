import type * as http from "node:http";
import type * as http2 from "node:http2";
import { toBinary, type DescService } from "@bufbuild/protobuf";
import type { ContextValues } from "@connectrpc/connect";
import { universalRequestFromNodeRequest } from "@connectrpc/connect-node";
import type { UniversalHandler } from "@connectrpc/connect/protocol";
import { connectRequest } from "./call.ts";
import { buildRequestMessage, readBody } from "./request.ts";
import { errorReply, replyFromConnect, writeReply, type Reply } from "./response.ts";
import { buildRules, findRule, type RuleMatch } from "./rules.ts";

export interface TranscoderOptions {
  /** Services whose google.api.http rules are served. */
  services: readonly DescService[];
  /** createConnectRouter(...).handlers; must include those services' methods. */
  handlers: readonly UniversalHandler[];
  /** Larger request bodies fail with payload_too_large. */
  maxBodyBytes: number;
}

export interface Transcoder {
  /** Serves the request if an http rule matches it and returns true; returns false and leaves res untouched otherwise. */
  handle(
    req: http.IncomingMessage | http2.Http2ServerRequest,
    res: http.ServerResponse | http2.Http2ServerResponse,
    contextValues?: ContextValues,
  ): Promise<boolean>;
}

/**
 * Serves the REST mapping of google.api.http annotations (google/api/http.proto) by calling the
 * same Connect handlers that serve gRPC and Connect, so interceptors run for REST too.
 *
 * Choices where http.proto leaves room:
 * - Only unary methods are served; rules on streaming methods are skipped.
 * - With body "*" query parameters are rejected (malformed_request), as are unknown query
 *   parameters and ones naming a field bound by the path or body.
 * - A path that is badly percent-encoded matches no rule (handle returns false).
 * - An empty body is an empty message; rules without body leave any sent body unread.
 * - response_body is not supported: such a rule fails createTranscoder.
 */
export function createTranscoder(options: TranscoderOptions): Transcoder {
  const rules = buildRules(options.services, options.handlers);
  return {
    async handle(req, res, contextValues) {
      const { path, query } = splitUrl(req.url ?? "");
      const match = findRule(rules, req.method ?? "", path);
      if (match === undefined) return false;
      const exchange = { req, res, contextValues, query, maxBodyBytes: options.maxBodyBytes };
      const reply = await serve(match, exchange).catch(errorReply);
      // A failed write means the client is gone; there is no one left to report it to.
      await writeReply(res, reply).catch(() => undefined);
      return true;
    },
  };
}

/** Splits without normalizing: path templates match the raw, still percent-encoded path. */
function splitUrl(url: string): { path: string; query: URLSearchParams } {
  const mark = url.indexOf("?");
  if (mark === -1) return { path: url, query: new URLSearchParams() };
  return { path: url.slice(0, mark), query: new URLSearchParams(url.slice(mark + 1)) };
}

interface Exchange {
  req: http.IncomingMessage | http2.Http2ServerRequest;
  res: http.ServerResponse | http2.Http2ServerResponse;
  contextValues: ContextValues | undefined;
  query: URLSearchParams;
  maxBodyBytes: number;
}

async function serve({ rule, pathValues }: RuleMatch, { req, res, contextValues, query, maxBodyBytes }: Exchange): Promise<Reply> {
  // Taken first so that the abort signal watches the connection while the body is read.
  const original = universalRequestFromNodeRequest(req, res, undefined, contextValues);
  // Rules without a body take no body (http.proto); whatever was sent is left unread.
  const body = rule.body === undefined ? new Uint8Array(0) : await readBody(req, maxBodyBytes);
  const contentType = original.header.get("content-type") ?? "";
  const message = buildRequestMessage(rule, { pathValues, query, body, contentType });
  const response = await rule.handler(connectRequest(original, rule, toBinary(rule.method.input, message)));
  return replyFromConnect(rule.method, response);
}
