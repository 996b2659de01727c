import type { ServiceImpl } from "@connectrpc/connect";
import type { AssetService } from "../../../gen/skillenv/assets/v1/assets_pb.js";
import type { RawEndpoint } from "../http/index.ts";
import type { BlobStore, SecretSource, StagedUploads, Store } from "../storage/index.ts";
import { AssetRecords, type AssetRecord } from "./asset-records.ts";
import { createAssetService } from "./asset-service.ts";
import { EmbeddedUploadTarget } from "./embedded-upload-target.ts";
import { StagedUploadTarget } from "./staged-upload-target.ts";
import { UploadSigner } from "./upload-signer.ts";
import type { UploadTarget } from "./upload-target.ts";

export { CHECKSUM_HEADER, UPLOAD_PATH_PREFIX } from "./upload-signer.ts";
export { checkSha256 } from "./asset-service.ts";
export type { AssetRecord } from "./asset-records.ts";

export interface AssetsOptions {
  store: Store;
  blobs: BlobStore;
  /** Set: clients upload straight to the object store (S3), and the service's upload endpoint is not served. */
  staged?: StagedUploads | undefined;
  /** Where the embedded upload endpoint's signing key is kept. */
  secrets: SecretSource;
  maxUploadBytes: number;
  uploadUrlTtlSecs: number;
  publicUrl: string | undefined;
}

export interface Assets {
  service: ServiceImpl<typeof AssetService>;
  /** The service's own upload endpoint; undefined when uploads go to the object store. */
  uploads: RawEndpoint | undefined;
  /** The workspace's finalized asset, or undefined: what other features (skills) may bind. */
  finalized(workspace: string, sha256: string): Promise<AssetRecord | undefined>;
  /** Bytes of a finalized asset of the workspace. */
  read(workspace: string, sha256: string): Promise<Uint8Array | undefined>;
}

export async function createAssets(options: AssetsOptions): Promise<Assets> {
  const records = new AssetRecords(options.store);
  const { blobs, maxUploadBytes } = options;
  const target: UploadTarget = options.staged
    ? new StagedUploadTarget({ staged: options.staged, records, maxUploadBytes })
    : new EmbeddedUploadTarget({ signer: await UploadSigner.open(options.secrets), records, blobs, maxUploadBytes, publicUrl: options.publicUrl });
  return {
    service: createAssetService({ ...options, records, target }),
    uploads: target.endpoint,
    finalized: (workspace, sha256) => records.get(workspace, sha256),
    async read(workspace, sha256) {
      return (await records.get(workspace, sha256)) ? blobs.read(sha256) : undefined;
    },
  };
}
