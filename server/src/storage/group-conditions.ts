import { storageError, WriteConflict, type CommitObserver, type WriteOp } from "./store.ts";

/** A write waiting in an adapter's group commit. */
export interface PendingWrite {
  ops: readonly WriteOp[];
  resolve(): void;
  reject(error: Error): void;
}

/**
 * Group commit, as both adapters do it: a group starts once the event loop has run what was ready
 * when its first write came (setImmediate), writes that arrive while a group commits go into the
 * next, and groups commit one after another, in call order. `commit` applies one group (durably,
 * atomically) and says which writes it admitted and which lost on their conditions; the losers
 * are rejected first, so that their retries queue before the winners' next writes. A group that
 * fails as a whole fails each of its writes with a StorageError.
 */
export class GroupCommit {
  readonly #commit: (group: PendingWrite[]) => Promise<Admission<PendingWrite>>;
  #queue: PendingWrite[] = [];
  /** The running flush, while there is one. */
  #flushing: Promise<void> | undefined;
  /** Told of every group committed (the metrics). */
  observer: CommitObserver | undefined;

  constructor(commit: (group: PendingWrite[]) => Promise<Admission<PendingWrite>>) {
    this.#commit = commit;
  }

  write(ops: readonly WriteOp[]): Promise<void> {
    if (ops.length === 0) return Promise.resolve();
    return new Promise((resolve, reject) => {
      this.#queue.push({ ops, resolve, reject });
      this.#flushing ??= new Promise<void>((started) => setImmediate(started)).then(() => this.#flush());
    });
  }

  /** Resolves once every write queued so far has been committed or refused. */
  async drained(): Promise<void> {
    await this.#flushing;
  }

  async #flush(): Promise<void> {
    while (this.#queue.length > 0) {
      const group = this.#queue;
      this.#queue = [];
      try {
        const started = performance.now();
        const { admitted, conflicts } = await this.#commit(group);
        this.observer?.({ writes: group.length, ops: group.reduce((sum, write) => sum + write.ops.length, 0), seconds: (performance.now() - started) / 1000 });
        for (const [write, conflict] of conflicts) write.reject(conflict);
        for (const write of admitted) write.resolve();
      } catch (error) {
        const failure = storageError("write", error);
        for (const write of group) write.reject(failure);
      }
    }
    this.#flushing = undefined;
  }
}

/** What a group's conditions decided: the writes to apply, in order, and those to reject with their conflict. */
export interface Admission<W extends PendingWrite> {
  admitted: W[];
  conflicts: Array<[write: W, conflict: WriteConflict]>;
}

/**
 * Checks the conditions (`expect` operations) of a group's writes, in order, each against what
 * the group's earlier admitted writes leave, else against `stored` (the database). The caller
 * must make sure that nothing else writes the keys between `stored` and its commit; each adapter
 * says how.
 */
export async function admit<W extends PendingWrite>(
  group: readonly W[],
  stored: (table: string, key: string) => Promise<string | undefined>,
): Promise<Admission<W>> {
  const admission: Admission<W> = { admitted: [], conflicts: [] };
  /** Values the admitted writes leave, by slot; undefined: deleted. */
  const written = new Map<string, string | undefined>();
  for (const write of group) {
    const failed = await firstFailed(write.ops, written, stored);
    if (failed) {
      admission.conflicts.push([write, new WriteConflict(`a record this write expected has changed (${failed.table})`)]);
      continue;
    }
    for (const op of write.ops) {
      if (op.type !== "expect") written.set(slot(op), op.type === "put" ? (op.value as string) : undefined);
    }
    admission.admitted.push(write);
  }
  return admission;
}

async function firstFailed(
  ops: readonly WriteOp[],
  written: Map<string, string | undefined>,
  stored: (table: string, key: string) => Promise<string | undefined>,
): Promise<WriteOp | undefined> {
  for (const op of ops) {
    if (op.type !== "expect") continue;
    const current = written.has(slot(op)) ? written.get(slot(op)) : await stored(op.table, op.key);
    if (current !== op.value) return op;
  }
  return undefined;
}

/** A key's place across tables: NUL separates, as no table name holds it. */
export function slot(op: { table: string; key: string }): string {
  return `${op.table}\u0000${op.key}`;
}
