import type { ExpectedContent, Sha256Hex } from "./blob-store.ts";

/** A signed PUT: the URL and the headers the request must carry as they are. */
export interface SignedPut {
  url: string;
  headers: Record<string, string>;
}

/**
 * Uploads that clients PUT straight to the blob store under a name, outside the service, and
 * that become content only when promoted. Guarantees:
 *
 * - an upload is never visible as content before `promoteUpload` verified its size and SHA-256
 *   here, whatever the store itself checked of the PUT;
 * - a promotion verifies bytes nobody can replace while they are checked (the presigned URL
 *   stays usable until it expires);
 * - promoting again, or after the content exists, is harmless: content is immutable.
 */
export interface StagedUploads {
  /** A PUT of exactly `expected` to the upload `name`, valid for `expiresInSecs`. */
  presignUpload(name: string, expected: ExpectedContent, expiresInSecs: number): Promise<SignedPut>;
  /**
   * Makes the upload `name` the content `sha256` once verified and returns its size; undefined
   * when there is no such upload. An upload over `maxBytes` or of another hash is removed and
   * refused with size_mismatch or checksum_mismatch. The upload stays otherwise.
   */
  promoteUpload(name: string, sha256: Sha256Hex, maxBytes: number): Promise<number | undefined>;
  /** The names of the uploads that start with `prefix`. */
  listUploads(prefix: string): Promise<string[]>;
  /** Removes the upload `name`, if any. */
  discardUpload(name: string): Promise<void>;
}
