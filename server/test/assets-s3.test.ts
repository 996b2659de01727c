import { createHash, randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startS3, type TestS3 } from "./helpers/s3.ts";
import { KEY_A, KEY_B, postJson, startTestService, type TestService } from "./helpers/service.ts";
import { bundleOf, expectedMetadata, getSkill, putSkill, skillMd } from "./helpers/skills.ts";

const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");
const encode = (text: string) => new TextEncoder().encode(text);

let s3: TestS3;
let service: TestService;
beforeAll(async () => {
  s3 = await startS3();
  // The service takes credentials from the AWS SDK's default chain, as in production: this process's environment.
  Object.assign(process.env, s3.env);
  service = await startTestService({ SERVICE_BLOB_URL: s3.blobUrl(`assets-${randomUUID()}`), SERVICE_MAX_UPLOAD_BYTES: String(64 * 1024) });
});
afterAll(async () => {
  await service?.close();
  await s3?.stop();
});

const presign = (bytes: Uint8Array, key = KEY_A) => postJson(service.url, "/assets/presign", { sha256: sha256(bytes), sizeBytes: bytes.byteLength }, key);
const finalize = (bytes: Uint8Array, key = KEY_A) => postJson(service.url, "/assets/finalize", { sha256: sha256(bytes) }, key);

async function put(url: string, headers: Record<string, string>, body: Uint8Array): Promise<number> {
  const response = await fetch(url, { method: "PUT", headers, body: body as Uint8Array<ArrayBuffer> });
  await response.arrayBuffer();
  return response.status;
}

describe("uploads straight to S3", () => {
  it("presign -> PUT to the presigned URL -> finalize makes an asset; presign then reports it", async () => {
    const bytes = encode(`hello s3 ${randomUUID()}`);
    const presigned = await presign(bytes);
    expect(presigned.status).toBe(200);
    expect(presigned.body.exists).toBe(false);
    const url = new URL(presigned.body.uploadUrl);
    expect(url.origin).toBe(new URL(new URLSearchParams(s3.blobUrl().split("?")[1]).get("endpoint")!).origin);
    expect(url.pathname).toMatch(new RegExp(`/uploads/a/${sha256(bytes)}/[0-9a-f-]{36}$`));
    expect(url.searchParams.get("X-Amz-SignedHeaders")).toBe("content-length;host;x-amz-checksum-sha256");
    expect(presigned.body.uploadHeaders).toEqual({
      "x-amz-checksum-sha256": Buffer.from(sha256(bytes), "hex").toString("base64"),
      "content-length": String(bytes.byteLength),
    });

    expect(await put(presigned.body.uploadUrl, presigned.body.uploadHeaders, bytes)).toBe(200);
    const finalized = await finalize(bytes);
    expect(finalized).toMatchObject({ status: 200, body: { asset: { sha256: sha256(bytes), sizeBytes: String(bytes.byteLength) } } });
    expect((await presign(bytes)).body.exists).toBe(true);
    expect((await finalize(bytes)).body.asset.finalizedAt).toBe(finalized.body.asset.finalizedAt);
  });

  it.each([
    ["other bytes of the same length", (bytes: Uint8Array) => bytes.map((byte, i) => (i === 0 ? byte ^ 1 : byte)), "checksum_mismatch"],
    ["a longer body", (bytes: Uint8Array) => new Uint8Array([...bytes, 33]), "checksum_mismatch"],
  ])("never makes an asset of %s PUT under the presigned URL and headers", async (_what, tamper, code) => {
    const bytes = encode(`tampered ${randomUUID()}`);
    const presigned = await presign(bytes);
    const other = tamper(bytes);
    // s3rver stores what it is sent whatever the signed headers say; finalize is what refuses it.
    await put(presigned.body.uploadUrl, { ...presigned.body.uploadHeaders, "content-length": String(other.byteLength) }, other);
    expect(await finalize(bytes)).toMatchObject({ status: 400, body: { code } });
    // The refused upload is gone: finalizing again finds nothing, and no asset of either hash exists.
    expect(await finalize(bytes)).toMatchObject({ status: 404, body: { code: "asset_not_found" } });
    expect((await presign(bytes)).body.exists).toBe(false);
    expect((await presign(other)).body.exists).toBe(false);
    // The right bytes under the same URL still make the asset.
    expect(await put(presigned.body.uploadUrl, presigned.body.uploadHeaders, bytes)).toBe(200);
    expect((await finalize(bytes)).status).toBe(200);
  });

  it("refuses an upload over the upload limit at finalize (size_mismatch)", async () => {
    const bytes = encode("small");
    const presigned = await presign(bytes);
    const big = new Uint8Array(64 * 1024 + 1);
    await put(presigned.body.uploadUrl, { ...presigned.body.uploadHeaders, "content-length": String(big.byteLength) }, big);
    expect(await finalize(bytes)).toMatchObject({ status: 400, body: { code: "size_mismatch" } });
  });

  it("finalize without an upload is asset_not_found", async () => {
    const bytes = encode(`never uploaded ${randomUUID()}`);
    await presign(bytes);
    expect(await finalize(bytes)).toMatchObject({ status: 404, body: { code: "asset_not_found", status: "not_found" } });
  });

  it("workspace b can finalize neither a's upload nor a's asset", async () => {
    const bytes = encode(`a's bytes ${randomUUID()}`);
    const presigned = await presign(bytes, KEY_A);
    expect(await put(presigned.body.uploadUrl, presigned.body.uploadHeaders, bytes)).toBe(200);
    expect(await finalize(bytes, KEY_B)).toMatchObject({ status: 404, body: { code: "asset_not_found" } });
    expect((await finalize(bytes, KEY_A)).status).toBe(200);
    expect(await finalize(bytes, KEY_B)).toMatchObject({ status: 404, body: { code: "asset_not_found" } });
    expect((await presign(bytes, KEY_B)).body.exists).toBe(false);
  });

  // What docs/operations.md says s3rver checks of a presigned PUT: expiry, not the signature, nor Content-MD5.
  it("s3rver accepts forged signatures and digests but refuses expired URLs: finalize is what verifies", async () => {
    const bytes = encode(`s3rver checks ${randomUUID()}`);
    const presigned = await presign(bytes);
    const forged = new URL(presigned.body.uploadUrl);
    forged.searchParams.set("X-Amz-Signature", "0".repeat(64));
    expect(await put(forged.href, { ...presigned.body.uploadHeaders, "content-md5": "AAAAAAAAAAAAAAAAAAAAAA==" }, bytes)).toBe(200);
    const expired = new URL(presigned.body.uploadUrl);
    expired.searchParams.set("X-Amz-Date", "20200101T000000Z");
    expect(await put(expired.href, presigned.body.uploadHeaders, bytes)).toBe(403);
    expect((await finalize(bytes)).status).toBe(200);
  });

  it("does not serve the embedded upload endpoint", async () => {
    const response = await fetch(`${service.url}/objects/sha256/${"0".repeat(64)}?workspace=a`, { method: "PUT", body: "x" });
    expect(response.status).toBe(404);
    expect(await response.json()).toMatchObject({ code: "route_not_found" });
  });

  it("binds a skill bundle uploaded to S3 and reads its files from there in ranges", async () => {
    const description = `From S3 ${randomUUID()}`;
    const bundle = bundleOf({ "SKILL.md": skillMd({ description }), "reference/notes.md": "# Notes\n".repeat(200) });
    const presigned = await presign(bundle.zip);
    expect(await put(presigned.body.uploadUrl, presigned.body.uploadHeaders, bundle.zip)).toBe(200);
    expect((await finalize(bundle.zip)).status).toBe(200);

    const bound = await putSkill(service, "from-s3", bundle.hash);
    expect(bound.status).toBe(200);
    expect(bound.body.skill).toMatchObject({ name: "from-s3", ...expectedMetadata(bundle, description) });
    const got = await getSkill(service, "from-s3");
    expect(got.body.files.map((file: { path: string }) => file.path)).toEqual(["SKILL.md", "reference/notes.md"]);
  });
});
