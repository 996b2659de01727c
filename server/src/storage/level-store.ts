import type { AbstractSublevel } from "abstract-level";
import type { Level } from "level";
import { admit, GroupCommit, type PendingWrite } from "./group-conditions.ts";
import { storageError, TableOps, type KeyRange, type Store, type Table, type TablePage, type CommitObserver, type WriteOp } from "./store.ts";

type Sublevel = AbstractSublevel<Level<string, string>, string | Buffer | Uint8Array, string, string>;

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
 * nothing can write between the check and the batch: a write whose condition fails is left out
 * of the group, the others go ahead, and it is rejected with `WriteConflict` once the group is
 * written, so that a retry reads what won (rejected at once, it would read the value the group is
 * about to replace, and lose again).
 */
export class LevelStore implements Store {
  readonly #db: Level<string, string>;
  readonly #sublevels = new Map<string, Sublevel>();
  readonly #groups = new GroupCommit((group) => this.#commit(group));

  constructor(db: Level<string, string>) {
    this.#db = db;
  }

  table<V>(name: string): Table<V> {
    return new LevelTable<V>(name, this.#sublevel(name), (ops) => this.write(ops));
  }

  observeCommits(observer: CommitObserver): void {
    this.#groups.observer = observer;
  }

  write(ops: readonly WriteOp[]): Promise<void> {
    return this.#groups.write(ops);
  }

  async close(): Promise<void> {
    await this.#groups.drained();
    await this.#db.close();
  }

  /** One synced batch of the group's admitted writes; no other writer can come between the check and it. */
  async #commit(group: PendingWrite[]) {
    const admission = await admit(group, (table, key) => this.#sublevel(table).get(key));
    await this.#db.batch(
      admission.admitted.flatMap((write) => write.ops.flatMap((op) => (op.type === "expect" ? [] : [this.#levelOp(op)]))),
      { sync: true },
    );
    return admission;
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

class LevelTable<V> extends TableOps<V> implements Table<V> {
  readonly name: string;
  readonly #sublevel: Sublevel;
  readonly #write: (ops: readonly WriteOp[]) => Promise<void>;

  constructor(name: string, sublevel: Sublevel, write: (ops: readonly WriteOp[]) => Promise<void>) {
    super();
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
}
