import { readModifyWrite, workspaceKey, type ConditionalReads, type Sha256Hex, type Store, type Table, type WriteOp } from "../storage/index.ts";
import type { BundleCollector } from "./bundle-holders.ts";

/** Proof that a workspace PUT verified bytes through the embedded signed URL; consumed by finalize. */
interface UploadReceipt {
  sizeBytes: number;
  uploadedAt: string;
}

/** A finalized workspace asset. */
export interface AssetRecord {
  sha256: Sha256Hex;
  sizeBytes: number;
  finalizedAt: string;
}

/**
 * Which workspace may see which content. Bytes are shared in the blob store; these records are
 * the only way a workspace learns that content exists, so there is no cross-workspace oracle.
 * A record is also a holder of its bytes (BundleCollector): it is removed only by `releaseOps`,
 * when the last skill version of the workspace bound to it goes, and its bytes are collected
 * when no workspace holds them any more. Records are not remembered in memory for that reason:
 * another replica may release one.
 */
export class AssetRecords {
  readonly #store: Store;
  readonly #receipts: Table<UploadReceipt>;
  readonly #assets: Table<AssetRecord>;
  readonly #collector: BundleCollector;

  constructor(store: Store, collector: BundleCollector) {
    this.#store = store;
    this.#receipts = store.table<UploadReceipt>("upload-receipts");
    this.#assets = store.table<AssetRecord>("assets");
    this.#collector = collector;
  }

  async recordUpload(workspace: string, sha256: Sha256Hex, sizeBytes: number): Promise<void> {
    await this.#receipts.put(workspaceKey(workspace, sha256), { sizeBytes, uploadedAt: new Date().toISOString() });
  }

  get(workspace: string, sha256: Sha256Hex): Promise<AssetRecord | undefined> {
    return this.#assets.get(workspaceKey(workspace, sha256));
  }

  /** The record, read as a condition of the caller's batch (a skill version binding it). */
  getIn(reads: ConditionalReads, workspace: string, sha256: Sha256Hex): Promise<AssetRecord | undefined> {
    return reads.get(this.#assets, workspaceKey(workspace, sha256));
  }

  /**
   * Ops of the caller's batch that remove the workspace's record and its hold on the bytes;
   * `collect`: nobody holds them then, so the caller collects them once its batch is written.
   */
  async releaseOps(reads: ConditionalReads, workspace: string, sha256: Sha256Hex): Promise<{ ops: WriteOp[]; collect: boolean }> {
    const key = workspaceKey(workspace, sha256);
    if (!(await reads.get(this.#assets, key))) return { ops: [], collect: false };
    const released = await this.#collector.releaseOps(reads, workspace, sha256);
    return { ops: [this.#assets.deleteOp(key), ...released.ops], collect: released.collect };
  }

  /**
   * Records the workspace's asset, atomically and safely across processes sharing the store:
   * from `verifiedSizeBytes` when the caller has verified and stored the content itself, else
   * by consuming the workspace's upload receipt. Returns the existing record when already
   * finalized (concurrent finalizes all see the one record), undefined when there is neither
   * a verified size nor a receipt, or when the bytes were collected meanwhile (upload them again).
   */
  finalize(workspace: string, sha256: Sha256Hex, verifiedSizeBytes?: number): Promise<AssetRecord | undefined> {
    const key = workspaceKey(workspace, sha256);
    return readModifyWrite(this.#store, async (reads) => {
      const existing = await reads.get(this.#assets, key);
      if (existing) return { ops: [], result: existing };
      const receipt = verifiedSizeBytes === undefined ? await reads.get(this.#receipts, key) : undefined;
      const sizeBytes = verifiedSizeBytes ?? receipt?.sizeBytes;
      if (sizeBytes === undefined) return { ops: [], result: undefined };
      const hold = await this.#collector.holdOps(reads, workspace, sha256);
      if (!hold) return { ops: receipt ? [this.#receipts.deleteOp(key)] : [], result: undefined };
      const created: AssetRecord = { sha256, sizeBytes, finalizedAt: new Date().toISOString() };
      return { ops: [this.#assets.putOp(key, created), ...hold, ...(receipt ? [this.#receipts.deleteOp(key)] : [])], result: created };
    });
  }
}
