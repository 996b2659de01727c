import type { InterimReceipt, TerminalReceipt } from "../environments/port.ts";
import { serviceError } from "../errors/index.ts";
import { prefixEnd, WriteConflict, type Store, type Table, type WriteOp } from "../storage/index.ts";
import { inSpan } from "../tracing/index.ts";
import type { EventBody, JournalEvent, NoteEvent, SentOperation } from "./events.ts";

/** An operation sent and not yet settled, as the journal keeps it until its receipt. */
interface OpenOperation {
  sessionId: string;
  operation: SentOperation;
}

/** In-memory state of one session's journal in this process. */
interface SessionLog {
  nextSeq: number;
  readonly listeners: Set<Listener>;
}

type Listener = (event: JournalEvent | "removed" | "moved") => void;

/**
 * How the journal's writes are fenced on a shared store (server/src/replicas): the conditions
 * every write of a session carries, and, when one failed, whether this process lost the session.
 */
export interface JournalFence {
  conditions(sessionId: string): WriteOp[];
  /** After a WriteConflict: true when the session's fence changed (another replica owns it now). */
  lost(sessionId: string): Promise<boolean>;
}

export interface WatchOptions {
  signal?: AbortSignal;
  /** The stream ends after delivering an event for which this returns true. */
  until?: (event: JournalEvent) => boolean;
}

const SEQ_DIGITS = 12;
const PAGE = 500;
/** Live events a watcher may fall behind by before it catches up from storage instead. */
const MAX_LIVE_BACKLOG = 1000;

/**
 * Each session's ordered, durable record of what happened: every environment operation before it
 * is sent (`operation.sent`), its interim and terminal receipts, and the notes sessions and runs
 * add. The journal is the only writer of operation records. An operation's `sent` record and the
 * entry in the open-operations table are written in one atomic batch, and so are its receipt and
 * the removal of that entry, so after a crash `recover()` finds exactly the operations that have
 * no terminal receipt and gives each one `unknown` receipt. Nothing is ever replayed.
 */
export class Journal {
  readonly #store: Store;
  readonly #events: Table<JournalEvent>;
  readonly #open: Table<OpenOperation>;
  /** Logs being loaded or loaded; `#loaded` holds the same logs once they are in memory. */
  readonly #logs = new Map<string, Promise<SessionLog>>();
  readonly #loaded = new Map<string, SessionLog>();
  readonly #fence: JournalFence | undefined;

  constructor(store: Store, fence?: JournalFence) {
    this.#store = store;
    this.#fence = fence;
    this.#events = store.table<JournalEvent>("journal");
    this.#open = store.table<OpenOperation>("open-operations");
  }

  /** Appends a note; `extra` operations (the caller's own records) commit in the same atomic batch. */
  append(sessionId: string, note: NoteEvent, extra: WriteOp[] = []): Promise<JournalEvent> {
    return this.#append(sessionId, note, extra);
  }

  /** Records an operation as sent; call it before dispatching, and dispatch only once it resolved. */
  send(sessionId: string, operation: SentOperation): Promise<JournalEvent> {
    const open: OpenOperation = { sessionId, operation };
    return this.#append(sessionId, { type: "operation.sent", operation }, [this.#open.putOp(openKey(sessionId, operation.operationId), open)]);
  }

  interim(sessionId: string, operation: SentOperation, receipt: InterimReceipt): Promise<JournalEvent> {
    const { operationId } = operation;
    const onBehalf = operation.runId ? { runId: operation.runId } : {};
    const body: EventBody =
      receipt.outcome === "accepted"
        ? { type: "operation.accepted", operationId, ...onBehalf }
        : { type: "operation.progress", operationId, data: receipt.data, ...onBehalf };
    return this.#append(sessionId, body);
  }

  /** Records the operation's one terminal receipt. */
  settle(sessionId: string, operation: SentOperation, receipt: TerminalReceipt): Promise<JournalEvent> {
    const body: EventBody = {
      type: "operation.receipt",
      operationId: operation.operationId,
      environment: operation.environment,
      kind: operation.kind,
      receipt,
      ...(operation.runId ? { runId: operation.runId } : {}),
    };
    return this.#append(sessionId, body, [this.#open.deleteOp(openKey(sessionId, operation.operationId))]);
  }

  /** Up to `limit` events with seq > after, in order. */
  async read(sessionId: string, after: number, limit = PAGE): Promise<JournalEvent[]> {
    return this.#events.values({ gt: eventKey(sessionId, after), lt: prefixEnd(`${sessionId}/`), limit });
  }

  /** The session's latest event. */
  async last(sessionId: string): Promise<JournalEvent | undefined> {
    const prefix = `${sessionId}/`;
    const [event] = await this.#events.values({ gte: prefix, lt: prefixEnd(prefix), reverse: true, limit: 1 });
    return event;
  }

  /**
   * The session's events after `after`, then live ones as they are written, until the signal
   * aborts, `until` accepts an event, or the session's journal is removed. A watcher that falls
   * far behind drops its live backlog and catches up from storage, so a slow reader costs
   * bounded memory.
   */
  async *watch(sessionId: string, after: number, options: WatchOptions = {}): AsyncGenerator<JournalEvent> {
    const log = await this.#log(sessionId);
    let backlog: JournalEvent[] = [];
    let behind = false;
    let removed = false;
    let moved = false;
    let wake: (() => void) | undefined;
    const listener: Listener = (event) => {
      if (event === "removed") removed = true;
      else if (event === "moved") moved = true;
      else if (backlog.length < MAX_LIVE_BACKLOG) backlog.push(event);
      else behind = true;
      wake?.();
    };
    const onAbort = () => wake?.();
    log.listeners.add(listener);
    options.signal?.addEventListener("abort", onAbort);
    try {
      let last = after;
      for (;;) {
        let caughtUp = true;
        if (behind || backlog.length === 0 || backlog[0]!.seq > last + 1) {
          behind = false;
          backlog = [];
          const page = await this.read(sessionId, last);
          caughtUp = page.length < PAGE;
          backlog = [...page, ...backlog];
        }
        while (backlog.length > 0) {
          const event = backlog.shift()!;
          if (event.seq <= last) continue;
          last = event.seq;
          yield event;
          if (options.until?.(event)) return;
        }
        if (!caughtUp) continue;
        if (removed || options.signal?.aborted) return;
        if (moved) throw movedError(sessionId);
        await new Promise<void>((resolve) => (wake = resolve));
        wake = undefined;
        if (removed || options.signal?.aborted) return;
      }
    } finally {
      log.listeners.delete(listener);
      options.signal?.removeEventListener("abort", onAbort);
    }
  }

  /** Deletes the session's events and open operations; live watchers end. */
  async remove(sessionId: string): Promise<void> {
    const prefix = `${sessionId}/`;
    for (const table of [this.#events, this.#open] as Table<unknown>[]) {
      for (;;) {
        const entries = await table.entries({ gte: prefix, lt: prefixEnd(prefix), limit: 1000 });
        if (entries.length === 0) break;
        await this.#store.write(entries.map(([key]) => table.deleteOp(key)));
      }
    }
    const log = await this.#logs.get(sessionId);
    this.#logs.delete(sessionId);
    this.#loaded.delete(sessionId);
    for (const listener of log?.listeners ?? []) listener("removed");
  }

  /** The sessions that have operations without a terminal receipt (a replica's sweep takes them over). */
  async sessionsWithOpenOperations(): Promise<Set<string>> {
    const keys = await this.#open.entries({});
    return new Set(keys.map(([key]) => key.slice(0, key.indexOf("/"))));
  }

  /**
   * Forgets what this process held of the session's log (its next seq): another replica owns it
   * now, or has owned it meanwhile. Live watchers here end with `session_moved`.
   */
  forget(sessionId: string): void {
    const log = this.#loaded.get(sessionId);
    this.#logs.delete(sessionId);
    this.#loaded.delete(sessionId);
    for (const listener of log?.listeners ?? []) listener("moved");
  }

  /**
   * After a restart (or a takeover, for one session): every operation that was sent and has no terminal receipt gets exactly one
   * `unknown` receipt (it may or may not have taken effect). Returns those receipts.
   */
  async recover(sessionId?: string): Promise<Array<{ sessionId: string; event: JournalEvent }>> {
    const written: Array<{ sessionId: string; event: JournalEvent }> = [];
    const range = sessionId === undefined ? {} : { gte: `${sessionId}/`, lt: prefixEnd(`${sessionId}/`) };
    for (const open of await this.#open.values(range)) {
      const receipt: TerminalReceipt = {
        outcome: "unknown",
        message: "the server stopped while the operation was in flight; it may or may not have taken effect",
      };
      written.push({ sessionId: open.sessionId, event: await this.settle(open.sessionId, open.operation, receipt) });
    }
    return written;
  }

  /**
   * Seq numbers are taken and the write is issued synchronously, in the caller's turn, once the
   * session's log is loaded: the store keeps call order, so seq order is commit order and call
   * order, and writes issued together can share a batch. While the log loads, appends wait for
   * it in call order (their callbacks run right after the one that marks it loaded).
   */
  #append(sessionId: string, body: EventBody, extra: WriteOp[] = []): Promise<JournalEvent> {
    const log = this.#loaded.get(sessionId);
    if (log) return this.#write(sessionId, log, body, extra);
    return this.#log(sessionId).then((loaded) => this.#write(sessionId, loaded, body, extra));
  }

  async #write(sessionId: string, log: SessionLog, body: EventBody, extra: WriteOp[]): Promise<JournalEvent> {
    const fence = this.#fence?.conditions(sessionId) ?? [];
    const event = { seq: log.nextSeq++, at: new Date().toISOString(), ...body } as JournalEvent;
    try {
      // Issued in the caller's turn still (the span's work starts synchronously): see #append.
      await inSpan("journal write", { "skillenv.session.id": sessionId, "skillenv.journal.seq": event.seq, "skillenv.journal.event": event.type }, () =>
        this.#store.write([...fence, this.#events.putOp(eventKey(sessionId, event.seq), event), ...extra]),
      );
    } catch (error) {
      if (error instanceof WriteConflict && fence.length > 0 && (await this.#fence!.lost(sessionId))) throw movedError(sessionId);
      throw error;
    }
    for (const listener of log.listeners) listener(event);
    return event;
  }

  #log(sessionId: string): Promise<SessionLog> {
    let log = this.#logs.get(sessionId);
    if (!log) {
      log = this.#loadLog(sessionId);
      this.#logs.set(sessionId, log);
      // Registered before any append waits on the load, so it runs first (see #append).
      log.then(
        (loaded) => {
          if (this.#logs.get(sessionId) === log) this.#loaded.set(sessionId, loaded);
        },
        () => this.#logs.delete(sessionId),
      );
    }
    return log;
  }

  async #loadLog(sessionId: string): Promise<SessionLog> {
    const last = await this.last(sessionId);
    return { nextSeq: (last?.seq ?? 0) + 1, listeners: new Set() };
  }
}

function movedError(sessionId: string): Error {
  return serviceError("session_moved", `session ${sessionId} is served by another replica now; nothing more is written here, retry the call`);
}

function eventKey(sessionId: string, seq: number): string {
  return `${sessionId}/${String(seq).padStart(SEQ_DIGITS, "0")}`;
}

function openKey(sessionId: string, operationId: string): string {
  return `${sessionId}/${operationId}`;
}
