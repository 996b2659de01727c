import type { NoteEvent } from "../journal/index.ts";
import type { Sessions } from "../sessions/index.ts";
import type { WriteOp } from "../storage/index.ts";

/**
 * A run's events, written to its session's journal with the run's id (docs/events.md).
 *
 * `record` does not wait for the write: the journal numbers events in the order they are
 * recorded and the store commits them in that order, so the turn goes on while its notes are
 * synced, sharing fsyncs with whatever comes next. Watchers see an event only once it is
 * durable, and anything written after it (an operation's record, the run's last event) is
 * committed after it, so no one can observe a later event without the earlier ones.
 */
export class RunEvents {
  readonly #sessions: Sessions;
  readonly #sessionId: string;
  readonly #runId: string;
  #writes: Promise<unknown> = Promise.resolve();

  constructor(sessions: Sessions, sessionId: string, runId: string) {
    this.#sessions = sessions;
    this.#sessionId = sessionId;
    this.#runId = runId;
  }

  /**
   * Records the event, in one atomic batch with `records` (the turn's log), without waiting for
   * it to be durable; a failed write fails `written()`.
   */
  record(type: NoteEvent["type"], data: Record<string, unknown>, records: WriteOp[] = []): void {
    void this.#write(type, data, records);
  }

  /**
   * Records the event in one atomic batch with the run's own `records` (its record at the start
   * or the end), and waits until it, and every event recorded before it, is durable. Nothing
   * waits for the earlier events before this one is issued: the store commits them first, and
   * what a turn records at its end usually shares this batch.
   */
  async commit(type: NoteEvent["type"], data: Record<string, unknown>, records: WriteOp[]): Promise<void> {
    void this.#write(type, data, records);
    await this.written();
  }

  /** Resolves once every recorded event is durable; rejects if one could not be written. */
  async written(): Promise<void> {
    await this.#writes;
  }

  /** A writer of `assistant.delta` events for one model call. */
  deltas(round: number): DeltaWriter {
    return new DeltaWriter((text) => this.#write("assistant.delta", { round, text }, []));
  }

  #write(type: NoteEvent["type"], data: Record<string, unknown>, records: WriteOp[]): Promise<unknown> {
    const write = this.#sessions.note(this.#sessionId, { type, data: { runId: this.#runId, ...data } }, records);
    this.#writes = Promise.all([this.#writes, write]);
    // Handled here so a failure is not an unhandled rejection; written() still reports it.
    this.#writes.catch(() => undefined);
    return write;
  }
}

/**
 * Writes streamed text as `assistant.delta` events in order, one write in flight at a time:
 * text that arrives while a write is in flight is joined into the next event, so a fast stream
 * costs few journal writes and a slow one is seen as it comes.
 */
export class DeltaWriter {
  readonly #write: (text: string) => Promise<unknown>;
  #pending = "";
  #writing = false;
  #ended = false;

  constructor(write: (text: string) => Promise<unknown>) {
    this.#write = write;
  }

  push(text: string): void {
    if (text === "" || this.#ended) return;
    this.#pending += text;
    if (!this.#writing) this.#writeNext();
  }

  /**
   * Records what is left at once, behind a write still in flight (the journal keeps call order),
   * so that it comes before whatever the caller records next; the run's `written()` covers it.
   * Nothing is written after it, also when the stream failed: the turn's end must come last.
   */
  end(): void {
    this.#ended = true;
    if (this.#pending !== "") this.#writeNext();
  }

  #writeNext(): void {
    const text = this.#pending;
    this.#pending = "";
    this.#writing = true;
    // A failed write is reported by the run's written(); the text after it is still written.
    const next = () => {
      this.#writing = false;
      if (this.#pending !== "" && !this.#ended) this.#writeNext();
    };
    this.#write(text).then(next, next);
  }
}
