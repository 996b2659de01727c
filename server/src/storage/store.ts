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
 */
export interface Store {
  /** A named table of JSON values of type V; keys are strings. */
  table<V>(name: string): Table<V>;
  /** Applies every operation atomically and durably. */
  write(ops: readonly WriteOp[]): Promise<void>;
  close(): Promise<void>;
}

/** One operation of an atomic batch; build them with `Table.putOp` / `Table.deleteOp`. */
export type WriteOp =
  | { readonly type: "put"; readonly table: string; readonly key: string; readonly value: unknown }
  | { readonly type: "delete"; readonly table: string; readonly key: string };

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

/** The upper bound of a prefix range: every key that starts with `prefix` sorts below it. */
export function prefixEnd(prefix: string): string {
  return `${prefix}\uffff`;
}
