import type { StagedUploads } from "../storage/index.ts";
import type { AssetRecord, AssetRecords } from "./asset-records.ts";
import type { UploadGrant } from "./upload-signer.ts";
import type { UploadTarget } from "./upload-target.ts";

/**
 * Uploads straight to the object store, to a staging name per workspace and hash
 * (`<workspace>/<sha256>`), so one workspace can neither finalize nor overwrite another's upload.
 * Finalize promotes the staged object to content only once the service has verified it, records
 * the asset, then removes the staged object.
 */
export class StagedUploadTarget implements UploadTarget {
  readonly endpoint = undefined;
  readonly #staged: StagedUploads;
  readonly #records: AssetRecords;
  readonly #maxUploadBytes: number;

  constructor(options: { staged: StagedUploads; records: AssetRecords; maxUploadBytes: number }) {
    this.#staged = options.staged;
    this.#records = options.records;
    this.#maxUploadBytes = options.maxUploadBytes;
  }

  presign(grant: UploadGrant) {
    const expiresInSecs = Math.max(1, grant.expires - Math.floor(Date.now() / 1000));
    return this.#staged.presignUpload(stagingName(grant.workspace, grant.sha256), grant, expiresInSecs);
  }

  async finalize(workspace: string, sha256: string): Promise<AssetRecord | undefined> {
    const existing = await this.#records.get(workspace, sha256);
    if (existing) return existing;
    const name = stagingName(workspace, sha256);
    const sizeBytes = await this.#staged.promoteUpload(name, sha256, this.#maxUploadBytes);
    // No staged object: never uploaded, or a concurrent finalize of the same upload has just recorded it.
    if (sizeBytes === undefined) return this.#records.get(workspace, sha256);
    // Removed only once recorded, so a concurrent finalize finds either the staged object or the record.
    const record = await this.#records.finalize(workspace, sha256, sizeBytes);
    await this.#staged.discardUpload(name);
    return record;
  }
}

/** Workspace names and hashes are both key-safe ([A-Za-z0-9_.-], hex). */
function stagingName(workspace: string, sha256: string): string {
  return `${workspace}/${sha256}`;
}
