import { createHash } from "node:crypto";
import pg from "pg";
import { admit, GroupCommit, slot, type PendingWrite } from "./group-conditions.ts";
import { migrate, UnusableDatabase } from "./postgres-migrations.ts";
import { StorageError, storageError, TableOps, type KeyRange, type Store, type Table, type TablePage, type CommitObserver, type WriteOp } from "./store.ts";

/** Connections per store: one for the writer, the rest for reads running at once. */
const DEFAULT_POOL_SIZE = 10;

/**
 * A group touching more keys than this locks the whole store instead of each key (see
 * `lock`): advisory locks live in PostgreSQL's shared lock table, sized by
 * max_locks_per_transaction (64 by default) times the connections, and a batch that deletes a
 * long journal would otherwise fill it.
 */
const MAX_KEY_LOCKS = 256;

/** Taken shared by every group that locks its keys, exclusively by a group too large to. */
const STORE_LOCK = "8318822839590873971";

/**
 * Opens the PostgreSQL adapter of the store port on the database `url` names, after checking its
 * encoding and migrating its schema (postgres-migrations.ts). A database it must not use is
 * refused with `UnusableDatabase`; any other failure is a `StorageError` naming only its code
 * (an errno, a SQLSTATE): never the URL, which may hold a password.
 */
export async function openPostgresStore(url: string, options: { poolSize?: number } = {}): Promise<PostgresStore> {
  const pool = new pg.Pool({ connectionString: url, max: options.poolSize ?? DEFAULT_POOL_SIZE });
  // An idle connection the server drops emits here; without a listener that would end the
  // process. The next query on the pool opens a new connection, or fails with a StorageError.
  pool.on("error", () => undefined);
  try {
    const client = await pool.connect();
    try {
      await checkEncoding(client);
      await migrate(client);
    } finally {
      client.release();
    }
  } catch (error) {
    await pool.end().catch(() => undefined);
    throw error instanceof UnusableDatabase ? error : storageError("connection", error);
  }
  return new PostgresStore(pool);
}

/**
 * Keys are compared by their bytes (`COLLATE "C"`), which is UTF-8 byte order only when the
 * database stores UTF-8; SQL_ASCII would also take any bytes without checking them.
 */
async function checkEncoding(client: pg.PoolClient): Promise<void> {
  const { rows } = await client.query<{ encoding: string }>(
    "SELECT pg_encoding_to_char(encoding) AS encoding FROM pg_database WHERE datname = current_database()",
  );
  const encoding = rows[0]?.encoding;
  if (encoding !== "UTF8") {
    throw new UnusableDatabase(
      `the metadata database's encoding is ${encoding}; the store needs UTF8 (CREATE DATABASE ... ENCODING 'UTF8' TEMPLATE template0)`,
    );
  }
}

/**
 * The shared adapter of the store port: one PostgreSQL database (`skillenv_records`) for every
 * replica. It keeps the port's guarantees as LevelStore does, with a transaction where LevelDB
 * has a synced batch:
 *
 * - Writes go through one queue per process with group commit: a group is one transaction,
 *   committed with the server's `synchronous_commit` (on by default: the commit is flushed to
 *   the WAL before it returns), then its writes resolve. Groups run one after another, so writes
 *   become visible in call order, and a group's writes all or none (each write wholly).
 * - Conditions need more than one process's queue, since other replicas write too. Every group
 *   first takes a transaction-level advisory lock on each key it touches (expected, put or
 *   deleted; a hash of table and key), in ascending order so that two groups never wait for
 *   each other in a circle. Holding them, it reads the expected keys and decides each write as
 *   LevelStore does; nothing else can change those keys until it commits. Row locks
 *   (`SELECT ... FOR UPDATE`) would not do: a key expected absent has no row to lock, and a
 *   replica inserting it meanwhile would go unnoticed. Locking only the conditional groups would
 *   not do either: an unconditional put of a key another replica has just found absent must
 *   wait for that replica's commit. A write whose conditions fail is left out before anything of
 *   it is applied, so no savepoint is needed; it is rejected with `WriteConflict` once the group
 *   committed, so that its retry reads what won.
 * - Reads run on the other connections of the pool, each a statement of its own: they see
 *   every write that resolved before they started.
 */
export class PostgresStore implements Store {
  readonly #pool: pg.Pool;
  readonly #groups = new GroupCommit((group) => this.#commit(group));
  #closed = false;

  constructor(pool: pg.Pool) {
    this.#pool = pool;
  }

  table<V>(name: string): Table<V> {
    return new PostgresTable<V>(name, this.#pool, (ops) => this.write(ops));
  }

  observeCommits(observer: CommitObserver): void {
    this.#groups.observer = observer;
  }

  write(ops: readonly WriteOp[]): Promise<void> {
    if (ops.length === 0) return Promise.resolve();
    if (this.#closed) return Promise.reject(new StorageError("metadata write failed: the store is closed"));
    // PostgreSQL's text cannot hold NUL; refused here, the write alone fails, not its group.
    if (ops.some((op) => op.table.includes("\u0000") || op.key.includes("\u0000"))) {
      return Promise.reject(new StorageError("metadata write failed: a key holds the character NUL"));
    }
    return this.#groups.write(ops);
  }

  async close(): Promise<void> {
    this.#closed = true;
    await this.#groups.drained();
    await this.#pool.end();
  }

  /** One transaction: lock, decide, apply, commit. Throws (having rolled back) when the database fails. */
  async #commit(group: PendingWrite[]) {
    const client = await this.#pool.connect();
    let broken: Error | undefined;
    try {
      await client.query("BEGIN");
      await lock(client, group);
      const stored = await readExpected(client, group);
      const admission = await admit(group, async (table, key) => stored.get(slot({ table, key })));
      await apply(client, admission.admitted);
      await client.query("COMMIT");
      return admission;
    } catch (error) {
      // A connection that cannot even roll back is dropped rather than handed to the next user.
      await client.query("ROLLBACK").catch((rollback: Error) => (broken = rollback));
      throw error;
    } finally {
      client.release(broken);
    }
  }
}

/**
 * The group's advisory locks (see PostgresStore). Every group takes the store lock first, shared
 * when it locks its keys one by one and exclusive when they are too many to: so a large group
 * excludes every other writer instead, and lock order stays the same for all.
 */
async function lock(client: pg.PoolClient, group: PendingWrite[]): Promise<void> {
  const ids = [...new Set(group.flatMap((write) => write.ops.map(lockId)))].sort((a, b) => (BigInt(a) < BigInt(b) ? -1 : 1));
  if (ids.length > MAX_KEY_LOCKS) {
    await client.query("SELECT pg_advisory_xact_lock($1)", [STORE_LOCK]);
    return;
  }
  await client.query("SELECT pg_advisory_xact_lock_shared($1)", [STORE_LOCK]);
  // unnest yields the ids in array order, so they are locked in ascending order.
  await client.query("SELECT pg_advisory_xact_lock(id) FROM unnest($1::bigint[]) AS id", [ids]);
}

/** 64 bits of SHA-256 of table and key, as the decimal text of a signed bigint. */
function lockId(op: WriteOp): string {
  return createHash("sha256").update(slot(op)).digest().readBigInt64BE(0).toString();
}

/** What the database holds for every key the group expects, by slot; absent keys are missing. */
async function readExpected(client: pg.PoolClient, group: PendingWrite[]): Promise<Map<string, string>> {
  const expects = group.flatMap((write) => write.ops.filter((op) => op.type === "expect"));
  const stored = new Map<string, string>();
  if (expects.length === 0) return stored;
  const { rows } = await client.query<{ tbl: string; key: string; value: string }>(
    "SELECT r.tbl, r.key, r.value FROM skillenv_records r JOIN unnest($1::text[], $2::text[]) AS e(tbl, key) ON r.tbl = e.tbl AND r.key = e.key",
    [expects.map((op) => op.table), expects.map((op) => op.key)],
  );
  for (const row of rows) stored.set(slot({ table: row.tbl, key: row.key }), row.value);
  return stored;
}

/** The admitted writes, as what they leave: the last operation on each key, puts in one statement and deletes in another. */
async function apply(client: pg.PoolClient, admitted: PendingWrite[]): Promise<void> {
  const last = new Map<string, WriteOp>();
  for (const write of admitted) {
    for (const op of write.ops) if (op.type !== "expect") last.set(slot(op), op);
  }
  const ops = [...last.values()];
  const puts = ops.filter((op) => op.type === "put");
  const deletes = ops.filter((op) => op.type === "delete");
  if (puts.length > 0) {
    await client.query(
      `INSERT INTO skillenv_records (tbl, key, value) SELECT * FROM unnest($1::text[], $2::text[], $3::text[])
       ON CONFLICT (tbl, key) DO UPDATE SET value = EXCLUDED.value`,
      [puts.map((op) => op.table), puts.map((op) => op.key), puts.map((op) => op.value as string)],
    );
  }
  if (deletes.length > 0) {
    await client.query("DELETE FROM skillenv_records r USING unnest($1::text[], $2::text[]) AS d(tbl, key) WHERE r.tbl = d.tbl AND r.key = d.key", [
      deletes.map((op) => op.table),
      deletes.map((op) => op.key),
    ]);
  }
}

class PostgresTable<V> extends TableOps<V> implements Table<V> {
  readonly name: string;
  readonly #pool: pg.Pool;
  readonly #write: (ops: readonly WriteOp[]) => Promise<void>;

  constructor(name: string, pool: pg.Pool, write: (ops: readonly WriteOp[]) => Promise<void>) {
    super();
    this.name = name;
    this.#pool = pool;
    this.#write = write;
  }

  async get(key: string): Promise<V | undefined> {
    const rows = await this.#read<{ value: string }>("SELECT value FROM skillenv_records WHERE tbl = $1 AND key = $2", [this.name, key]);
    return rows[0] === undefined ? undefined : (JSON.parse(rows[0].value) as V);
  }

  put(key: string, value: V): Promise<void> {
    return this.#write([this.putOp(key, value)]);
  }

  delete(key: string): Promise<void> {
    return this.#write([this.deleteOp(key)]);
  }

  async entries(range: KeyRange): Promise<Array<[string, V]>> {
    const query = rangeQuery(this.name, range);
    const limit = hasLimit(range.limit) ? ` LIMIT ${query.param(range.limit)}` : "";
    const rows = await this.#read<{ key: string; value: string }>(
      `SELECT key, value FROM skillenv_records WHERE ${query.where} ORDER BY key${query.desc}${limit}`,
      query.params,
    );
    return rows.map((row) => [row.key, JSON.parse(row.value) as V]);
  }

  async values(range: KeyRange): Promise<V[]> {
    return (await this.entries(range)).map(([, value]) => value);
  }

  /**
   * One statement: the range's first `limit + 1` keys with the running total of their values'
   * sizes (computed by the server, from the stored lengths), then the values of only those
   * within the budget (the first always). Nothing past the budget reaches this process.
   */
  async page(range: KeyRange & { limit: number }, maxBytes: number): Promise<TablePage<V>> {
    const query = rangeQuery(this.name, range);
    const scan = query.param(range.limit + 1);
    const limit = query.param(range.limit);
    const budget = query.param(maxBytes);
    const rows = await this.#read<{ key: string; value: string; scanned: string }>(
      `SELECT s.key, r.value, s.scanned FROM (
         SELECT key, n, total, count(*) OVER () AS scanned FROM (
           SELECT key, row_number() OVER w AS n, sum(octet_length(value)) OVER w AS total
           FROM (SELECT key, value FROM skillenv_records WHERE ${query.where} ORDER BY key${query.desc} LIMIT ${scan}) AS scan
           WINDOW w AS (ORDER BY key${query.desc} ROWS UNBOUNDED PRECEDING)
         ) AS sized
       ) AS s JOIN skillenv_records r ON r.tbl = $1 AND r.key = s.key
       WHERE s.n <= ${limit} AND (s.n = 1 OR s.total <= ${budget})
       ORDER BY s.key${query.desc}`,
      query.params,
    );
    return { entries: rows.map((row) => [row.key, JSON.parse(row.value) as V]), more: Number(rows[0]?.scanned ?? 0) > rows.length };
  }

  async #read<R extends pg.QueryResultRow>(sql: string, params: unknown[]): Promise<R[]> {
    try {
      return (await this.#pool.query<R>(sql, params)).rows;
    } catch (error) {
      throw storageError("read", error);
    }
  }
}

/** Level's rule: a limit of -1 or Infinity (or none) reads the whole range. */
function hasLimit(limit: number | undefined): limit is number {
  return limit !== undefined && limit >= 0 && Number.isFinite(limit);
}

/** The WHERE clause and key order of a range over one table, with their parameters ($1 is the table). */
function rangeQuery(table: string, range: KeyRange) {
  const params: unknown[] = [table];
  const param = (value: unknown) => `$${params.push(value)}`;
  const where = ["tbl = $1"];
  if (range.gt !== undefined) where.push(`key > ${param(range.gt)}`);
  if (range.gte !== undefined) where.push(`key >= ${param(range.gte)}`);
  if (range.lt !== undefined) where.push(`key < ${param(range.lt)}`);
  if (range.lte !== undefined) where.push(`key <= ${param(range.lte)}`);
  return { params, param, where: where.join(" AND "), desc: range.reverse ? " DESC" : "" };
}
