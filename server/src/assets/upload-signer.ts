import { createHmac, timingSafeEqual } from "node:crypto";
import { serviceError } from "../errors/index.ts";
import { readOrCreateKey, SHA256_HEX, type SecretSource, type Sha256Hex } from "../storage/index.ts";

/** Path prefix of the embedded object store's signed upload URLs. */
export const UPLOAD_PATH_PREFIX = "/objects/sha256/";
/** Header carrying the SHA-256 (hex) of the body; its value is bound by the signature. */
export const CHECKSUM_HEADER = "x-content-sha256";

const SIGNING_KEY_FILE = "upload-signing-key";

/** What a signed upload URL authorises: one workspace may PUT exactly these bytes until expiry. */
export interface UploadGrant {
  workspace: string;
  sha256: Sha256Hex;
  sizeBytes: number;
  /** Unix seconds. */
  expires: number;
}

/**
 * Signs and verifies upload URLs with HMAC-SHA256 over every parameter, so a URL cannot be
 * moved to another workspace, hash, size or expiry without invalidating it.
 */
export class UploadSigner {
  readonly #key: Buffer;

  constructor(key: Buffer) {
    this.#key = key;
  }

  /** The key is generated once into the secrets' source; every instance sharing it accepts the others' URLs. */
  static async open(secrets: SecretSource): Promise<UploadSigner> {
    return new UploadSigner(await readOrCreateKey(secrets, SIGNING_KEY_FILE));
  }

  /** Path and query of the upload URL (the caller prefixes the public base URL). */
  sign(grant: UploadGrant): string {
    const query = new URLSearchParams({
      workspace: grant.workspace,
      size: String(grant.sizeBytes),
      expires: String(grant.expires),
      signature: this.#signature(grant),
    });
    return `${UPLOAD_PATH_PREFIX}${grant.sha256}?${query}`;
  }

  /** Verifies a request URL; the signature is checked before expiry so expiry is only reported for genuine URLs. */
  verify(url: URL, nowSecs: number): UploadGrant {
    const grant = parseGrant(url);
    const expected = Buffer.from(this.#signature(grant), "base64url");
    const given = Buffer.from(url.searchParams.get("signature") ?? "", "base64url");
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
      throw serviceError("upload_url_invalid", "the upload URL's signature does not match; request a new URL with presign");
    }
    if (grant.expires < nowSecs) {
      throw serviceError("upload_url_expired", "the upload URL has expired; request a new one with presign");
    }
    return grant;
  }

  #signature(grant: UploadGrant): string {
    const payload = ["PUT", grant.workspace, grant.sha256, grant.sizeBytes, grant.expires].join("\n");
    return createHmac("sha256", this.#key).update(payload).digest("base64url");
  }
}

function parseGrant(url: URL): UploadGrant {
  const sha256 = url.pathname.slice(UPLOAD_PATH_PREFIX.length);
  const size = url.searchParams.get("size") ?? "";
  const expires = url.searchParams.get("expires") ?? "";
  const workspace = url.searchParams.get("workspace");
  if (!SHA256_HEX.test(sha256) || !/^[0-9]{1,15}$/.test(size) || !/^[0-9]{1,12}$/.test(expires) || workspace === null) {
    throw serviceError("upload_url_invalid", "the upload URL is malformed; use the URL returned by presign unchanged");
  }
  return { workspace, sha256, sizeBytes: Number(size), expires: Number(expires) };
}
