import type { NoteEvent } from "../journal/index.ts";
import type { Sessions } from "../sessions/index.ts";

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

  /** Records the event without waiting for it to be durable; a failed write fails `written()`. */
  record(type: NoteEvent["type"], data: Record<string, unknown>): void {
    const write = this.#sessions.note(this.#sessionId, { type, data: { runId: this.#runId, ...data } });
    this.#writes = Promise.all([this.#writes, write]);
    // Handled here so a failure is not an unhandled rejection; written() still reports it.
    this.#writes.catch(() => undefined);
  }

  /** Records the event and waits until it, and every event recorded before it, is durable. */
  async emit(type: NoteEvent["type"], data: Record<string, unknown>): Promise<void> {
    this.record(type, data);
    await this.written();
  }

  /** Resolves once every recorded event is durable; rejects if one could not be written. */
  async written(): Promise<void> {
    await this.#writes;
  }

  /** A writer of `assistant.delta` events for one model call. */
  deltas(round: number): DeltaWriter {
    return new DeltaWriter((text) => this.emit("assistant.delta", { round, text }));
  }
}

/**
 * Writes streamed text as `assistant.delta` events in order, one write at a time: text that
 * arrives while a write is in flight is joined into the next event, so a fast stream costs few
 * journal writes and a slow one is seen as it comes.
 */
export class DeltaWriter {
  readonly #write: (text: string) => Promise<void>;
  #pending = "";
  #writing: Promise<void> | undefined;

  constructor(write: (text: string) => Promise<void>) {
    this.#write = write;
  }

  push(text: string): void {
    if (text === "") return;
    this.#pending += text;
    this.#writing ??= this.#drain();
  }

  /** Resolves once every pushed text is written. */
  async flush(): Promise<void> {
    await this.#writing;
  }

  async #drain(): Promise<void> {
    try {
      while (this.#pending !== "") {
        const text = this.#pending;
        this.#pending = "";
        await this.#write(text);
      }
    } finally {
      this.#writing = undefined;
    }
  }
}
