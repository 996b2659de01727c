import { Code, ConnectError } from "@connectrpc/connect";
import type { Run as RunMessage } from "../../gen/skillenv/sessions/v1/runs_pb.js";
import { serviceErrorCode } from "../service-error.ts";
import type { RunRpc } from "./run.ts";
import type { RunSubmission } from "./submission.ts";

/** The codes transports give a call whose answer never arrived: a refused or reset connection, a broken stream. */
const LOST_IN_TRANSPORT: ReadonlySet<Code> = new Set([Code.Unavailable, Code.Aborted, Code.Internal, Code.Unknown]);

/**
 * CreateRun, tried once more when its answer was lost on the way. The submission's idempotency
 * key makes that safe: had the first try started the run, the second answers that run instead
 * of starting another.
 */
export async function submitRun(rpc: RunRpc, sessionId: string, run: RunSubmission): Promise<RunMessage | undefined> {
  const submit = async () => (await rpc.createRun({ sessionId, run })).run;
  try {
    return await submit();
  } catch (error) {
    if (!lostInTransport(error)) throw error;
    return submit();
  }
}

/** The service answers every refusal with its stable code; a failure without one never reached an answer. */
function lostInTransport(error: unknown): boolean {
  return error instanceof ConnectError && LOST_IN_TRANSPORT.has(error.code) && serviceErrorCode(error) === undefined;
}
