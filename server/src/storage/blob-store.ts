import { createHash } from "node:crypto";
import { serviceError } from "../errors/index.ts";

import type { Readable } from "node:stream";

/** SHA-256 as 64 lowercase hexadecimal characters. */
export type Sha256Hex = string;

export const SHA256_HEX = /^[0-9a-f]{64}$/;

export interface ExpectedContent {
  sha256: Sha256Hex;
  sizeBytes: number;
}

/**
 * Content-addressed bytes. The embedded implementation keeps files under the data directory;
 * an S3-compatible store implements the same contract. Blobs are immutable and shared by all
 * workspaces; which workspace may see which blob is recorded in metadata, never here.
 */
export interface BlobStore {
  /** Size of the blob, or undefined when absent. */
  stat(sha256: Sha256Hex): Promise<number | undefined>;
  /**
   * Streams bytes in, verifying length and hash on the way; only verified content becomes
   * visible. Throws size_mismatch or checksum_mismatch and leaves nothing behind otherwise.
   */
  write(expected: ExpectedContent, source: AsyncIterable<Uint8Array>): Promise<void>;
  read(sha256: Sha256Hex): Promise<Uint8Array>;
  /**
   * Opens a blob for reads of byte ranges, so a large blob is never held whole (a skill bundle is
   * read entry by entry); close it after use.
   */
  openRanges(sha256: Sha256Hex): Promise<BlobRanges>;
  /**
   * Removes the blob; removing an absent one is not an error. Only the bundle collection calls it
   * (server/src/assets/bundle-holders.ts), under a claim that every writer of the same bytes waits for.
   */
  delete(sha256: Sha256Hex): Promise<void>;
}

/** A blob opened for ranged reads. */
export interface BlobRanges {
  readonly size: number;
  /** Bytes [start, end); fewer only where the blob ends. */
  read(start: number, end: number): Promise<Uint8Array>;
  /** Bytes [start, end) as a stream. */
  stream(start: number, end: number): Readable;
  close(): Promise<void>;
}

/**
 * The source's chunks as they come, hashed and counted on the way: throws size_mismatch as soon as
 * it runs past the expected size, and size_mismatch or checksum_mismatch at its end. Every store
 * writes through it, so only verified content becomes visible.
 */
export async function* verifiedChunks(source: AsyncIterable<Uint8Array>, expected: ExpectedContent): AsyncGenerator<Uint8Array> {
  const hash = createHash("sha256");
  let size = 0;
  for await (const chunk of source) {
    size += chunk.byteLength;
    if (size > expected.sizeBytes) throw serviceError("size_mismatch", `body is longer than the signed size of ${expected.sizeBytes} bytes`);
    hash.update(chunk);
    yield chunk;
  }
  if (size !== expected.sizeBytes) throw serviceError("size_mismatch", `body has ${size} bytes, the signed size is ${expected.sizeBytes}`);
  const actual = hash.digest("hex");
  if (actual !== expected.sha256) throw serviceError("checksum_mismatch", `body hashes to ${actual}, the signed SHA-256 is ${expected.sha256}`);
}
