import type { ServiceImpl } from "@connectrpc/connect";
import type { AssetService } from "../../../gen/skillenv/assets/v1/assets_pb.js";
import type { RawEndpoint } from "../http/index.ts";
import type { BlobStore, ConditionalReads, SecretSource, StagedUploads, Store, WriteOp } from "../storage/index.ts";
import { AssetRecords, type AssetRecord } from "./asset-records.ts";
import { BundleCollector } from "./bundle-holders.ts";
import { createAssetService } from "./asset-service.ts";
import { EmbeddedUploadTarget } from "./embedded-upload-target.ts";
import { StagedUploadTarget } from "./staged-upload-target.ts";
import { UploadSigner } from "./upload-signer.ts";
import type { UploadTarget } from "./upload-target.ts";

export { CHECKSUM_HEADER, UPLOAD_PATH_PREFIX } from "./upload-signer.ts";
export { checkSha256 } from "./asset-service.ts";
export type { AssetRecord } from "./asset-records.ts";
export type { BlobHolders } from "./bundle-holders.ts";

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
  /** The workspace's finalized asset, read as a condition of the caller's batch (a skill version binding it). */
  finalizedIn(reads: ConditionalReads, workspace: string, sha256: string): Promise<AssetRecord | undefined>;
  /**
   * Ops of the caller's batch removing the workspace's asset (its last skill version binding it
   * goes); when `collect`, call `collect` once the batch is written.
   */
  releaseOps(reads: ConditionalReads, workspace: string, sha256: string): Promise<{ ops: WriteOp[]; collect: boolean }>;
  /** Before bytes are written that are read by their hash without an asset record (artifacts): never collect them. */
  keepForGood(sha256: string): Promise<void>;
  /** Deletes the bytes if nobody holds them any more (BundleCollector). */
  collect(sha256: string): Promise<boolean>;
  /** Collects what a crash left behind (BundleCollector.sweep) now and every hour. */
  startCollection(): void;
  stopCollection(): void;
}

const COLLECTION_SWEEP_MS = 60 * 60 * 1000;
/** A collection claim older than this died with its process. */
const STALE_COLLECTION_MS = 10 * 60 * 1000;

export async function createAssets(options: AssetsOptions): Promise<Assets> {
  const { blobs, maxUploadBytes } = options;
  // A write holds its bytes for as long as its upload URL lives, and an hour more for its finalize.
  const collector = new BundleCollector(options.store, blobs, {
    writeHoldMs: (options.uploadUrlTtlSecs + 3600) * 1000,
    staleCollectionMs: STALE_COLLECTION_MS,
  });
  const records = new AssetRecords(options.store, collector);
  const target: UploadTarget = options.staged
    ? new StagedUploadTarget({ staged: options.staged, records, collector, maxUploadBytes })
    : new EmbeddedUploadTarget({ signer: await UploadSigner.open(options.secrets), records, collector, blobs, maxUploadBytes, publicUrl: options.publicUrl });
  let sweeper: NodeJS.Timeout | undefined;
  return {
    service: createAssetService({ ...options, records, target }),
    uploads: target.endpoint,
    finalized: (workspace, sha256) => records.get(workspace, sha256),
    async read(workspace, sha256) {
      return (await records.get(workspace, sha256)) ? blobs.read(sha256) : undefined;
    },
    finalizedIn: (reads, workspace, sha256) => records.getIn(reads, workspace, sha256),
    releaseOps: (reads, workspace, sha256) => records.releaseOps(reads, workspace, sha256),
    collect: (sha256) => collector.collect(sha256),
    keepForGood: (sha256) => collector.keepForGood(sha256),
    startCollection() {
      const sweep = () => void collector.sweep().catch(() => undefined);
      sweep();
      sweeper = setInterval(sweep, COLLECTION_SWEEP_MS);
      sweeper.unref();
    },
    stopCollection: () => clearInterval(sweeper),
  };
}
