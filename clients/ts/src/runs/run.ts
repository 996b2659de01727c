import type { Client } from "@connectrpc/connect";
import type { Run as RunMessage, RunService } from "../../gen/skillenv/sessions/v1/runs_pb.js";
import type { EventsOptions, SessionEvent } from "../sessions/index.ts";
import { required } from "../sessions/wire.ts";
import { endsRun, runRecordFrom, type RunRecord, type RunStatus } from "./wire.ts";

export type RunRpc = Client<typeof RunService>;

/** Where a run's events come from: its session's journal. */
export interface RunEventSource {
  events(options: EventsOptions): AsyncIterable<SessionEvent>;
}

export interface WaitOptions {
  /** Stops waiting: iteration ends quietly, `result()` rejects with the signal's reason. */
  signal?: AbortSignal;
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
