import { Code, ConnectError, type HandlerContext } from "@connectrpc/connect";
import { ErrorInfoSchema } from "../../../gen/google/rpc/error_details_pb.js";
import { workspaceContextKey, type RequestGate } from "../auth/index.ts";
import { ERROR_DOMAIN, serviceError, stableCodeOf, type ErrorCode } from "../errors/index.ts";
import { requestRecordKey } from "./request-log.ts";

/**
 * Connect's own words for a request it cannot decode, which it reports as `internal` (connect-es 2:
 * protocol/serialization.ts and protocol/envelope.ts) or `unimplemented` (protocol/compression.ts,
 * and a unary call given no message or two), with no stable code and, for `internal`, a code that
 * blames the server. All of them are the caller's fault; each gets its stable code.
 */
const DECODE_FAILURES: ReadonlyArray<{ code: Code; connectSays: string; weSay: string; stableCode: ErrorCode }> = [
  { code: Code.Internal, connectSays: "parse binary: ", weSay: "the request message is not valid protobuf binary", stableCode: "malformed_request" },
  {
    code: Code.Internal,
    connectSays: "received compressed envelope",
    weSay: "a message is flagged compressed, but the request names no encoding (grpc-encoding)",
    stableCode: "malformed_request",
  },
  // The server accepts no compression (createConnectRouter's default), so any encoding is refused;
  // still `unimplemented`, as the gRPC and Connect protocols require.
  {
    code: Code.Unimplemented,
    connectSays: "unknown compression ",
    weSay: "the request is compressed, but this server accepts no compression: send it uncompressed",
    stableCode: "compression_unsupported",
  },
  {
    code: Code.Unimplemented,
    connectSays: "protocol error: missing input message",
    weSay: "a unary call takes exactly one request message, and none was sent",
    stableCode: "malformed_request",
  },
  {
    code: Code.Unimplemented,
    connectSays: "protocol error: received extra input message",
    weSay: "a unary call takes exactly one request message, and more were sent",
    stableCode: "malformed_request",
  },
];

/**
 * Wraps the request gate of every Connect call (gRPC, gRPC-Web, Connect and, through the
 * transcoder, REST) to fill in the call's request log record: procedure, workspace and outcome.
 *
 * Connect aborts the handler context with the error it is about to send, whatever failed: the
 * gate, reading or decoding the body, an interceptor or the implementation; a call that succeeds
 * is aborted without an error. So the abort is the one place that sees every outcome. It is also
 * the one place to correct Connect's verdict on undecodable messages (internal, with parser
 * details) before it is sent: it becomes malformed_request with a plain message. And as every call
 * passes here first, its end without an error is made cheap here too (endWithSharedReason).
 */
export function recordingGate(gate: RequestGate): RequestGate {
  return async (context) => {
    endWithSharedReason(context);
    const record = context.values.get(requestRecordKey);
    context.signal.addEventListener(
      "abort",
      () => {
        const reason: unknown = context.signal.reason;
        if (!(reason instanceof ConnectError)) {
          // Anything else a handler threw, Connect answers `internal` ("internal error"); the call
          // being over (CALL_OVER) or the client leaving (an AbortError, the listener's `canceled`) is not a fault.
          if (record && reason instanceof Error && reason.name !== "AbortError") record.code = "internal";
          return;
        }
        blameCallerForDecodeFailure(reason);
        carryStableCode(reason);
        if (record) record.code = stableCodeOf(reason);
      },
      { once: true },
    );
    if (record) record.procedure = `${context.service.typeName}/${context.method.name}`;
    await gate(context);
    if (record) record.workspace = context.values.get(workspaceContextKey);
  };
}

/**
 * What a call's signal is aborted with when the call is over without an error: one AbortError for
 * all calls.
 */
const CALL_OVER = new DOMException("the call is over", "AbortError");

/**
 * Connect ends every call by aborting its context without a reason (once for a unary Connect call,
 * twice for gRPC, gRPC-Web and Connect streams: each protocol's handler-factory.js), and an abort
 * without a reason makes a new DOMException, stack trace and all: connect-node's largest cost per
 * call in a CPU profile of the service (docs/performance.md). Given a shared reason instead, the
 * signal ends aborted with an AbortError as before, made once. Connect's context controller has
 * the abort method; its public type leaves it out.
 */
function endWithSharedReason(context: HandlerContext): void {
  const controller = context as HandlerContext & { abort(reason?: unknown): void };
  const abort = controller.abort;
  controller.abort = (reason) => abort.call(controller, reason ?? CALL_OVER);
}

/** Rewrites the error in place: Connect serializes this very object right after the abort. */
function blameCallerForDecodeFailure(error: ConnectError): void {
  const failure = DECODE_FAILURES.find(({ code, connectSays }) => error.code === code && error.rawMessage.startsWith(connectSays));
  if (failure === undefined) return;
  const replacement = serviceError(failure.stableCode, failure.weSay);
  Object.assign(error, { code: replacement.code, rawMessage: replacement.rawMessage, message: replacement.message, details: replacement.details });
}

/**
 * Errors Connect raises itself (JSON it cannot decode, a broken envelope, a bad timeout header, a
 * message over the size limit) carry no google.rpc.ErrorInfo, so gRPC, gRPC-Web and Connect
 * clients would find no stable code in them, while the JSON API and the request log derive one
 * (stableCodeOf). The same code is added to the error here, in place, before Connect sends it.
 * Not `internal`: an ErrorInfo marks the message as ours to show (describeError), and an
 * unexpected fault's message may carry internals.
 */
function carryStableCode(error: ConnectError): void {
  if (error.findDetails(ErrorInfoSchema).some((info) => info.domain === ERROR_DOMAIN)) return;
  const code = stableCodeOf(error);
  if (code !== "internal") error.details.push({ desc: ErrorInfoSchema, value: { reason: code, domain: ERROR_DOMAIN } });
}
