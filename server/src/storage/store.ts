/**
 * The metadata store's port: what features need from a database, and nothing more. Features
 * (skills, assets, artifacts, sessions, the journal) hold `Table`s and never see LevelDB; the
 * embedded adapter is `LevelStore`. A second adapter (a shared database for several replicas)
 * must give the same guarantees, listed in docs/operations.md:
 *
 * - **Durable before acknowledged**: a write whose promise resolved survives `kill -9` of the
 *   process and a power cut.
 * - **Atomic batches**: every operation of one `write` is visible, or none is.
 * - **Ordered**: writes become visible in the order `write` was called; a read that starts
 *   after a write resolved sees it.
 * - **Ordered ranges**: keys compare by their UTF-8 bytes, the order range reads return.
 * - **Bounded pages**: `page` holds at most one value beyond its byte budget in memory, however
 *   large the values of the range are.
 * - **Conditional writes**: a batch may hold `expect` operations (`Table.expectOp`); it applies
 *   only when every expected key holds exactly the expected value (compared as the JSON text
 *   `putOp` stores) or is absent when `undefined` is expected, checked atomically with the
 *   batch's writes, across every process sharing the store. Otherwise `write` rejects with
 *   `WriteConflict` and applies nothing of that batch (other batches are unaffected). This is how
 *   a read-modify-write stays correct with several writers: read, compute, write with the read
 *   value expected, and on `WriteConflict` read again (`updateRecord` does that loop).
 */
export interface Store {
  /** A named table of JSON values of type V; keys are strings. */
  table<V>(name: string): Table<V>;
  /** Applies every operation atomically and durably. */
  write(ops: readonly WriteOp[]): Promise<void>;
  /** Told of every group committed (one synced batch, or one transaction): how many writes and operations it held, and how long it took. */
  observeCommits(observer: CommitObserver): void;
  close(): Promise<void>;
}

/** What a committed group was: `writes` (callers' batches), `ops` (their operations), `seconds` from start to durable. */
export type CommitObserver = (group: { writes: number; ops: number; seconds: number }) => void;

/** One operation of an atomic batch; build them with `Table.putOp` / `Table.deleteOp`. */
export type WriteOp =
  | { readonly type: "put"; readonly table: string; readonly key: string; readonly value: unknown }
  | { readonly type: "delete"; readonly table: string; readonly key: string }
  /** A condition, not a write: `value` is the JSON text the key must hold, undefined for "absent". */
  | { readonly type: "expect"; readonly table: string; readonly key: string; readonly value: string | undefined };

/** Bounds of a range read; at most one lower and one upper bound. */
export interface KeyRange {
  gt?: string;
  gte?: string;
  lt?: string;
  lte?: string;
  /** Largest key first. */
  reverse?: boolean;
  /** At most this many entries; all when omitted. */
  limit?: number;
}

export interface Table<V> {
  readonly name: string;
  get(key: string): Promise<V | undefined>;
  put(key: string, value: V): Promise<void>;
  delete(key: string): Promise<void>;
  /** Entries in key order (or reverse). */
  entries(range: KeyRange): Promise<Array<[key: string, value: V]>>;
  values(range: KeyRange): Promise<V[]>;
  /**
   * Entries in key order (or reverse), at most `range.limit`, ending early before the first entry
   * whose value would bring the values returned past `maxBytes` (their JSON text, as UTF-8);
   * the first entry always comes, whatever its size. `more` says whether the range holds
   * entries beyond the last one returned.
   */
  page(range: KeyRange & { limit: number }, maxBytes: number): Promise<TablePage<V>>;
  putOp(key: string, value: V): WriteOp;
  deleteOp(key: string): WriteOp;
  /** A condition of a batch: the key holds exactly `value` (as last read), or is absent when undefined. */
  expectOp(key: string, value: V | undefined): WriteOp;
}

/**
 * The batch operations of a table, the same for every adapter. Values are encoded here, so a
 * value that is not JSON fails its caller, not the group its write would have joined; a condition
 * holds the same JSON text that `putOp` would store.
 */
export abstract class TableOps<V> {
  abstract readonly name: string;

  putOp(key: string, value: V): WriteOp {
    return { type: "put", table: this.name, key, value: JSON.stringify(value) };
  }

  deleteOp(key: string): WriteOp {
    return { type: "delete", table: this.name, key };
  }

  expectOp(key: string, value: V | undefined): WriteOp {
    return { type: "expect", table: this.name, key, value: value === undefined ? undefined : JSON.stringify(value) };
  }
}

/** What `Table.page` read. */
export interface TablePage<V> {
  entries: Array<[key: string, value: V]>;
  more: boolean;
}

/**
 * A storage failure (disk full, I/O error, a closed database). Features let it through; the
 * API edge reports it as `storage_unavailable` without the database's internals.
 */
export class StorageError extends Error {
  override name = "StorageError";
}

/** A StorageError saying what failed and the cause's code (an errno, a SQLSTATE), never the cause's message. */
export function storageError(what: "read" | "write" | "connection", cause: unknown): StorageError {
  const code = (cause as { code?: unknown } | null)?.code;
  return new StorageError(`metadata ${what} failed${typeof code === "string" ? ` (${code})` : ""}`, { cause });
}

/**
 * A conditional batch found a key changed since it was read (by this process or another);
 * nothing of the batch was applied. Read again and retry, or report the conflict.
 */
export class WriteConflict extends Error {
  override name = "WriteConflict";
}

/** The upper bound of a prefix range: every key that starts with `prefix` sorts below it. */
export function prefixEnd(prefix: string): string {
  return `${prefix}\uffff`;
}
