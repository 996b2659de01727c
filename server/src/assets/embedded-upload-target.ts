import type { BlobStore } from "../storage/index.ts";
import type { AssetRecord, AssetRecords } from "./asset-records.ts";
import type { BundleCollector } from "./bundle-holders.ts";
import { createUploadHandler } from "./upload-handler.ts";
import { CHECKSUM_HEADER, type UploadGrant, type UploadSigner } from "./upload-signer.ts";
import type { UploadTarget } from "./upload-target.ts";

/**
 * Uploads to the service's own endpoint, which verifies the bytes as they arrive, stores them
 * and leaves the workspace an upload receipt; finalize turns the receipt into the asset.
 */
export class EmbeddedUploadTarget implements UploadTarget {
  readonly endpoint;
  readonly #signer: UploadSigner;
  readonly #records: AssetRecords;
  readonly #blobs: BlobStore;
  readonly #publicUrl: string | undefined;

  constructor(options: {
    signer: UploadSigner;
    records: AssetRecords;
    collector: BundleCollector;
    blobs: BlobStore;
    maxUploadBytes: number;
    publicUrl: string | undefined;
  }) {
    this.#signer = options.signer;
    this.#records = options.records;
    this.#blobs = options.blobs;
    this.#publicUrl = options.publicUrl;
    this.endpoint = createUploadHandler(options);
  }

  async presign(grant: UploadGrant, origin: string) {
    return {
      url: (this.#publicUrl ?? origin) + this.#signer.sign(grant),
      headers: { "content-type": "application/octet-stream", [CHECKSUM_HEADER]: grant.sha256 },
    };
  }

  async finalize(workspace: string, sha256: string): Promise<AssetRecord | undefined> {
    const record = await this.#records.finalize(workspace, sha256);
    return record && (await this.#blobs.stat(sha256)) !== undefined ? record : undefined;
  }
}
