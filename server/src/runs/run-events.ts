import type { NoteEvent } from "../journal/index.ts";
import type { Sessions } from "../sessions/index.ts";

/** A run's events, written to its session's journal with the run's id (docs/events.md). */
export class RunEvents {
  readonly #sessions: Sessions;
  readonly #sessionId: string;
  readonly #runId: string;

  constructor(sessions: Sessions, sessionId: string, runId: string) {
    this.#sessions = sessions;
    this.#sessionId = sessionId;
    this.#runId = runId;
  }

  async emit(type: NoteEvent["type"], data: Record<string, unknown>): Promise<void> {
    await this.#sessions.note(this.#sessionId, { type, data: { runId: this.#runId, ...data } });
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
