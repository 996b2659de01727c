import { createHash, randomUUID } from "node:crypto";
import { Readable } from "node:stream";
import { finished } from "node:stream/promises";
import {
  ChecksumMode,
  CopyObjectCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  S3ServiceException,
} from "@aws-sdk/client-s3";
import { getSignedUrl } from "@aws-sdk/s3-request-presigner";
import { ConnectError } from "@connectrpc/connect";
import { serviceError } from "../errors/index.ts";
import { verifiedChunks, type BlobRanges, type BlobStore, type ExpectedContent, type Sha256Hex } from "./blob-store.ts";
import type { S3Location } from "./s3-location.ts";
import type { SignedPut, StagedUploads } from "./staged-uploads.ts";
import { StorageError } from "./store.ts";

/** The checksum header S3 verifies a PUT's body against; its value is the SHA-256, base64. */
const CHECKSUM_HEADER = "x-amz-checksum-sha256";

/**
 * Blobs in an S3-compatible bucket, under the location's prefix:
 *
 * - `sha256/<hash>`: content, written only once verified here (whatever the store verifies
 *   itself), so a reader of a content key always gets the bytes of its hash;
 * - `tmp/<uuid>`: a write or a promotion in progress, private to this service; a crash can leave
 *   one behind (a lifecycle rule removes them, docs/operations.md);
 * - `uploads/<name>`: objects clients PUT through presigned URLs, unverified until promoted;
 * - `runs/<runId>/<sha256>`: runs' skill snapshots (server/src/runs/run-assets.ts), out of the
 *   bundle collection's reach, removed with their run.
 *
 * Every failure of the store is a StorageError naming the operation and the key, never
 * credentials (they come from the SDK's default chain and stay inside the client).
 */
export class S3BlobStore implements BlobStore, StagedUploads {
  readonly #client: S3Client;
  readonly #bucket: string;
  readonly #prefix: string;

  private constructor(client: S3Client, location: S3Location) {
    this.#client = client;
    this.#bucket = location.bucket;
    this.#prefix = location.prefix;
  }

  /** Checks that the bucket answers, so a wrong URL or missing credentials stop startup rather than the first upload. */
  static async open(location: S3Location): Promise<S3BlobStore> {
    const client = new S3Client({
      ...(location.endpoint ? { endpoint: location.endpoint } : {}),
      ...(location.region ? { region: location.region } : {}),
      forcePathStyle: location.forcePathStyle,
      // Checksums only where an operation requires one: this store verifies content itself, and an
      // automatic CRC32 would turn streamed bodies into aws-chunked ones that not every store decodes.
      requestChecksumCalculation: "WHEN_REQUIRED",
      responseChecksumValidation: "WHEN_REQUIRED",
    });
    const store = new S3BlobStore(client, location);
    await store.#call("HeadBucket", "", () => client.send(new HeadBucketCommand({ Bucket: location.bucket })));
    return store;
  }

  async stat(sha256: Sha256Hex): Promise<number | undefined> {
    return (await this.#head(this.#contentKey(sha256)))?.size;
  }

  async read(sha256: Sha256Hex): Promise<Uint8Array> {
    const key = this.#contentKey(sha256);
    return this.#call("GetObject", key, async () => {
      const object = await this.#client.send(new GetObjectCommand({ Bucket: this.#bucket, Key: key }));
      return object.Body!.transformToByteArray();
    });
  }

  /** Each range is one GetObject; a stream holds one response's buffers at a time, never the blob. */
  async openRanges(sha256: Sha256Hex): Promise<BlobRanges> {
    const key = this.#contentKey(sha256);
    const head = await this.#head(key);
    if (!head) throw new StorageError(`S3 object ${key} is missing`);
    const { size } = head;
    const body = async (start: number, end: number) => {
      const last = Math.min(end, size) - 1;
      if (last < start) return undefined;
      return this.#call("GetObject", key, async () => {
        const object = await this.#client.send(new GetObjectCommand({ Bucket: this.#bucket, Key: key, Range: `bytes=${start}-${last}` }));
        return object.Body as Readable;
      });
    };
    return {
      size,
      async read(start, end) {
        const stream = await body(start, end);
        return stream ? Buffer.concat(await stream.toArray()) : new Uint8Array(0);
      },
      stream(start, end) {
        return Readable.from(
          (async function* () {
            const stream = await body(start, end);
            if (stream) yield* stream;
          })(),
          { objectMode: false },
        );
      },
      close: async () => {},
    };
  }

  /**
   * Streams the source to a private temporary key while hashing and counting it, and copies it
   * to the content key only once it verified; a source of the wrong size or hash aborts the PUT.
   * The temporary object is removed either way.
   */
  async write(expected: ExpectedContent, source: AsyncIterable<Uint8Array>): Promise<void> {
    const temp = this.#tempKey();
    const abort = new AbortController();
    let refusal: unknown;
    const body = Readable.from(
      (async function* () {
        try {
          yield* verifiedChunks(source, expected);
        } catch (error) {
          refusal = error;
          abort.abort();
          throw error;
        }
      })(),
      { objectMode: false },
    );
    const verified = finished(body);
    verified.catch(() => {});
    try {
      const put = new PutObjectCommand({ Bucket: this.#bucket, Key: temp, Body: body, ContentLength: expected.sizeBytes });
      await this.#call("PutObject", temp, () => this.#client.send(put, { abortSignal: abort.signal })).catch((error) => {
        throw refusal ?? error;
      });
      // The store may answer once it has the declared length, before the source's end (and its checks) is read.
      body.resume();
      await verified;
      await this.#copy(temp, this.#contentKey(expected.sha256));
    } finally {
      // A PUT that failed for the store's reasons leaves the source unread: release it.
      body.destroy();
      await this.#delete(temp);
    }
  }

  /** The signature covers the SHA-256 checksum header and the length, which S3 then checks (s3rver does not: docs/operations.md). */
  async presignUpload(name: string, expected: ExpectedContent, expiresInSecs: number): Promise<SignedPut> {
    const checksum = Buffer.from(expected.sha256, "hex").toString("base64");
    const command = new PutObjectCommand({ Bucket: this.#bucket, Key: this.#uploadKey(name), ChecksumSHA256: checksum, ContentLength: expected.sizeBytes });
    const url = await this.#call("presign", this.#uploadKey(name), () =>
      getSignedUrl(this.#client, command, {
        expiresIn: expiresInSecs,
        // Left as headers (not moved into the query), so the client must send them and S3 checks them.
        unhoistableHeaders: new Set([CHECKSUM_HEADER]),
        signableHeaders: new Set(["content-length"]),
      }),
    );
    return { url, headers: { [CHECKSUM_HEADER]: checksum, "content-length": String(expected.sizeBytes) } };
  }

  /**
   * The upload is first copied to a private temporary key (the presigned URL could replace it
   * while it is checked); the copy's SHA-256 is the store's own checksum when it reports one (it
   * is asked to compute one), else the hash of its bytes, read once.
   */
  async promoteUpload(name: string, sha256: Sha256Hex, maxBytes: number): Promise<number | undefined> {
    const upload = this.#uploadKey(name);
    const temp = this.#tempKey();
    try {
      // Asking for a SHA-256 makes a store that computes checksums compute one of the copy's bytes.
      const copied = await this.#copy(upload, temp, { ChecksumAlgorithm: "SHA256" });
      if (!copied) return undefined;
      const head = await this.#head(temp, { checksum: true });
      if (!head) throw new StorageError(`S3 object ${temp} vanished after it was copied`);
      if (head.size > maxBytes) {
        await this.#delete(upload);
        throw serviceError("size_mismatch", `the upload has ${head.size} bytes, more than the upload limit of ${maxBytes}`);
      }
      const actual = head.sha256 ?? (await this.#hash(temp));
      if (actual !== sha256) {
        await this.#delete(upload);
        throw serviceError("checksum_mismatch", `the upload hashes to ${actual}, not the SHA-256 ${sha256} it was presigned for`);
      }
      await this.#copy(temp, this.#contentKey(sha256));
      return head.size;
    } finally {
      await this.#delete(temp);
    }
  }

  async listUploads(prefix: string): Promise<string[]> {
    const keyPrefix = this.#uploadKey(prefix);
    const names: string[] = [];
    let token: string | undefined;
    do {
      const page = await this.#call("ListObjectsV2", keyPrefix, () =>
        this.#client.send(new ListObjectsV2Command({ Bucket: this.#bucket, Prefix: keyPrefix, ContinuationToken: token })),
      );
      for (const object of page.Contents ?? []) if (object.Key) names.push(object.Key.slice(this.#uploadKey("").length));
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
    return names;
  }

  async delete(sha256: Sha256Hex): Promise<void> {
    await this.#delete(this.#contentKey(sha256));
  }

  /** Stores a private object at `runs/<name>` (a run's snapshot), outside the content keys. */
  async putPrivate(name: string, bytes: Uint8Array): Promise<void> {
    const key = this.#privateKey(name);
    await this.#call("PutObject", key, () => this.#client.send(new PutObjectCommand({ Bucket: this.#bucket, Key: key, Body: bytes })));
  }

  /** The private object's bytes, or undefined when absent. */
  async readPrivate(name: string): Promise<Uint8Array | undefined> {
    const key = this.#privateKey(name);
    return this.#call("GetObject", key, async () => {
      try {
        const object = await this.#client.send(new GetObjectCommand({ Bucket: this.#bucket, Key: key }));
        return await object.Body!.transformToByteArray();
      } catch (error) {
        if (isMissing(error)) return undefined;
        throw error;
      }
    });
  }

  /** The private objects whose names start with `prefix`, with when each was written. */
  async listPrivate(prefix: string): Promise<Array<{ name: string; modified: Date | undefined }>> {
    const keyPrefix = this.#privateKey(prefix);
    const objects: Array<{ name: string; modified: Date | undefined }> = [];
    let token: string | undefined;
    do {
      const page = await this.#call("ListObjectsV2", keyPrefix, () =>
        this.#client.send(new ListObjectsV2Command({ Bucket: this.#bucket, Prefix: keyPrefix, ContinuationToken: token })),
      );
      for (const object of page.Contents ?? []) {
        if (object.Key) objects.push({ name: object.Key.slice(this.#privateKey("").length), modified: object.LastModified });
      }
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
    return objects;
  }

  async deletePrivate(name: string): Promise<void> {
    await this.#delete(this.#privateKey(name));
  }

  async discardUpload(name: string): Promise<void> {
    await this.#delete(this.#uploadKey(name));
  }

  #contentKey(sha256: Sha256Hex): string {
    return `${this.#prefix}sha256/${sha256}`;
  }

  #tempKey(): string {
    return `${this.#prefix}tmp/${randomUUID()}`;
  }

  #privateKey(name: string): string {
    return `${this.#prefix}runs/${name}`;
  }

  #uploadKey(name: string): string {
    return `${this.#prefix}uploads/${name}`;
  }

  /**
   * Size and, asked for and when the store reports a whole-object one, the SHA-256 (hex); undefined
   * when absent. Only asked for where needed: reading checksums can take more permissions (kms:Decrypt).
   */
  async #head(key: string, { checksum = false } = {}): Promise<{ size: number; sha256: Sha256Hex | undefined } | undefined> {
    return this.#call("HeadObject", key, async () => {
      try {
        const mode = checksum ? { ChecksumMode: ChecksumMode.ENABLED } : {};
        const head = await this.#client.send(new HeadObjectCommand({ Bucket: this.#bucket, Key: key, ...mode }));
        // A multipart object's checksum is one of its parts' checksums ("...-N"), not the content's.
        const digest = head.ChecksumSHA256 !== undefined && head.ChecksumType !== "COMPOSITE" ? Buffer.from(head.ChecksumSHA256, "base64") : undefined;
        return { size: head.ContentLength ?? 0, sha256: digest?.length === 32 ? digest.toString("hex") : undefined };
      } catch (error) {
        if (isMissing(error)) return undefined;
        throw error;
      }
    });
  }

  async #hash(key: string): Promise<Sha256Hex> {
    return this.#call("GetObject", key, async () => {
      const object = await this.#client.send(new GetObjectCommand({ Bucket: this.#bucket, Key: key }));
      const hash = createHash("sha256");
      for await (const chunk of object.Body as Readable) hash.update(chunk);
      return hash.digest("hex");
    });
  }

  /** Server-side copy; false when the source is absent. */
  async #copy(from: string, to: string, options: { ChecksumAlgorithm?: "SHA256" } = {}): Promise<boolean> {
    return this.#call("CopyObject", from, async () => {
      try {
        const source = `${this.#bucket}/${from.split("/").map(encodeURIComponent).join("/")}`;
        await this.#client.send(new CopyObjectCommand({ Bucket: this.#bucket, Key: to, CopySource: source, ...options }));
        return true;
      } catch (error) {
        if (isMissing(error)) return false;
        throw error;
      }
    });
  }

  async #delete(key: string): Promise<void> {
    await this.#call("DeleteObject", key, () => this.#client.send(new DeleteObjectCommand({ Bucket: this.#bucket, Key: key })));
  }

  /** Lets this store's own refusals through; any other failure becomes a StorageError without the SDK's details. */
  async #call<T>(operation: string, key: string, work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (error) {
      if (error instanceof ConnectError || error instanceof StorageError) throw error;
      const status = error instanceof S3ServiceException ? ` (HTTP ${error.$metadata.httpStatusCode})` : "";
      const name = error instanceof Error ? error.name : "unknown error";
      throw new StorageError(`S3 ${operation} of ${this.#bucket}/${key} failed: ${name}${status}`);
    }
  }
}

function isMissing(error: unknown): boolean {
  return error instanceof S3ServiceException && (error.name === "NotFound" || error.name === "NoSuchKey" || error.$metadata.httpStatusCode === 404);
}
