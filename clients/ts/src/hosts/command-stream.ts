import type { MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError, type Client } from "@connectrpc/connect";
import type { HostService, ConnectRequestSchema, HostReceiptSchema, ServerMessage } from "../../gen/skillenv/env/v1/host_pb.js";
import { reconnectDelay, sleep } from "./backoff.ts";
import type { HostStreaming } from "./streaming.ts";
import { Outbox } from "./outbox.ts";

export type HostRpc = Client<typeof HostService>;
export type ReceiptInit = MessageInitShape<typeof HostReceiptSchema>;

/** The binding a host serves: a `host` environment of one session. */
export interface Attachment {
  sessionId: string;
  environment: string;
}

/** One open command stream, in either form. */
export interface CommandStream {
  /** What the service says: `attached` first, then commands and cancels, until the stream ends. */
  readonly messages: AsyncIterable<ServerMessage>;
  /**
   * Sends a receipt. The receipts of one operation reach the service in the order sent. Best
   * effort: a receipt that cannot be delivered (on the server-streaming form, after a few
   * attempts for a terminal one) is dropped, and the service ends the operation itself (unknown
   * when the stream closed, timeout at the deadline).
   */
  send(receipt: ReceiptInit): void;
}

/** Opens the stream; it ends when the service ends it, the connection drops, or `signal` aborts. */
export function openCommandStream(rpc: HostRpc, streaming: HostStreaming, attachment: Attachment, signal: AbortSignal): CommandStream {
  return streaming === "bidirectional" ? bidirectional(rpc, attachment, signal) : serverStreaming(rpc, attachment, signal);
}

function bidirectional(rpc: HostRpc, attachment: Attachment, signal: AbortSignal): CommandStream {
  const outbox = new Outbox<MessageInitShape<typeof ConnectRequestSchema>>();
  outbox.push({ message: { case: "attach", value: attachment } });
  async function* messages(): AsyncGenerator<ServerMessage> {
    try {
      for await (const { message } of rpc.connect(outbox, { signal })) if (message) yield message;
    } finally {
      outbox.close();
    }
  }
  return { messages: messages(), send: (receipt) => outbox.push({ message: { case: "receipt", value: receipt } }) };
}

/** Commands on a server stream, receipts as unary Reports naming the connection the stream announced. */
function serverStreaming(rpc: HostRpc, attachment: Attachment, signal: AbortSignal): CommandStream {
  let connectionId = "";
  async function* messages(): AsyncGenerator<ServerMessage> {
    for await (const { message } of rpc.commands({ attach: attachment }, { signal })) {
      if (!message) continue;
      if (message.message.case === "attached") connectionId = message.message.value.connectionId;
      yield message;
    }
  }
  const inOrder = new OperationQueues();
  const send = (receipt: ReceiptInit) => inOrder.add(receipt.operationId ?? "", () => report(rpc, { connectionId, receipt }, signal));
  return { messages: messages(), send };
}

/** Attempts at delivering a terminal receipt, and the waits between them (jittered, doubling). */
const REPORT_ATTEMPTS = 4;
const REPORT_RETRY = { initialDelayMs: 100, maxDelayMs: 400 };
/** Failures after which a Report may not have reached the service; refusals are final. */
const UNDELIVERED = new Set([Code.Unavailable, Code.Unknown, Code.DeadlineExceeded, Code.ResourceExhausted]);

/**
 * Sends one Report. A terminal receipt carries the tool's result, so a Report that may not have
 * arrived is sent again while the stream is open: if the first did arrive, the service refuses
 * the copy (the operation has ended), and nothing is recorded twice. Accepted and progress are
 * sent once: a copy of one would be journaled twice.
 */
async function report(rpc: HostRpc, request: { connectionId: string; receipt: ReceiptInit }, signal: AbortSignal): Promise<void> {
  const terminal = request.receipt.receipt?.case === "returned" || request.receipt.receipt?.case === "failure";
  for (let attempt = 1; ; attempt++) {
    try {
      await rpc.report(request, { signal });
      return;
    } catch (error) {
      const undelivered = UNDELIVERED.has(ConnectError.from(error).code);
      if (!terminal || !undelivered || attempt >= REPORT_ATTEMPTS || signal.aborted) throw error;
      await sleep(reconnectDelay(attempt - 1, REPORT_RETRY), signal);
    }
  }
}

/**
 * Unary calls made one after another per operation, so that `accepted` cannot overtake
 * `returned`; different operations' calls run concurrently.
 */
class OperationQueues {
  readonly #tails = new Map<string, Promise<void>>();

  add(operationId: string, call: () => Promise<void>): void {
    // A failed report is dropped (see CommandStream.send); the next one is still tried.
    const tail = (this.#tails.get(operationId) ?? Promise.resolve()).then(call).catch(() => undefined);
    this.#tails.set(operationId, tail);
    void tail.then(() => {
      if (this.#tails.get(operationId) === tail) this.#tails.delete(operationId);
    });
  }
}
