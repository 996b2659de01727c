import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { Attach, ConnectRequest, HostReceipt, HostService, ServerMessage } from "../../../../gen/skillenv/env/v1/host_pb.js";
import { requireWorkspace } from "../../auth/index.ts";
import { serviceError } from "../../errors/index.ts";
import type { Channel } from "./channel.ts";
import type { HostBindingKey, HostConnection } from "./connection.ts";
import type { HostHub } from "./hub.ts";
import { echoedOperationId, RefusalLog, type HostLog } from "./refusal-log.ts";

/** Checks that the workspace's session binds `environment` as a host environment; throws service errors. */
export type CheckHostBinding = (key: HostBindingKey) => Promise<void>;

export type { HostLog };

export interface HostServiceOptions {
  /** SERVICE_LOG_HOST_REFUSALS_PER_MIN: refused receipts logged per workspace and minute. */
  refusalsLoggedPerMinute: number;
}

/**
 * The HostService RPCs: the bidirectional command stream, and its browser form (a
 * server-streaming Commands plus unary Reports). Both run on the same hub and connections.
 */
export function createHostService(hub: HostHub, checkBinding: CheckHostBinding, log: HostLog, options: HostServiceOptions): ServiceImpl<typeof HostService> {
  const refusals = new RefusalLog(log, options.refusalsLoggedPerMinute);
  async function attach(attachment: Attach | undefined, context: HandlerContext) {
    if (!attachment) throw serviceError("invalid_argument", "the first message must be attach {session_id, environment}");
    const key = { workspace: requireWorkspace(context), sessionId: attachment.sessionId, environment: attachment.environment };
    await checkBinding(key);
    return hub.attach(key);
  }

  function take(connection: HostConnection, receipt: HostReceipt | undefined): string | undefined {
    if (!receipt) return "the message carries no receipt";
    const verdict = connection.receive(receipt);
    if (verdict.taken) return undefined;
    refusals.refused({ ...connection.key, operationId: receipt.operationId, reason: verdict.reason });
    return verdict.reason;
  }

  return {
    async *connect(requests, context) {
      const incoming = requests[Symbol.asyncIterator]();
      const first = await incoming.next();
      const message = first.done ? undefined : first.value.message;
      const { connection, outgoing } = await attach(message?.case === "attach" ? message.value : undefined, context);
      void readReceipts(incoming, connection, take).finally(() => hub.release(connection, "stream_ended"));
      yield* serve(connection, outgoing, context, hub);
    },

    async *commands(request, context) {
      const { connection, outgoing } = await attach(request.attach, context);
      yield* serve(connection, outgoing, context, hub);
    },

    async report(request, context) {
      const connection = hub.byId(request.connectionId);
      if (!connection || connection.key.workspace !== requireWorkspace(context)) {
        throw serviceError("host_connection_not_found", "no open host connection has that id; open Commands again");
      }
      const refused = take(connection, request.receipt);
      if (refused) throw serviceError("operation_not_found", refused);
      return {};
    },
  };
}

/** The stream's messages: Attached first, then whatever the connection queues, until it closes. */
async function* serve(connection: HostConnection, outgoing: Channel<ServerMessage>, context: HandlerContext, hub: HostHub) {
  const onAbort = () => hub.release(connection, "stream_ended");
  context.signal.addEventListener("abort", onAbort, { once: true });
  try {
    yield { message: { message: { case: "attached" as const, value: { connectionId: connection.id } } } };
    for await (const message of outgoing) yield { message };
  } finally {
    context.signal.removeEventListener("abort", onAbort);
    hub.release(connection, "stream_ended");
  }
}

/** Feeds the host's receipts to the connection; a refused one is answered on the stream. */
async function readReceipts(
  incoming: AsyncIterator<ConnectRequest>,
  connection: HostConnection,
  take: (connection: HostConnection, receipt: HostReceipt | undefined) => string | undefined,
) {
  try {
    for (let next = await incoming.next(); !next.done; next = await incoming.next()) {
      const { message } = next.value;
      const receipt = message.case === "receipt" ? message.value : undefined;
      const refused = take(connection, receipt);
      if (refused) connection.send({ case: "refused", value: { operationId: echoedOperationId(receipt?.operationId ?? ""), reason: refused } });
    }
  } catch {
    // The stream broke; release() below ends the commands in flight unknown.
  }
}
