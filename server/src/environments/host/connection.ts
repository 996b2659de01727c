import { create, fromJson, toJsonString, type JsonValue, type MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromMs, ValueSchema } from "@bufbuild/protobuf/wkt";
import { ServerMessageSchema, type HostReceipt, type ServerMessage } from "../../../../gen/skillenv/env/v1/host_pb.js";
import { newId } from "../../ids/index.ts";
import { failure, returned, unknown, type ExecuteOperation, type InterimReceipt, type TerminalReceipt } from "../port.ts";

/** Where a connection serves: a `host {}` environment of one session. */
export interface HostBindingKey {
  workspace: string;
  sessionId: string;
  environment: string;
}

export interface ConnectionLimits {
  /** Commands one connection may have in flight; more are refused with host_busy (nothing sent). */
  maxInFlight: number;
  /** Messages queued for a host that does not read; beyond, the connection is closed. */
  maxQueued: number;
}

/** A command sent and not yet answered. */
interface Pending {
  report(receipt: InterimReceipt): void;
  settle(receipt: TerminalReceipt): void;
  timer: NodeJS.Timeout;
}

/** Why a connection closes: the stable code the host gets in `closing`, and the words for people. */
export const CLOSE_REASONS = {
  replaced: "replaced by a newer connection of a host for this environment",
  not_reading: "the host does not read its command stream",
  stream_ended: "the host's stream ended",
  session_ended: "the session ended",
  session_deleted: "the session was deleted",
  shutting_down: "the server is shutting down",
} as const;

export type CloseCode = keyof typeof CLOSE_REASONS;

/** Receipts a host sends after the command ended (or that it was never sent) are refused. */
export type ReceiptVerdict = { taken: true } | { taken: false; reason: string };

/**
 * One open command stream of a host. It sends each command once, matches receipts to the
 * commands in flight, enforces their deadlines (a `timeout` failure and a cancel sent to the
 * host), and, when it closes for any reason, ends every command still in flight `unknown`:
 * the host may or may not have run it.
 */
export class HostConnection {
  /**
   * `<session id>.<hcn_ id>`: the session it serves first, so that with several replicas a
   * Report reaching any of them is forwarded to the session's owner, which holds the connection.
   */
  readonly id: string;
  readonly key: HostBindingKey;
  readonly #outgoing: { push(message: ServerMessage): boolean; close(): void };
  readonly #limits: ConnectionLimits;
  readonly #pending = new Map<string, Pending>();
  #closed = false;

  constructor(key: HostBindingKey, outgoing: { push(message: ServerMessage): boolean; close(): void }, limits: ConnectionLimits) {
    this.key = key;
    this.id = `${key.sessionId}.${newId("hcn")}`;
    this.#outgoing = outgoing;
    this.#limits = limits;
  }

  get closed(): boolean {
    return this.#closed;
  }

  get inFlight(): number {
    return this.#pending.size;
  }

  /** Queues a message for the host; a host whose queue is full is not reading, and is closed. */
  send(message: NonNullable<MessageInitShape<typeof ServerMessageSchema>["message"]>): boolean {
    if (this.#outgoing.push(create(ServerMessageSchema, { message }))) return true;
    if (!this.#closed) this.close("not_reading");
    return false;
  }

  dispatch(operation: ExecuteOperation): Promise<TerminalReceipt> {
    if (this.#closed) return Promise.resolve(failure("host_unavailable", "the host disconnected before the command was sent; nothing was sent", true));
    if (this.#pending.size >= this.#limits.maxInFlight) {
      return Promise.resolve(failure("host_busy", `the host has ${this.#limits.maxInFlight} commands in flight already; nothing was sent`, true));
    }
    if (!this.send({ case: "command", value: commandOf(this.key, operation) })) {
      // Never queued, so never sent: the host cannot have seen it.
      return Promise.resolve(failure("host_busy", "the host is not reading its command stream; nothing was sent", true));
    }
    return new Promise((resolve) => {
      const settle = (receipt: TerminalReceipt) => {
        const pending = this.#pending.get(operation.operationId);
        if (!pending) return;
        clearTimeout(pending.timer);
        this.#pending.delete(operation.operationId);
        resolve(receipt);
      };
      const timer = setTimeout(() => this.#timedOut(operation.operationId), Math.max(0, operation.deadlineMs - Date.now()));
      this.#pending.set(operation.operationId, { report: operation.report, settle, timer });
    });
  }

  /** Takes a receipt from the host for a command in flight on this connection. */
  receive(receipt: HostReceipt): ReceiptVerdict {
    const pending = this.#pending.get(receipt.operationId);
    if (!pending) return { taken: false, reason: "no command with this operation id is in flight on this connection" };
    const outcome = receiptOf(receipt);
    if (outcome === undefined) return { taken: false, reason: "the receipt has no outcome" };
    if (outcome.outcome === "accepted" || outcome.outcome === "progress") pending.report(outcome);
    else pending.settle(outcome);
    return { taken: true };
  }

  cancel(operationId: string): boolean {
    return this.#pending.has(operationId) && this.send({ case: "cancel", value: { operationId } });
  }

  /** Ends the stream; every command in flight ends unknown. */
  close(code: CloseCode): void {
    if (this.#closed) return;
    this.#closed = true;
    const reason = CLOSE_REASONS[code];
    for (const pending of [...this.#pending.values()])
      pending.settle(unknown(`the host connection closed after the command was sent (${reason}); the host may or may not have run it`));
    this.send({ case: "closing", value: { reason, code } });
    this.#outgoing.close();
  }

  #timedOut(operationId: string): void {
    const pending = this.#pending.get(operationId);
    if (!pending) return;
    this.send({ case: "cancel", value: { operationId } });
    pending.settle(failure("timeout", "the host did not answer before the deadline; a cancel was sent"));
  }
}

function commandOf(key: HostBindingKey, operation: ExecuteOperation) {
  return {
    operationId: operation.operationId,
    seq: BigInt(operation.seq),
    deadline: timestampFromMs(operation.deadlineMs),
    sessionId: key.sessionId,
    environment: key.environment,
    tool: operation.tool,
    input: fromJson(ValueSchema, JSON.parse(operation.input) as JsonValue),
    ...(operation.implementation === undefined ? {} : { implementation: fromJson(ValueSchema, operation.implementation as JsonValue) }),
    configuration: fromJson(ValueSchema, JSON.parse(operation.configuration) as JsonValue),
  };
}

function receiptOf(receipt: HostReceipt): InterimReceipt | TerminalReceipt | undefined {
  const { case: kind, value } = receipt.receipt;
  switch (kind) {
    case "accepted":
      return { outcome: "accepted" };
    case "progress":
      return { outcome: "progress", data: value.message };
    case "returned":
      return returned(value.output ? toJsonString(ValueSchema, value.output) : "null");
    case "failure":
      return failure(value.code || "tool_failed", value.message, value.retryable, Object.keys(value.details).length > 0 ? value.details : undefined);
    case undefined:
      return undefined;
  }
}
