import type { DescMessage } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { codeToString } from "@connectrpc/connect/protocol-connect";
import { ErrorInfoSchema } from "../../../gen/google/rpc/error_details_pb.js";
import { ERROR_DOMAIN, errorCatalogue, isErrorCode, type ErrorCode } from "./catalogue.ts";

/** The messages an error's status details carry: what gRPC reflection describes besides the services. */
export const ERROR_DETAILS: readonly DescMessage[] = [ErrorInfoSchema];

/**
 * Creates the error a handler throws. The stable code travels as google.rpc.ErrorInfo.reason,
 * so gRPC, gRPC-Web and Connect clients read it from the status details and the JSON API
 * from the body's "code".
 */
export function serviceError(code: ErrorCode, message: string, metadata: Record<string, string> = {}): ConnectError {
  return new ConnectError(message, errorCatalogue[code].code, undefined, [{ desc: ErrorInfoSchema, value: { reason: code, domain: ERROR_DOMAIN, metadata } }]);
}

/** The header of a refusal that says when to ask again (seconds): HTTP's Retry-After, also sent as gRPC and Connect metadata. */
export const RETRY_AFTER = "retry-after";

/**
 * A refusal to be retried after `secs`: said in its ErrorInfo (`retryAfterSecs`) and in its
 * metadata's Retry-After, which leaves as a response header (Connect, REST) or trailer (gRPC).
 * It has no stack trace: a refusal is an answer, not a fault, and a workspace past its share may
 * send thousands a second. Capturing the stack was most of what making the error cost (12-15 µs
 * against 2-3 µs in a loop, about 40 µs under a flood: docs/performance.md).
 */
export function retryableRefusal(code: ErrorCode, message: string, secs: number): ConnectError {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    const error = serviceError(code, message, { retryAfterSecs: String(secs) });
    error.metadata.set(RETRY_AFTER, String(secs));
    return error;
  } finally {
    Error.stackTraceLimit = limit;
  }
}

/** The JSON body of an error on the HTTP API. */
export interface ErrorBody {
  code: string;
  message: string;
  /** The Connect code name, e.g. "not_found". */
  status: string;
}

export interface DescribedError {
  body: ErrorBody;
  httpStatus: number;
}

/** Reads the stable code back out of any thrown value; anything unrecognised is `internal`. */
export function stableCodeOf(error: ConnectError): ErrorCode {
  const reason = error.findDetails(ErrorInfoSchema).find((info) => info.domain === ERROR_DOMAIN)?.reason;
  if (reason !== undefined && isErrorCode(reason)) return reason;
  return fallbackCodeFor(error.code);
}

export function describeError(thrown: unknown): DescribedError {
  const error = ConnectError.from(thrown);
  const code = stableCodeOf(error);
  const message = code === "internal" && !isServiceError(error) ? "internal error" : error.rawMessage;
  return {
    body: { code, message, status: codeToString(errorCatalogue[code].code) },
    httpStatus: errorCatalogue[code].httpStatus,
  };
}

function isServiceError(error: ConnectError): boolean {
  return error.findDetails(ErrorInfoSchema).some((info) => info.domain === ERROR_DOMAIN);
}

/** Errors raised by the Connect runtime itself (decode failures, size limits) carry no ErrorInfo. */
function fallbackCodeFor(code: Code): ErrorCode {
  switch (code) {
    case Code.Unauthenticated:
      return "unauthenticated";
    case Code.InvalidArgument:
      return "malformed_request";
    case Code.ResourceExhausted:
      return "payload_too_large";
    case Code.Unavailable:
      return "unavailable";
    case Code.Canceled:
    // Connect's Node adapter reports a client that hung up mid-call (reset, destroyed stream) as aborted.
    case Code.Aborted:
      return "canceled";
    case Code.Unimplemented:
    case Code.NotFound:
      return "route_not_found";
    default:
      return "internal";
  }
}
