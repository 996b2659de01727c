import type { ServiceImpl } from "@connectrpc/connect";
import type { AssetService } from "../../../gen/skillenv/assets/v1/assets_pb.js";
import type { BlobStore, SecretSource, Store } from "../storage/index.ts";
import { AssetRecords, type AssetRecord } from "./asset-records.ts";
import { createAssetService } from "./asset-service.ts";
import { createUploadHandler } from "./upload-handler.ts";
import { UploadSigner } from "./upload-signer.ts";

export { CHECKSUM_HEADER, UPLOAD_PATH_PREFIX } from "./upload-signer.ts";
export { checkSha256 } from "./asset-service.ts";
export type { AssetRecord } from "./asset-records.ts";

export interface AssetsOptions {
  store: Store;
  blobs: BlobStore;
  /** Where the upload signing key is kept. */
  secrets: SecretSource;
  maxUploadBytes: number;
  uploadUrlTtlSecs: number;
  publicUrl: string | undefined;
}

export interface Assets {
  service: ServiceImpl<typeof AssetService>;
  uploads: ReturnType<typeof createUploadHandler>;
  /** The workspace's finalized asset, or undefined: what other features (skills) may bind. */
  finalized(workspace: string, sha256: string): Promise<AssetRecord | undefined>;
  /** Bytes of a finalized asset of the workspace. */
  read(workspace: string, sha256: string): Promise<Uint8Array | undefined>;
}

export async function createAssets(options: AssetsOptions): Promise<Assets> {
  const records = new AssetRecords(options.store);
  const signer = await UploadSigner.open(options.secrets);
  const { blobs, maxUploadBytes } = options;
  return {
    service: createAssetService({ ...options, records, signer }),
    uploads: createUploadHandler({ signer, blobs, records, maxUploadBytes }),
    finalized: (workspace, sha256) => records.get(workspace, sha256),
    async read(workspace, sha256) {
      return (await records.get(workspace, sha256)) ? blobs.read(sha256) : undefined;
    },
  };
}
