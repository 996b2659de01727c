import type { RawEndpoint } from "../http/index.ts";
import type { SignedPut } from "../storage/index.ts";
import type { AssetRecord } from "./asset-records.ts";
import type { UploadGrant } from "./upload-signer.ts";

/**
 * Where presigned uploads go, and how finalize turns one into a workspace asset: the service's
 * own upload endpoint (embedded) or the object store itself (S3). Either way a finalized asset's
 * bytes were verified against its SHA-256 by the service, and only the workspace that uploaded
 * them can finalize them.
 */
export interface UploadTarget {
  /** The PUT that uploads the grant's bytes; `origin` is the scheme and authority the caller used. */
  presign(grant: UploadGrant, origin: string): Promise<SignedPut>;
  /**
   * The workspace's asset once its upload is verified and recorded (the existing record when
   * finalized already); undefined when the workspace never uploaded the content. Throws
   * checksum_mismatch or size_mismatch for an upload found wrong only now.
   */
  finalize(workspace: string, sha256: string): Promise<AssetRecord | undefined>;
  /** The service's own endpoint receiving the PUTs, when they come to the service. */
  readonly endpoint: RawEndpoint | undefined;
}
