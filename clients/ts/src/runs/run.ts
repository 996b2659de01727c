import type { JsonValue } from "@bufbuild/protobuf";
import type { Client } from "@connectrpc/connect";
import type { Run as RunMessage, RunService } from "../../gen/skillenv/sessions/v1/runs_pb.js";
import type { EventsOptions, SessionEvent } from "../sessions/index.ts";
import { required } from "../sessions/wire.ts";
import { approvalRecordFrom, endsRun, runRecordFrom, type ApprovalRecord, type RunRecord, type RunStatus } from "./wire.ts";

export type RunRpc = Client<typeof RunService>;

/** Where a run's events come from: its session's journal. */
export interface RunEventSource {
  events(options: EventsOptions): AsyncIterable<SessionEvent>;
}

export interface WaitOptions {
  /** Stops waiting: iteration ends quietly, `result()` rejects with the signal's reason. */
  signal?: AbortSignal;
}

/** Who decides, as the caller names itself: recorded in `tool.approved` / `tool.denied` beside the key's workspace. */
export interface DecisionOptions {
  /** At most 256 characters, e.g. a person's name; not verified by the server. */
  label?: string;
}

export interface DenialOptions extends DecisionOptions {
  /** What the model receives as the tool's error result (at most 4096 characters); the server has a default. */
  message?: string;
}

/**
 * A handle on one run. `record` is what the server last answered (on submission, `refresh`,
 * `cancel` or `result`); the run's progress is its events. Refusals (another workspace's id,
 * deleting a running run) throw ConnectErrors carrying the service's stable code.
 */
export class Run {
  readonly id: string;
  readonly sessionId: string;
  readonly #rpc: RunRpc;
  readonly #session: RunEventSource;
  #record: RunRecord;
  /** Where reading the journal starts: just before the run's `run.submitted`, once it was seen. */
  #after = 0;

  constructor(rpc: RunRpc, session: RunEventSource, record: RunRecord) {
    this.id = record.id;
    this.sessionId = record.sessionId;
    this.#rpc = rpc;
    this.#session = session;
    this.#record = record;
  }

  get record(): RunRecord {
    return this.#record;
  }

  get status(): RunStatus {
    return this.#record.status;
  }

  /**
   * This run's events, in journal order, from its `run.submitted` to its last event
   * (`turn.completed`, `turn.failed` or `run.cancelled`), replayed and then live: the session's
   * events that carry this run's id, and the operation events of the operations it sent. Ends
   * early when the session is deleted or `signal` aborts.
   */
  async *events(options: WaitOptions = {}): AsyncIterable<SessionEvent> {
    // Our own signal closes the session's stream as soon as the run's last event is through.
    const done = new AbortController();
    const signal = options.signal ? AbortSignal.any([options.signal, done.signal]) : done.signal;
    const operations = new Set<string>();
    try {
      for await (const event of this.#session.events({ after: this.#after, signal })) {
        if (!this.#owns(event, operations)) continue;
        if (event.type === "run.submitted") this.#after = event.seq - 1;
        yield event;
        if (endsRun(event.type)) return;
      }
    } finally {
      done.abort();
    }
  }

  /**
   * Waits until the run has ended, then answers its final record: `status`, `outputText`,
   * `stopReason`, `usage`, `rounds`, `toolCalls` and, for a failed or cancelled run, `error`.
   * A failed run is a record too, not an exception.
   */
  async result(options: WaitOptions = {}): Promise<RunRecord> {
    if (this.#record.status !== "running") return this.#record;
    for await (const event of this.events(options)) if (endsRun(event.type)) break;
    options.signal?.throwIfAborted();
    return this.refresh();
  }

  /**
   * Stops the run: the model call is abandoned and the operations in flight are sent a cancel.
   * Answers once the run has ended; cancelling a finished run changes nothing.
   */
  async cancel(): Promise<RunRecord> {
    return this.#remember((await this.#rpc.cancelRun({ sessionId: this.sessionId, runId: this.id })).run);
  }

  /** The run's approvals, oldest first, pending and decided (docs/runs.md, "Approvals"). */
  async approvals(): Promise<ApprovalRecord[]> {
    const { approvals } = await this.#rpc.listApprovals({ sessionId: this.sessionId, runId: this.id });
    return approvals.map(approvalRecordFrom);
  }

  /**
   * The run's approvals waiting for a decision, as they come: those pending now, then each call
   * that asks for one while the run runs (from its `tool.approval_requested` events). Ends with the
   * run, or when `signal` aborts. One decided elsewhere after it was yielded is refused with
   * `approval_decided` when decided here.
   */
  async *pendingApprovals(options: WaitOptions = {}): AsyncIterable<ApprovalRecord> {
    const known = new Map((await this.approvals()).map((approval) => [approval.id, approval]));
    for (const approval of known.values()) if (approval.status === "pending") yield approval;
    for await (const event of this.events(options)) {
      if (event.type !== "tool.approval_requested") continue;
      const id = event.data.approvalId;
      if (typeof id !== "string" || known.has(id)) continue;
      const approval: ApprovalRecord = {
        id,
        runId: this.id,
        round: Number(event.data.round),
        callId: String(event.data.callId),
        tool: String(event.data.tool),
        input: (event.data.input ?? null) as JsonValue,
        status: "pending",
        requestedAt: event.at,
        decidedAt: undefined,
        decidedBy: undefined,
        message: "",
      };
      known.set(id, approval);
      yield approval;
    }
  }

  /** Lets a pending tool call be sent. Decided once: a second decision is refused (`approval_decided`), as is one after the run ended (`approval_expired`). */
  async approve(approval: ApprovalRecord | string, options: DecisionOptions = {}): Promise<ApprovalRecord> {
    const approvalId = typeof approval === "string" ? approval : approval.id;
    const { approval: decided } = await this.#rpc.approveToolCall({ sessionId: this.sessionId, runId: this.id, approvalId, label: options.label ?? "" });
    return approvalRecordFrom(required(decided, "the approval"));
  }

  /** Refuses a pending tool call: it is never sent, and the model receives `message` as the tool's error result (code `tool_call_denied`). Decided once, as `approve`. */
  async deny(approval: ApprovalRecord | string, options: DenialOptions = {}): Promise<ApprovalRecord> {
    const approvalId = typeof approval === "string" ? approval : approval.id;
    const request = { sessionId: this.sessionId, runId: this.id, approvalId, label: options.label ?? "", message: options.message ?? "" };
    return approvalRecordFrom(required((await this.#rpc.denyToolCall(request)).approval, "the approval"));
  }

  async refresh(): Promise<RunRecord> {
    return this.#remember((await this.#rpc.getRun({ sessionId: this.sessionId, runId: this.id })).run);
  }

  /** Removes a finished run, its part of the session's conversation and its skill snapshots. */
  async delete(): Promise<void> {
    await this.#rpc.deleteRun({ sessionId: this.sessionId, runId: this.id });
  }

  /** An event is the run's when it carries the run's id, or concerns an operation the run sent. */
  #owns(event: SessionEvent, operations: Set<string>): boolean {
    const { runId, operationId } = event.data;
    if (runId === this.id) {
      if (event.type === "operation.sent" && typeof operationId === "string") operations.add(operationId);
      return true;
    }
    return typeof operationId === "string" && operations.has(operationId);
  }

  #remember(message: RunMessage | undefined): RunRecord {
    this.#record = runRecordFrom(required(message, "the run"));
    return this.#record;
  }
}
