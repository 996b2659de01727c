import type { AbstractSublevel } from "abstract-level";
import type { Level } from "level";
import { StorageError, WriteConflict, type KeyRange, type Store, type Table, type TablePage, type WriteOp } from "./store.ts";

type Sublevel = AbstractSublevel<Level<string, string>, string | Buffer | Uint8Array, string, string>;

interface PendingWrite {
  ops: readonly WriteOp[];
  resolve(): void;
  reject(error: StorageError): void;
}

/**
 * The embedded adapter of the store port: one LevelDB, a sublevel per table, JSON values.
 *
 * Every write is synced (fsync) before it resolves. Writes are gathered into batches (group
 * commit): a batch starts once the event loop has run what was ready when the first write came
 * (setImmediate), and writes that arrive while a batch is being synced go into the next one. So
 * the writes one piece of work issues together (a turn's last events and its run record) share
 * one fsync, under load many writes do, and their order is kept: batches are written one after
 * another, in call order.
 *
 * Conditions (`expect` operations) are checked while the group is assembled, against the database
 * and the group's earlier writes. LevelDB admits one process, and one flush runs at a time, so
 * nothing can write between the check and the batch: a write whose condition fails is rejected
 * with `WriteConflict` and left out of the group, the others go ahead.
 */
export class LevelStore implements Store {
  readonly #db: Level<string, string>;
  readonly #sublevels = new Map<string, Sublevel>();
  #queue: PendingWrite[] = [];
  /** The running flush, while there is one. */
  #flushing: Promise<void> | undefined;

  constructor(db: Level<string, string>) {
    this.#db = db;
  }

  table<V>(name: string): Table<V> {
    return new LevelTable<V>(name, this.#sublevel(name), (ops) => this.write(ops));
  }

  write(ops: readonly WriteOp[]): Promise<void> {
    if (ops.length === 0) return Promise.resolve();
    return new Promise((resolve, reject) => {
      this.#queue.push({ ops, resolve, reject });
      this.#flushing ??= new Promise<void>((started) => setImmediate(started)).then(() => this.#flush());
    });
  }

  async close(): Promise<void> {
    await this.#flushing;
    await this.#db.close();
  }

  async #flush(): Promise<void> {
    while (this.#queue.length > 0) {
      const pending = this.#queue;
      this.#queue = [];
      let group: PendingWrite[] = pending;
      try {
        group = await this.#admit(pending);
        await this.#db.batch(
          group.flatMap((write) => write.ops.flatMap((op) => (op.type === "expect" ? [] : [this.#levelOp(op)]))),
          { sync: true },
        );
        for (const write of group) write.resolve();
      } catch (error) {
        const failure = storageError("write", error);
        for (const write of group) write.reject(failure);
      }
    }
    this.#flushing = undefined;
  }

  /**
   * The writes of a group whose conditions hold, in order, each checked against the database as the
   * group's earlier admitted writes leave it; the others are rejected with `WriteConflict`.
   */
  async #admit(pending: PendingWrite[]): Promise<PendingWrite[]> {
    if (!pending.some((write) => write.ops.some((op) => op.type === "expect"))) return pending;
    /** Values the admitted writes leave, by table and key; undefined: deleted. */
    const written = new Map<string, string | undefined>();
    const admitted: PendingWrite[] = [];
    for (const write of pending) {
      let holds = true;
      for (const op of write.ops) {
        if (op.type !== "expect") continue;
        const slot = `${op.table}\u0000${op.key}`;
        const current = written.has(slot) ? written.get(slot) : await this.#sublevel(op.table).get(op.key);
        if (current !== op.value) {
          holds = false;
          break;
        }
      }
      if (!holds) {
        write.reject(new WriteConflict(`a record this write expected has changed (${write.ops.find((op) => op.type === "expect")?.table})`));
        continue;
      }
      for (const op of write.ops) {
        if (op.type === "put") written.set(`${op.table}\u0000${op.key}`, op.value as string);
        else if (op.type === "delete") written.set(`${op.table}\u0000${op.key}`, undefined);
      }
      admitted.push(write);
    }
    return admitted;
  }

  #levelOp(op: WriteOp & { type: "put" | "delete" }) {
    const sublevel = this.#sublevel(op.table);
    return op.type === "put" ? { type: "put" as const, sublevel, key: op.key, value: op.value as string } : { type: "del" as const, sublevel, key: op.key };
  }

  #sublevel(name: string): Sublevel {
    let sublevel = this.#sublevels.get(name);
    if (!sublevel) {
      sublevel = this.#db.sublevel<string, string>(name, { valueEncoding: "utf8" });
      this.#sublevels.set(name, sublevel);
    }
    return sublevel;
  }
}

class LevelTable<V> implements Table<V> {
  readonly name: string;
  readonly #sublevel: Sublevel;
  readonly #write: (ops: readonly WriteOp[]) => Promise<void>;

  constructor(name: string, sublevel: Sublevel, write: (ops: readonly WriteOp[]) => Promise<void>) {
    this.name = name;
    this.#sublevel = sublevel;
    this.#write = write;
  }

  async get(key: string): Promise<V | undefined> {
    let text: string | undefined;
    try {
      text = await this.#sublevel.get(key);
    } catch (error) {
      throw storageError("read", error);
    }
    return text === undefined ? undefined : (JSON.parse(text) as V);
  }

  put(key: string, value: V): Promise<void> {
    return this.#write([this.putOp(key, value)]);
  }

  delete(key: string): Promise<void> {
    return this.#write([this.deleteOp(key)]);
  }

  async entries(range: KeyRange): Promise<Array<[string, V]>> {
    try {
      const entries = await this.#sublevel.iterator(range).all();
      return entries.map(([key, text]) => [key, JSON.parse(text) as V]);
    } catch (error) {
      throw storageError("read", error);
    }
  }

  async values(range: KeyRange): Promise<V[]> {
    return (await this.entries(range)).map(([, value]) => value);
  }

  /** Entry by entry, so that no more than one value past the budget is ever read and parsed. */
  async page(range: KeyRange & { limit: number }, maxBytes: number): Promise<TablePage<V>> {
    const entries: Array<[string, V]> = [];
    // One beyond the limit tells whether there is more.
    const iterator = this.#sublevel.iterator({ ...range, limit: range.limit + 1 });
    try {
      let bytes = 0;
      for (;;) {
        const next = await iterator.next();
        if (next === undefined) return { entries, more: false };
        const [key, text] = next;
        const size = Buffer.byteLength(text);
        if (entries.length === range.limit || (entries.length > 0 && bytes + size > maxBytes)) return { entries, more: true };
        bytes += size;
        entries.push([key, JSON.parse(text) as V]);
      }
    } catch (error) {
      throw storageError("read", error);
    } finally {
      await iterator.close().catch(() => undefined);
    }
  }

  /** Values are encoded here, so a value that is not JSON fails its caller, not a whole group. */
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

function storageError(what: "read" | "write", cause: unknown): StorageError {
  const code = (cause as { code?: unknown } | null)?.code;
  return new StorageError(`metadata ${what} failed${typeof code === "string" ? ` (${code})` : ""}`, { cause });
}
