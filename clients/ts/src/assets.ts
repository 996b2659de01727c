import type { Client } from "@connectrpc/connect";
import type { AssetService } from "../gen/skillenv/assets/v1/assets_pb.js";
import { sha256Hex } from "./bundle/index.ts";

export type FetchFunction = (input: string, init: RequestInit) => Promise<Response>;

export interface UploadResult {
  sha256: string;
  sizeBytes: number;
  /** False when the workspace already had the bytes and nothing was sent. */
  uploaded: boolean;
}

/** Thrown when the object store refuses an upload; `code` is the service's stable error code. */
export class UploadError extends Error {
  override name = "UploadError";
  readonly code: string;
  readonly status: number;

  constructor(code: string, message: string, status: number) {
    super(message);
    this.code = code;
    this.status = status;
  }
}

/**
 * presign -> PUT (skipped on a dedup hit) -> finalize. Safe to repeat: every step is idempotent.
 * Pass `knownSha256` when the caller already hashed the bytes (a skill bundle has); the server
 * verifies it on the PUT in any case.
 */
export async function uploadAsset(assets: Client<typeof AssetService>, bytes: Uint8Array, fetchFn: FetchFunction, knownSha256?: string): Promise<UploadResult> {
  const sha256 = knownSha256 ?? (await sha256Hex(bytes));
  const sizeBytes = bytes.byteLength;
  const presigned = await assets.presign({ sha256, sizeBytes: BigInt(sizeBytes) });
  if (presigned.exists) return { sha256, sizeBytes, uploaded: false };
  if (presigned.uploadUrl === undefined) throw new Error("presign answered neither exists nor an upload URL");
  const response = await fetchFn(presigned.uploadUrl, {
    method: "PUT",
    headers: presigned.uploadHeaders,
    body: bytes as Uint8Array<ArrayBuffer>,
  });
  if (!response.ok) throw await uploadErrorFrom(response);
  await assets.finalize({ sha256 });
  return { sha256, sizeBytes, uploaded: true };
}

async function uploadErrorFrom(response: Response): Promise<UploadError> {
  const text = await response.text();
  try {
    const body = JSON.parse(text) as { code?: string; message?: string };
    return new UploadError(body.code ?? "unknown", body.message ?? text, response.status);
  } catch {
    return new UploadError("unknown", `upload failed with HTTP ${response.status}: ${text}`, response.status);
  }
}
