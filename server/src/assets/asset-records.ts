import { KeyedLock, workspaceKey, type Sha256Hex, type Store, type Table } from "../storage/index.ts";

/** Proof that a workspace PUT verified bytes through a signed URL; consumed by finalize. */
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
  readonly #lock = new KeyedLock();
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
   * Turns the workspace's upload receipt into an asset, atomically. Returns the existing record
   * when already finalized, undefined when this workspace never uploaded the content.
   */
  async finalize(workspace: string, sha256: Sha256Hex): Promise<AssetRecord | undefined> {
    const key = workspaceKey(workspace, sha256);
    // Serialised per key: concurrent finalizes of one upload all see the one record it becomes.
    return this.#lock.run(key, async () => {
      const existing = await this.#assets.get(key);
      if (existing) return existing;
      const receipt = await this.#receipts.get(key);
      if (!receipt) return undefined;
      const record: AssetRecord = { sha256, sizeBytes: receipt.sizeBytes, finalizedAt: new Date().toISOString() };
      await this.#store.write([this.#assets.putOp(key, record), this.#receipts.deleteOp(key)]);
      this.#remember(key, record);
      return record;
    });
  }

  /** The oldest remembered record makes room for a new one. */
  #remember(key: string, record: AssetRecord): void {
    if (this.#finalized.size >= REMEMBERED_RECORDS) this.#finalized.delete(this.#finalized.keys().next().value!);
    this.#finalized.set(key, record);
  }
}
