import { ConnectError } from "@connectrpc/connect";
import { ErrorInfoSchema } from "../gen/google/rpc/error_details_pb.js";

/**
 * The service's stable error code (docs/errors.md, e.g. "session_not_found") of a refused call:
 * the server carries it as google.rpc.ErrorInfo.reason on every RPC protocol. Undefined for
 * errors that did not come from the service (a network failure, a client-side refusal).
 */
export function serviceErrorCode(error: unknown): string | undefined {
  if (!(error instanceof ConnectError)) return undefined;
  return error.findDetails(ErrorInfoSchema)[0]?.reason;
}
