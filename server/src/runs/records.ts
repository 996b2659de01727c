import type { ConversationMessage, Usage } from "../models/index.ts";
import type { RunModel } from "./submission.ts";
import { idFloor, isId } from "../ids/index.ts";
import { prefixEnd, readPage, type Page, type PageRequest, type Store, type Table, type WriteOp } from "../storage/index.ts";
import { ConversationCache } from "./conversation-cache.ts";
import { readTurnLog, TurnLog, type LoggedTurn, type TurnLogEntry } from "./turn-log.ts";

export type RunStatus = "running" | "completed" | "failed" | "cancelled";

/** A run as stored. Provider keys are never part of it. */
export interface RunRecord {
  id: string;
  sessionId: string;
  workspace: string;
  status: RunStatus;
  model: RunModel;
  /** `version`: the version used (0 or absent: before versions were kept); `pinned`: only when the submission pinned it. */
  skills: Array<{ name: string; contentHash: string; description: string; version?: number; pinned?: true }>;
  createdAt: string;
  finishedAt?: string;
  usage: Usage;
  stopReason?: string;
  rounds: number;
  toolCalls: number;
  outputText: string;
  error?: RunFailure;
  idempotencyHash: string;
  idempotencyKey?: string;
}

/** Why a run did not complete. `retryable` and `details` come from the model's failures (docs/models.md). */
export interface RunFailure {
  code: string;
  message: string;
  /** Submitting the run again later may succeed (a rate limit, an overloaded or unavailable provider). */
  retryable?: boolean;
  details?: Record<string, string>;
}

/** Runs started since a time, by status (workspaceRuns). */
export interface RunStatusCounts {
  counts: Record<RunStatus, number>;
  /** More runs started in the window than were counted: the counts are the newest `limit`. */
  truncated: boolean;
}

/** Where a run's record is, for the indexes that know only its id. */
interface RunLocation {
  workspace: string;
  sessionId: string;
}

/**
 * Runs keyed `<workspace>/<sessionId>/<runId>` (newest last, as ids sort by time); each session's
 * idempotency keys; the conversation each run added to its session (the latest sessions' kept in
 * memory too: ConversationCache); the runs that are running, so that a restart can mark them
 * failed; and each workspace's runs by id, so by start time, with their status (what the
 * workspace's status counts without reading its sessions' runs).
 */
export class RunRecords {
  readonly #store: Store;
  readonly #runs: Table<RunRecord>;
  readonly #keys: Table<string>;
  readonly #conversations: Table<ConversationMessage[]>;
  readonly #active: Table<RunLocation>;
  /** Finished runs keyed `<finishedAt>/<runId>`, for retention cleanup in time order. */
  readonly #finished: Table<RunLocation>;
  /** What running turns have done so far (TurnLog). */
  readonly #turnLogs: Table<TurnLogEntry>;
  /**
   * Every run's status keyed `<workspace>/<runId>`, written in the batches that write the run's
   * record, so it never disagrees with it. Runs recorded before the index existed are not in it.
   */
  readonly #workspaceRuns: Table<RunStatus>;
  readonly #cache = new ConversationCache();

  constructor(store: Store) {
    this.#store = store;
    this.#runs = store.table<RunRecord>("runs");
    this.#keys = store.table<string>("run-idempotency-keys");
    this.#conversations = store.table<ConversationMessage[]>("conversations");
    this.#active = store.table<RunLocation>("active-runs");
    this.#finished = store.table<RunLocation>("finished-runs");
    this.#turnLogs = store.table<TurnLogEntry>("turn-logs");
    this.#workspaceRuns = store.table<RunStatus>("workspace-runs");
  }

  /** The log of a run's turn, which the turn writes with its events; `logged`: what it continues (a resumed run). */
  turnLog(record: RunRecord, logged?: LoggedTurn): TurnLog {
    return new TurnLog(this.#turnLogs, record.sessionId, record.id, logged);
  }

  /** What an interrupted run's turn had logged, and the operations that remove the log. */
  readTurnLog(record: RunRecord): Promise<{ logged: LoggedTurn; clearOps: WriteOp[] }> {
    return readTurnLog(this.#turnLogs, record.sessionId, record.id);
  }

  get(workspace: string, sessionId: string, runId: string): Promise<RunRecord | undefined> {
    return this.#runs.get(runKey(workspace, sessionId, runId));
  }

  /** The run an idempotency key of the session names, if any. */
  async byIdempotencyKey(workspace: string, sessionId: string, key: string): Promise<RunRecord | undefined> {
    const runId = await this.#keys.get(runKey(workspace, sessionId, key));
    return runId === undefined ? undefined : this.get(workspace, sessionId, runId);
  }

  /**
   * What stores a new running run, its idempotency key and its place among the active runs: one
   * atomic batch, written by the caller with the run's first event.
   */
  startOps(record: RunRecord): WriteOp[] {
    const ops = [
      this.#runs.putOp(runKey(record.workspace, record.sessionId, record.id), record),
      this.#active.putOp(record.id, { workspace: record.workspace, sessionId: record.sessionId }),
      this.#workspaceRuns.putOp(workspaceRunKey(record), record.status),
    ];
    if (record.idempotencyKey) ops.push(this.#keys.putOp(runKey(record.workspace, record.sessionId, record.idempotencyKey), record.id));
    return ops;
  }

  /**
   * Stores a finished run with the conversation it added and forgets it as active, in one atomic
   * batch that `commit` writes (with the run's last event) with `extra` (its turn log's removal).
   */
  async finish(record: RunRecord, conversation: ConversationMessage[], commit: (ops: WriteOp[]) => Promise<void>, extra: WriteOp[] = []): Promise<void> {
    const location = { workspace: record.workspace, sessionId: record.sessionId };
    const ops = [
      ...extra,
      this.#runs.putOp(runKey(record.workspace, record.sessionId, record.id), record),
      this.#conversations.putOp(`${record.sessionId}/${record.id}`, conversation),
      this.#active.deleteOp(record.id),
      this.#finished.putOp(`${record.finishedAt}/${record.id}`, location),
      this.#workspaceRuns.putOp(workspaceRunKey(record), record.status),
    ];
    try {
      await commit(ops);
    } catch (error) {
      // Whether it was written is not known.
      this.#cache.forget(record.sessionId);
      throw error;
    }
    this.#cache.extend(record.sessionId, conversation);
  }

  delete(record: RunRecord): Promise<void> {
    this.#cache.forget(record.sessionId);
    const ops = [
      this.#runs.deleteOp(runKey(record.workspace, record.sessionId, record.id)),
      this.#conversations.deleteOp(`${record.sessionId}/${record.id}`),
      this.#finished.deleteOp(`${record.finishedAt}/${record.id}`),
      this.#workspaceRuns.deleteOp(workspaceRunKey(record)),
    ];
    if (record.idempotencyKey) ops.push(this.#keys.deleteOp(runKey(record.workspace, record.sessionId, record.idempotencyKey)));
    return this.#store.write(ops);
  }

  /** A page of the session's runs, newest first; a page token carries the last id. */
  page(workspace: string, sessionId: string, request: PageRequest, maxBytes: number): Promise<Page<RunRecord>> {
    return readPage(this.#runs, request, { prefix: `${workspace}/${sessionId}/`, reverse: true, isCursor: (id) => isId("run", id), maxBytes });
  }

  /** Every run of the session, oldest first (for deleting a session's runs). */
  all(workspace: string, sessionId: string): Promise<RunRecord[]> {
    const prefix = `${workspace}/${sessionId}/`;
    return this.#runs.values({ gt: prefix, lt: prefixEnd(prefix) });
  }

  /** The session's conversation so far: every finished run's messages, in run order. Callers must not change it. */
  async conversation(sessionId: string): Promise<readonly ConversationMessage[]> {
    const cached = this.#cache.get(sessionId);
    if (cached) return cached;
    const readStarted = this.#cache.readStarted();
    const prefix = `${sessionId}/`;
    const messages = (await this.#conversations.values({ gt: prefix, lt: prefixEnd(prefix) })).flat();
    this.#cache.keep(sessionId, messages, readStarted);
    return messages;
  }

  /** The id of every recorded run (running or finished): what start-up keeps snapshots of. */
  async ids(): Promise<Set<string>> {
    const running = await this.#active.entries({});
    const finished = await this.#finished.entries({});
    return new Set([...running.map(([id]) => id), ...finished.map(([key]) => key.slice(key.lastIndexOf("/") + 1))]);
  }

  /**
   * The workspace's runs started at `since` (epoch ms) or later, by status: one range read of the
   * index, newest first, of at most `limit` entries (a few bytes each), whatever the workspace
   * stored before.
   */
  async startedSince(workspace: string, since: number, limit: number): Promise<RunStatusCounts> {
    const prefix = `${workspace}/`;
    const statuses = await this.#workspaceRuns.values({ gte: `${prefix}${idFloor("run", since)}`, lt: prefixEnd(prefix), reverse: true, limit: limit + 1 });
    const counts: Record<RunStatus, number> = { running: 0, completed: 0, failed: 0, cancelled: 0 };
    for (const status of statuses.slice(0, limit)) counts[status]++;
    return { counts, truncated: statuses.length > limit };
  }

  /** Runs that were running when the process stopped. */
  async interrupted(): Promise<RunRecord[]> {
    const active = await this.#active.entries({});
    const records = await Promise.all(active.map(([id, { workspace, sessionId }]) => this.get(workspace, sessionId, id)));
    return records.filter((record) => record !== undefined);
  }

  /** Up to `limit` runs that finished before `before` (ISO time), oldest first. */
  async finishedBefore(before: string, limit: number): Promise<RunRecord[]> {
    const expired = await this.#finished.entries({ lt: before, limit });
    const records = await Promise.all(expired.map(([key, { workspace, sessionId }]) => this.get(workspace, sessionId, key.slice(key.lastIndexOf("/") + 1))));
    return records.filter((record) => record !== undefined);
  }
}

function workspaceRunKey(record: RunRecord): string {
  return `${record.workspace}/${record.id}`;
}

function runKey(workspace: string, sessionId: string, id: string): string {
  return `${workspace}/${sessionId}/${id}`;
}
