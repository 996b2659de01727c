import { serviceError } from "../errors/index.ts";
import type { NodeRequest, RawEndpoint, RawEndpointResult } from "../http/index.ts";
import type { BlobStore } from "../storage/index.ts";
import type { AssetRecords } from "./asset-records.ts";
import type { BundleCollector } from "./bundle-holders.ts";
import { CHECKSUM_HEADER, UPLOAD_PATH_PREFIX, type UploadGrant, type UploadSigner } from "./upload-signer.ts";

export interface UploadHandlerOptions {
  signer: UploadSigner;
  blobs: BlobStore;
  records: AssetRecords;
  collector: BundleCollector;
  maxUploadBytes: number;
}

/**
 * The embedded object store's upload endpoint: `PUT <signed URL>`. It stands where an
 * S3-compatible store would in a larger deployment, which is why it is a plain HTTP endpoint
 * authorised by the URL's signature rather than an API method with a bearer key.
 * Throws a service error, having stored nothing, when anything about the request is off,
 * including a body that stalls or is cut short.
 */
export function createUploadHandler(options: UploadHandlerOptions): RawEndpoint {
  return {
    matches(pathname: string): boolean {
      return pathname.startsWith(UPLOAD_PATH_PREFIX);
    },

    async handle(req: NodeRequest, url: URL, body: AsyncIterable<Uint8Array>): Promise<RawEndpointResult> {
      if (req.method !== "PUT") throw serviceError("route_not_found", "the object store accepts PUT only");
      const grant = options.signer.verify(url, Date.now() / 1000);
      checkHeaders(req, grant, options.maxUploadBytes);
      // Held before written, so a collection of the same bytes cannot delete them under this upload.
      await options.collector.beforeWrite(grant.workspace, grant.sha256);
      await options.blobs.write(grant, body);
      await options.records.recordUpload(grant.workspace, grant.sha256, grant.sizeBytes);
      return { workspace: grant.workspace, body: { sha256: grant.sha256, sizeBytes: String(grant.sizeBytes) } };
    },
  };
}

function checkHeaders(req: NodeRequest, grant: UploadGrant, maxUploadBytes: number): void {
  const checksum = req.headers[CHECKSUM_HEADER];
  if (checksum !== grant.sha256) {
    throw serviceError("checksum_mismatch", `the ${CHECKSUM_HEADER} header must equal the signed SHA-256 ${grant.sha256}`);
  }
  const declared = req.headers["content-length"];
  if (declared !== undefined && Number(declared) > maxUploadBytes) {
    throw serviceError("payload_too_large", `the body exceeds the upload limit of ${maxUploadBytes} bytes`);
  }
  if (declared !== undefined && Number(declared) !== grant.sizeBytes) {
    throw serviceError("size_mismatch", `Content-Length ${declared} differs from the signed size ${grant.sizeBytes}`);
  }
}
