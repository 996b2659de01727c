import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { readModifyWrite, type BlobStore, type ConditionalReads, type Sha256Hex, type Store, type Table, type WriteOp } from "../storage/index.ts";

/**
 * Who holds the bytes of one hash: the workspaces with an asset record of it, and writes of it
 * under way (a workspace that is storing those bytes and has not finalized yet, until a time).
 * `keep`: the bytes were stored before holders were kept (or by something that keeps none, such
 * as artifact admission), so nobody knows every holder: never collected.
 */
export interface BlobHolders {
  workspaces: string[];
  writes: Record<string, number>;
  keep?: true;
}

/** A collection under way: the holders record is gone and the bytes are being deleted. */
interface Collection {
  id: string;
  since: number;
}

export interface BundleCollectorOptions {
  /** How long a write holds bytes before its finalize (the upload URL's lifetime and a margin), ms. */
  writeHoldMs: number;
  /** A collection older than this is taken to have died with its process, and is finished by whoever meets it, ms. */
  staleCollectionMs: number;
  /** Pause between looks at a collection under way, ms. */
  pollMs?: number;
}

/**
 * The garbage collection of content bytes, safe with any number of replicas sharing the store.
 *
 * Invariants (each kept by conditional batches on the one `blob-holders` key of the hash):
 * - Bytes are deleted only after a batch that found the hash with no holders, no write under way
 *   and not `keep` replaced its holders record with a `blob-collections` record (the claim).
 * - Every writer of bytes first waits until no claim exists, then adds its write hold in a batch
 *   conditional on that, so once a hold is committed no claim can be made until it ends; bytes
 *   written under a hold are never deleted by a collection that started before it.
 * - A finalize turns the hold into a workspace holder in the same batch as the asset record;
 *   a finalize that finds the hash claimed, or the bytes absent with no record of holders,
 *   records nothing (the caller uploads again).
 * - Releasing a workspace's asset record and its holder entry happen in one batch; the one who
 *   released the last holder collects.
 * - Bytes something else reads by their hash without holding them (an admitted artifact) are
 *   kept for good (`keepForGood`, before they are written), as are bytes stored before holders
 *   were kept (found present with no holders record).
 * A collector that dies after its claim leaves the claim: after `staleCollectionMs` a writer or
 * the sweep finishes it.
 */
export class BundleCollector {
  readonly #store: Store;
  readonly #blobs: Pick<BlobStore, "stat" | "delete">;
  readonly #holders: Table<BlobHolders>;
  readonly #collections: Table<Collection>;
  readonly #options: Required<BundleCollectorOptions>;

  constructor(store: Store, blobs: Pick<BlobStore, "stat" | "delete">, options: BundleCollectorOptions) {
    this.#store = store;
    this.#blobs = blobs;
    this.#holders = store.table<BlobHolders>("blob-holders");
    this.#collections = store.table<Collection>("blob-collections");
    this.#options = { pollMs: 25, ...options };
  }

  /**
   * Before `workspace` writes the bytes `sha256`: waits out a collection of them, then holds them
   * for the workspace until it finalizes or `writeHoldMs` pass.
   */
  beforeWrite(workspace: string, sha256: Sha256Hex): Promise<void> {
    return this.#hold(sha256, (holders, now) => ({ ...holders, writes: { ...liveWrites(holders, now), [workspace]: now + this.#options.writeHoldMs } }));
  }

  /**
   * Before bytes are written that something keeping no holders will read (an admitted artifact,
   * whose id is the same SHA-256): waits out a collection of them, then keeps them for good.
   */
  keepForGood(sha256: Sha256Hex): Promise<void> {
    return this.#hold(sha256, (holders) => ({ ...holders, keep: true }));
  }

  /** Waits while a collection of the bytes is under way, then writes what `change` makes of their holders. */
  async #hold(sha256: Sha256Hex, change: (holders: BlobHolders, now: number) => BlobHolders): Promise<void> {
    for (;;) {
      const held = await readModifyWrite(this.#store, async (reads) => {
        const collection = await reads.get(this.#collections, sha256);
        if (collection && !this.#isStale(collection)) return { ops: [], result: false };
        const stored = await reads.get(this.#holders, sha256);
        // No record, no claim, bytes present: stored before holders were kept.
        const legacy = !stored && !collection && (await this.#blobs.stat(sha256)) !== undefined;
        const holders: BlobHolders = stored ?? { workspaces: [], writes: {}, ...(legacy ? { keep: true as const } : {}) };
        // A stale claim is given up: this write stores the bytes again.
        const ops = [...(collection ? [this.#collections.deleteOp(sha256)] : []), this.#holders.putOp(sha256, change(holders, Date.now()))];
        return { ops, result: true };
      });
      if (held) return;
      await sleep(this.#options.pollMs);
    }
  }

  /**
   * The finalize's part, in its batch: conditional reads and the ops that make `workspace` a
   * holder of the bytes; undefined when the bytes are claimed or gone (nothing may be recorded).
   */
  async holdOps(reads: ConditionalReads, workspace: string, sha256: Sha256Hex): Promise<WriteOp[] | undefined> {
    const holders = await reads.get(this.#holders, sha256);
    if (!holders) {
      if (await reads.get(this.#collections, sha256)) return undefined;
      // Bytes stored before holders were kept: present ones are kept for good.
      if ((await this.#blobs.stat(sha256)) === undefined) return undefined;
      return [this.#holders.putOp(sha256, { workspaces: [workspace], writes: {}, keep: true })];
    }
    const { [workspace]: _done, ...writes } = liveWrites(holders, Date.now());
    const workspaces = holders.workspaces.includes(workspace) ? holders.workspaces : [...holders.workspaces, workspace];
    return [this.#holders.putOp(sha256, { ...holders, workspaces, writes })];
  }

  /** The release's part, in its batch: `workspace` holds the bytes no more; `collect` says whether nobody does. */
  async releaseOps(reads: ConditionalReads, workspace: string, sha256: Sha256Hex): Promise<{ ops: WriteOp[]; collect: boolean }> {
    const holders = await reads.get(this.#holders, sha256);
    if (!holders) return { ops: [], collect: false };
    const next = { ...holders, workspaces: holders.workspaces.filter((name) => name !== workspace) };
    return { ops: [this.#holders.putOp(sha256, next)], collect: isUnheld(next, Date.now()) };
  }

  /** Deletes the bytes if nobody holds them; true when this call deleted them. */
  async collect(sha256: Sha256Hex): Promise<boolean> {
    const claim: Collection = { id: randomUUID(), since: Date.now() };
    const claimed = await readModifyWrite(this.#store, async (reads) => {
      const holders = await reads.get(this.#holders, sha256);
      if (!holders || !isUnheld(holders, Date.now())) return { ops: [], result: false };
      return { ops: [this.#holders.deleteOp(sha256), this.#collections.putOp(sha256, claim)], result: true };
    });
    if (!claimed) return false;
    await this.#finish(sha256, claim);
    return true;
  }

  /**
   * Collects what a crash left: hashes nobody holds any more (a write that never finalized, a
   * release whose collection did not run) and claims whose collector died. Returns how many
   * bytes it deleted.
   */
  async sweep(): Promise<number> {
    let deleted = 0;
    const now = Date.now();
    for (const [sha256, holders] of await this.#holders.entries({})) if (isUnheld(holders, now) && (await this.collect(sha256))) deleted++;
    for (const [sha256, collection] of await this.#collections.entries({})) {
      if (this.#isStale(collection)) {
        await this.#finish(sha256, collection);
        deleted++;
      }
    }
    return deleted;
  }

  async #finish(sha256: Sha256Hex, claim: Collection): Promise<void> {
    await this.#blobs.delete(sha256);
    // Only this claim: a writer that gave it up as stale may have started another life of the bytes.
    await readModifyWrite(this.#store, async (reads) => {
      const current = await reads.get(this.#collections, sha256);
      return { ops: current?.id === claim.id ? [this.#collections.deleteOp(sha256)] : [], result: undefined };
    });
  }

  #isStale(collection: Collection): boolean {
    return Date.now() - collection.since > this.#options.staleCollectionMs;
  }
}

function liveWrites(holders: BlobHolders, now: number): Record<string, number> {
  return Object.fromEntries(Object.entries(holders.writes).filter(([, until]) => until > now));
}

function isUnheld(holders: BlobHolders, now: number): boolean {
  return !holders.keep && holders.workspaces.length === 0 && Object.keys(liveWrites(holders, now)).length === 0;
}
