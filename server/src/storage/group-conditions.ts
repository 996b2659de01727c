import { WriteConflict, type WriteOp } from "./store.ts";

/** A write waiting in an adapter's group commit. */
export interface PendingWrite {
  ops: readonly WriteOp[];
  resolve(): void;
  reject(error: Error): void;
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
