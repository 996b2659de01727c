import { randomUUID } from "node:crypto";
import { ConnectError } from "@connectrpc/connect";
import { KeyedLock, type StagedUploads } from "../storage/index.ts";
import type { AssetRecord, AssetRecords } from "./asset-records.ts";
import type { BundleCollector } from "./bundle-holders.ts";
import type { UploadGrant } from "./upload-signer.ts";
import type { UploadTarget } from "./upload-target.ts";

/**
 * Uploads straight to the object store, to a staging name of its own per presign under the
 * workspace and hash (`<workspace>/<sha256>/<random>`), so one workspace can neither finalize nor
 * overwrite another's upload, and uploads of the same bytes at once never write one object
 * together (an S3 PUT replaces an object whole, but not every S3-compatible store does). Finalize
 * promotes the first staged upload of the hash that verifies to content, records the asset, then
 * removes that upload; uploads left over (a concurrent upload of the same bytes, a refused one)
 * are for the bucket's lifecycle rule (docs/operations.md).
 */
export class StagedUploadTarget implements UploadTarget {
  readonly endpoint = undefined;
  readonly #staged: StagedUploads;
  readonly #records: AssetRecords;
  readonly #collector: BundleCollector;
  readonly #maxUploadBytes: number;
  readonly #lock = new KeyedLock();

  constructor(options: { staged: StagedUploads; records: AssetRecords; collector: BundleCollector; maxUploadBytes: number }) {
    this.#staged = options.staged;
    this.#records = options.records;
    this.#collector = options.collector;
    this.#maxUploadBytes = options.maxUploadBytes;
  }

  presign(grant: UploadGrant) {
    const expiresInSecs = Math.max(1, grant.expires - Math.floor(Date.now() / 1000));
    return this.#staged.presignUpload(`${stagingPrefix(grant.workspace, grant.sha256)}${randomUUID()}`, grant, expiresInSecs);
  }

  /**
   * Finalizes of one workspace and hash in this process take turns, and each finds the record the
   * one before made: so the content object is written once, not once per concurrent finalize, and
   * never rewritten while a PutSkill that followed the first finalize reads it. (S3 replaces an
   * object atomically, so finalizes through several replicas are safe anyway; not every
   * S3-compatible store does, docs/operations.md.)
   */
  finalize(workspace: string, sha256: string): Promise<AssetRecord | undefined> {
    return this.#lock.run(`${workspace}/${sha256}`, () => this.#finalize(workspace, sha256));
  }

  async #finalize(workspace: string, sha256: string): Promise<AssetRecord | undefined> {
    const existing = await this.#records.get(workspace, sha256);
    if (existing) return existing;
    let refusal: unknown;
    const uploads = await this.#staged.listUploads(stagingPrefix(workspace, sha256));
    // Held before a promotion writes the content, so a collection of the same bytes cannot delete it meanwhile.
    if (uploads.length > 0) await this.#collector.beforeWrite(workspace, sha256);
    for (const name of uploads) {
      let sizeBytes: number | undefined;
      try {
        sizeBytes = await this.#staged.promoteUpload(name, sha256, this.#maxUploadBytes);
      } catch (error) {
        // Another upload of the same bytes may still verify; the refusal is answered when none does.
        if (!(error instanceof ConnectError)) throw error;
        refusal = error;
        continue;
      }
      // Gone: a concurrent finalize promoted it (and recorded the asset first).
      if (sizeBytes === undefined) continue;
      // Removed only once recorded, so a concurrent finalize finds either the staged object or the record.
      const record = await this.#records.finalize(workspace, sha256, sizeBytes);
      await this.#staged.discardUpload(name);
      return record;
    }
    // Nothing staged verified: a concurrent finalize may have recorded the asset meanwhile.
    const recorded = await this.#records.get(workspace, sha256);
    if (recorded || refusal === undefined) return recorded;
    throw refusal;
  }
}

/** Workspace names and hashes are both key-safe ([A-Za-z0-9_.-], hex). */
function stagingPrefix(workspace: string, sha256: string): string {
  return `${workspace}/${sha256}/`;
}
