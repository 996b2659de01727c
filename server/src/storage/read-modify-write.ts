import { setTimeout as sleep } from "node:timers/promises";
import { WriteConflict, type Store, type Table, type WriteOp } from "./store.ts";

/** Reads of one attempt: each read value becomes a condition of the attempt's write. */
export interface ConditionalReads {
  get<V>(table: Table<V>, key: string): Promise<V | undefined>;
}

/** What an attempt decided: the batch to write (may be empty) and the attempt's result. */
export interface Decision<T> {
  ops: readonly WriteOp[];
  result: T;
}

/** Attempts before a key that keeps changing is reported; each retry has lost to a write that succeeded. */
const MAX_ATTEMPTS = 32;

/** Longest pause between attempts (ms); the pauses of all attempts together reach about 1.5 s. */
const MAX_BACKOFF_MS = 100;

/**
 * A read-modify-write that stays correct with any number of writers, in this process or others:
 * `attempt` reads through `reads`, decides, and its batch is written on condition that nothing it
 * read has changed (`Table.expectOp`, captured when read, so later changes to the returned
 * objects do not alter the condition). On `WriteConflict` the attempt runs again on fresh reads.
 * An attempt that writes nothing after one read is done: that value was current when read. One
 * that writes nothing after several reads has its conditions checked all the same (a batch of
 * conditions only), since a write may have come between its reads: deciding "no receipt, no
 * asset" from an asset read before a finalize committed and a receipt read after it would be wrong.
 *
 * Before each retry it pauses a random time up to a bound that doubles (to MAX_BACKOFF_MS): a
 * writer that just won goes on at once and, on another replica, reaches the key first again
 * and again, so that retries without a pause would all lose to it while it keeps writing; the
 * pauses spread the retries over its whole run instead.
 */
export async function readModifyWrite<T>(store: Store, attempt: (reads: ConditionalReads) => Promise<Decision<T>>): Promise<T> {
  for (let attempts = 1; ; attempts++) {
    const conditions: WriteOp[] = [];
    const reads: ConditionalReads = {
      async get<V>(table: Table<V>, key: string) {
        const value = await table.get(key);
        conditions.push(table.expectOp(key, value));
        return value;
      },
    };
    const { ops, result } = await attempt(reads);
    // One read is a consistent view by itself; several are not (another writer may commit
    // between them), so a decision to write nothing on several reads is checked like a write.
    if (ops.length === 0 && conditions.length <= 1) return result;
    try {
      await store.write([...conditions, ...ops]);
      return result;
    } catch (error) {
      if (!(error instanceof WriteConflict) || attempts >= MAX_ATTEMPTS) throw error;
    }
    await sleep(Math.random() * Math.min(MAX_BACKOFF_MS, 2 ** attempts));
  }
}
