import { encodeEnvelope, type UniversalServerRequest } from "@connectrpc/connect/protocol";
import type { Rule } from "./rules.ts";

/**
 * Original headers the Connect handler and its interceptors may rely on (credentials, client
 * identity, tracing and custom x- headers). Body framing and negotiation headers are left out:
 * they describe the REST exchange, not the synthesized Connect request.
 */
const FORWARDED_HEADER = /^(authorization|user-agent|x-.+)$/;

/**
 * Turns the HTTP request into a Connect request in the binary codec for the rule's handler: unary,
 * or a server stream whose one request message is enveloped. Its body is the binary message,
 * produced by `message` when the handler first reads the body.
 * The signal and context values of the original request carry over, so cancellation reaches the
 * implementation and gates and interceptors see what they would for gRPC or Connect.
 */
export function connectRequest(original: UniversalServerRequest, rule: Rule, message: () => Promise<Uint8Array>): UniversalServerRequest {
  const url = new URL(rule.handler.requestPath, original.url);
  const contentType = rule.streaming ? "application/connect+proto" : "application/proto";
  const header = new Headers({ "content-type": contentType, "connect-protocol-version": "1", host: url.host });
  for (const [name, value] of original.header) {
    if (FORWARDED_HEADER.test(name)) header.append(name, value);
  }
  const body = {
    async *[Symbol.asyncIterator]() {
      const bytes = await message();
      yield rule.streaming ? encodeEnvelope(0, bytes) : bytes;
    },
  };
  return { ...original, method: "POST", url: url.toString(), header, body };
}
