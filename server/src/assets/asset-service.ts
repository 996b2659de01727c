import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { AssetSchema, type AssetService, type FinalizeRequest, type PresignRequest } from "../../../gen/skillenv/assets/v1/assets_pb.js";
import { requireWorkspace } from "../auth/index.ts";
import { serviceError } from "../errors/index.ts";
import { SHA256_HEX } from "../storage/index.ts";
import type { AssetRecord, AssetRecords } from "./asset-records.ts";
import type { UploadTarget } from "./upload-target.ts";

export interface AssetServiceOptions {
  records: AssetRecords;
  target: UploadTarget;
  maxUploadBytes: number;
  uploadUrlTtlSecs: number;
}

export function createAssetService(options: AssetServiceOptions): ServiceImpl<typeof AssetService> {
  return {
    async presign(request: PresignRequest, context: HandlerContext) {
      const workspace = requireWorkspace(context);
      const sha256 = checkSha256(request.sha256);
      const sizeBytes = checkSize(request.sizeBytes, options.maxUploadBytes);
      if (await options.records.get(workspace, sha256)) return { exists: true };
      const expires = Math.floor(Date.now() / 1000) + options.uploadUrlTtlSecs;
      const put = await options.target.presign({ workspace, sha256, sizeBytes, expires }, new URL(context.url).origin);
      return {
        exists: false,
        uploadUrl: put.url,
        uploadHeaders: put.headers,
        expiresAt: timestampFromMs(expires * 1000),
      };
    },

    async finalize(request: FinalizeRequest, context: HandlerContext) {
      const workspace = requireWorkspace(context);
      const sha256 = checkSha256(request.sha256);
      const record = await options.target.finalize(workspace, sha256);
      if (!record) {
        throw serviceError("asset_not_found", `no upload of ${sha256} by this workspace; PUT the bytes to the presigned URL first`);
      }
      return { asset: assetMessage(record) };
    },
  };
}

export function assetMessage(record: AssetRecord) {
  return create(AssetSchema, {
    sha256: record.sha256,
    sizeBytes: BigInt(record.sizeBytes),
    finalizedAt: timestampFromMs(Date.parse(record.finalizedAt)),
  });
}

export function checkSha256(value: string): string {
  if (!SHA256_HEX.test(value)) {
    throw serviceError("invalid_sha256", "sha256 must be 64 lowercase hexadecimal characters");
  }
  return value;
}

function checkSize(value: bigint, max: number): number {
  if (value < 0n || value > BigInt(max)) {
    throw serviceError("invalid_size", `sizeBytes must be between 0 and ${max}`, { maxBytes: String(max) });
  }
  return Number(value);
}
