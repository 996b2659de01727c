import { toBinary, type DescService } from "@bufbuild/protobuf";
import type { UniversalHandler, UniversalServerRequest, UniversalServerResponse } from "@connectrpc/connect/protocol";
import { connectRequest } from "./call.ts";
import { buildRequestMessage, readBody } from "./request.ts";
import { eventStream } from "./event-stream.ts";
import { errorReply, replyFromConnect, universalResponse } from "./response.ts";
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
  /** The REST call for an HTTP method and raw request URL (path and query), or undefined when no rule matches. */
  match(httpMethod: string, rawUrl: string): RestCall | undefined;
}

export interface RestCall {
  /**
   * Serves the call; never throws: failures are JSON error replies. The request body is read
   * only once the handler's request gate has let the call in, and reading stops at the size
   * limit without destroying the body: whoever owns it drains the rest (server/src/http RequestBody).
   */
  serve(request: UniversalServerRequest): Promise<UniversalServerResponse>;
}

/**
 * Serves the REST mapping of google.api.http annotations (google/api/http.proto) by calling the
 * same Connect handlers that serve gRPC and Connect, so request gates and interceptors run for
 * REST too.
 *
 * Choices where http.proto leaves room:
 * - Unary methods answer JSON; server-streaming methods answer server-sent events (one `data:`
 *   event per message, `event: error` for an error ending the stream); rules on client and
 *   bidirectional streams are skipped.
 * - With body "*" query parameters are rejected (malformed_request), as are unknown query
 *   parameters and ones naming a field bound by the path or body.
 * - A path that is badly percent-encoded matches no rule.
 * - An empty body is an empty message; rules without body leave any sent body unread.
 * - response_body is not supported: such a rule fails createTranscoder.
 */
export function createTranscoder(options: TranscoderOptions): Transcoder {
  const rules = buildRules(options.services, options.handlers);
  return {
    match(httpMethod, rawUrl) {
      const { path, query } = splitUrl(rawUrl);
      const match = findRule(rules, httpMethod, path);
      if (match === undefined) return undefined;
      return {
        async serve(request) {
          return call(match, query, request, options.maxBodyBytes).catch((error: unknown) => universalResponse(errorReply(error)));
        },
      };
    },
  };
}

/** Splits without normalizing: path templates match the raw, still percent-encoded path. */
function splitUrl(url: string): { path: string; query: URLSearchParams } {
  const mark = url.indexOf("?");
  if (mark === -1) return { path: url, query: new URLSearchParams() };
  return { path: url.slice(0, mark), query: new URLSearchParams(url.slice(mark + 1)) };
}

async function call(
  { rule, pathValues }: RuleMatch,
  query: URLSearchParams,
  request: UniversalServerRequest,
  maxBodyBytes: number,
): Promise<UniversalServerResponse> {
  const contentType = request.header.get("content-type") ?? "";
  // Built when the handler reads its body, i.e. after its request gate: a refused call's body is never read.
  const message = async () => {
    // Rules without a body take no body (http.proto); whatever was sent is left unread.
    const body = rule.body === undefined ? new Uint8Array(0) : await readBody(request, maxBodyBytes);
    return toBinary(rule.method.input, buildRequestMessage(rule, { pathValues, query, body, contentType }));
  };
  const response = await rule.handler(connectRequest(request, rule, message));
  if (rule.streaming && response.status === 200) return await eventStream(rule.method, response, maxBodyBytes);
  return universalResponse(await replyFromConnect(rule.method, response));
}
