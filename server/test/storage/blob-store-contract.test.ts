import { createHash, randomUUID } from "node:crypto";
import * as fs from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import { ListObjectsV2Command, S3Client } from "@aws-sdk/client-s3";
import type { ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stableCodeOf } from "../../src/errors/index.ts";
import { readBundle } from "../../src/skills/bundle/index.ts";
import { FileBlobStore, parseS3Url, S3BlobStore, StorageError, type BlobStore } from "../../src/storage/index.ts";
import { S3_BUCKET, startS3, type TestS3 } from "../helpers/s3.ts";
import { bundleOf, skillMd } from "../helpers/skills.ts";

const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

async function* chunksOf(bytes: Uint8Array, size: number): AsyncGenerator<Uint8Array> {
  for (let start = 0; start < bytes.length; start += size) yield bytes.subarray(start, start + size);
}

let s3: TestS3;
beforeAll(async () => {
  s3 = await startS3();
  // The SDK's default chain reads the credentials from the environment, as in production.
  Object.assign(process.env, s3.env);
});
afterAll(() => s3?.stop());

const s3Prefix = `contract-${randomUUID()}`;

const adapters: Array<[string, () => Promise<BlobStore>]> = [
  ["FileBlobStore", async () => FileBlobStore.open(await fs.mkdtemp(path.join(os.tmpdir(), "skillenv-blobs-")))],
  ["S3BlobStore", () => S3BlobStore.open(parseS3Url(s3.blobUrl(s3Prefix)))],
];

describe.each(adapters)("the BlobStore contract: %s", (_name, open) => {
  let blobs: BlobStore;
  beforeAll(async () => {
    blobs = await open();
  });

  // Large enough for several ranged reads and stream chunks (the file store reads 64 KiB at a time).
  const bytes = new Uint8Array(200_000).map((_, i) => (i * 31 + (i >> 8)) & 0xff);
  const hash = sha256(bytes);

  it("stat of absent content is undefined", async () => {
    expect(await blobs.stat(sha256(new TextEncoder().encode("never written")))).toBeUndefined();
  });

  it("writes verified content, streamed in chunks, then stats and reads it", async () => {
    await blobs.write({ sha256: hash, sizeBytes: bytes.length }, chunksOf(bytes, 16_384));
    expect(await blobs.stat(hash)).toBe(bytes.length);
    expect(Buffer.from(await blobs.read(hash)).equals(bytes)).toBe(true);
  });

  it("writes content that is already stored again without harm", async () => {
    await blobs.write({ sha256: hash, sizeBytes: bytes.length }, chunksOf(bytes, 50_000));
    expect(Buffer.from(await blobs.read(hash)).equals(bytes)).toBe(true);
  });

  it("deletes content, and deleting absent content is no error; the bytes can be written again", async () => {
    const doomed = new TextEncoder().encode(`deleted content ${randomUUID()}`);
    await blobs.write({ sha256: sha256(doomed), sizeBytes: doomed.length }, chunksOf(doomed, 8));
    await blobs.delete(sha256(doomed));
    expect(await blobs.stat(sha256(doomed))).toBeUndefined();
    await blobs.delete(sha256(doomed));
    await blobs.write({ sha256: sha256(doomed), sizeBytes: doomed.length }, chunksOf(doomed, 8));
    expect(Buffer.from(await blobs.read(sha256(doomed))).equals(doomed)).toBe(true);
    // Other content is untouched.
    expect(await blobs.stat(hash)).toBe(bytes.length);
  });

  it("writes empty content", async () => {
    const empty = new Uint8Array(0);
    await blobs.write({ sha256: sha256(empty), sizeBytes: 0 }, chunksOf(empty, 1));
    expect(await blobs.stat(sha256(empty))).toBe(0);
  });

  it.each([
    ["a longer body", (b: Uint8Array) => new Uint8Array([...b, 1]), "size_mismatch"],
    ["a shorter body", (b: Uint8Array) => b.subarray(1), "size_mismatch"],
    ["a body of another hash", (b: Uint8Array) => b.map((x, i) => (i === 100 ? x ^ 1 : x)), "checksum_mismatch"],
  ])("refuses %s and leaves nothing visible", async (_what, tamper, code) => {
    const expected = new TextEncoder().encode(`expected content ${code} ${randomUUID()}`.repeat(500));
    const write = blobs.write({ sha256: sha256(expected), sizeBytes: expected.length }, chunksOf(tamper(expected), 4096));
    const refusal = await write.then(
      () => undefined,
      (error: ConnectError) => error,
    );
    expect(refusal && stableCodeOf(refusal)).toBe(code);
    expect(await blobs.stat(sha256(expected))).toBeUndefined();
    expect(await blobs.stat(sha256(tamper(expected)))).toBeUndefined();
  });

  it("reads byte ranges and streams them, clamped to the blob's end", async () => {
    const ranges = await blobs.openRanges(hash);
    try {
      expect(ranges.size).toBe(bytes.length);
      expect(Buffer.from(await ranges.read(10, 20)).equals(bytes.subarray(10, 20))).toBe(true);
      expect(Buffer.from(await ranges.read(bytes.length - 5, bytes.length + 100)).equals(bytes.subarray(-5))).toBe(true);
      expect((await ranges.read(bytes.length, bytes.length + 10)).length).toBe(0);
      expect((await ranges.read(7, 7)).length).toBe(0);
      const streamed = Buffer.concat(await ranges.stream(1000, 150_000).toArray());
      expect(streamed.equals(bytes.subarray(1000, 150_000))).toBe(true);
    } finally {
      await ranges.close();
    }
  });

  it("serves a skill bundle's entries through ranged reads", async () => {
    const bundle = bundleOf({ "SKILL.md": skillMd({ description: "Ranged." }), "data/notes.txt": "notes\n".repeat(1000) });
    await blobs.write({ sha256: bundle.hash, sizeBytes: bundle.zip.length }, chunksOf(bundle.zip, 1000));
    const ranges = await blobs.openRanges(bundle.hash);
    try {
      const read = await readBundle(ranges);
      expect(read.description).toBe("Ranged.");
      expect(new TextDecoder().decode(read.files.get("data/notes.txt"))).toBe("notes\n".repeat(1000));
    } finally {
      await ranges.close();
    }
  });
});

describe("S3BlobStore", () => {
  it("leaves no temporary objects behind, whether writes were verified or refused", async () => {
    const client = new S3Client({ endpoint: new URL(s3.blobUrl()).searchParams.get("endpoint")!, forcePathStyle: true });
    const listed = await client.send(new ListObjectsV2Command({ Bucket: S3_BUCKET, Prefix: `${s3Prefix}/` }));
    const keys = (listed.Contents ?? []).map((object) => object.Key!.slice(s3Prefix.length + 1));
    expect(keys.length).toBeGreaterThan(0);
    expect(keys.every((key) => /^sha256\/[0-9a-f]{64}$/.test(key))).toBe(true);
  });

  it("reports a store that does not answer as a StorageError naming the bucket, without credentials", async () => {
    const open = S3BlobStore.open(parseS3Url(`s3://${S3_BUCKET}?endpoint=http://127.0.0.1:9&region=us-east-1&forcePathStyle=true`));
    const error = await open.then(
      () => undefined,
      (thrown: unknown) => thrown,
    );
    expect(error).toBeInstanceOf(StorageError);
    expect((error as Error).message).toContain(`S3 HeadBucket of ${S3_BUCKET}/`);
    expect((error as Error).message).not.toContain(s3.env.AWS_SECRET_ACCESS_KEY);
  });
});
