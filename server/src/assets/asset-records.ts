import { readModifyWrite, workspaceKey, type Sha256Hex, type Store, type Table } from "../storage/index.ts";

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

/** Finalized records kept in memory: Presign asks for one per call, and its LevelDB read was most of the call's own cost. */
const REMEMBERED_RECORDS = 4096;

/**
 * Which workspace may see which content. Bytes are shared in the blob store; these records are
 * the only way a workspace learns that content exists, so there is no cross-workspace oracle.
 */
export class AssetRecords {
  readonly #store: Store;
  readonly #receipts: Table<UploadReceipt>;
  readonly #assets: Table<AssetRecord>;
  /** A finalized record never changes and is never deleted, so a remembered one is never stale. */
  readonly #finalized = new Map<string, AssetRecord>();

  constructor(store: Store) {
    this.#store = store;
    this.#receipts = store.table<UploadReceipt>("upload-receipts");
    this.#assets = store.table<AssetRecord>("assets");
  }

  async recordUpload(workspace: string, sha256: Sha256Hex, sizeBytes: number): Promise<void> {
    await this.#receipts.put(workspaceKey(workspace, sha256), { sizeBytes, uploadedAt: new Date().toISOString() });
  }

  async get(workspace: string, sha256: Sha256Hex): Promise<AssetRecord | undefined> {
    const key = workspaceKey(workspace, sha256);
    const remembered = this.#finalized.get(key);
    if (remembered) return remembered;
    const record = await this.#assets.get(key);
    if (record) this.#remember(key, record);
    return record;
  }

  /**
   * Records the workspace's asset, atomically and safely across processes sharing the store:
   * from `verifiedSizeBytes` when the caller has verified and stored the content itself, else
   * by consuming the workspace's upload receipt. Returns the existing record when already
   * finalized (concurrent finalizes all see the one record), undefined when there is neither
   * a verified size nor a receipt.
   */
  async finalize(workspace: string, sha256: Sha256Hex, verifiedSizeBytes?: number): Promise<AssetRecord | undefined> {
    const key = workspaceKey(workspace, sha256);
    const record = await readModifyWrite(this.#store, async (reads) => {
      const existing = await reads.get(this.#assets, key);
      if (existing) return { ops: [], result: existing };
      const receipt = verifiedSizeBytes === undefined ? await reads.get(this.#receipts, key) : undefined;
      const sizeBytes = verifiedSizeBytes ?? receipt?.sizeBytes;
      if (sizeBytes === undefined) return { ops: [], result: undefined };
      const created: AssetRecord = { sha256, sizeBytes, finalizedAt: new Date().toISOString() };
      return { ops: [this.#assets.putOp(key, created), ...(receipt ? [this.#receipts.deleteOp(key)] : [])], result: created };
    });
    if (record) this.#remember(key, record);
    return record;
  }

  /** The oldest remembered record makes room for a new one. */
  #remember(key: string, record: AssetRecord): void {
    if (this.#finalized.size >= REMEMBERED_RECORDS) this.#finalized.delete(this.#finalized.keys().next().value!);
    this.#finalized.set(key, record);
  }
}
