import { createHash } from "node:crypto";
import * as fs from "node:fs/promises";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { UploadSigner } from "../src/assets/upload-signer.ts";
import { dataDirSecrets } from "../src/storage/index.ts";
import { KEY_A, KEY_B, postJson, requestLogSince, startTestService, type TestService } from "./helpers/service.ts";

const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

let service: TestService;
beforeAll(async () => {
  service = await startTestService({ SERVICE_MAX_UPLOAD_BYTES: String(64 * 1024) });
});
afterAll(() => service.close());

async function presign(bytes: Uint8Array, key = KEY_A) {
  return postJson(service.url, "/assets/presign", { sha256: sha256(bytes), sizeBytes: bytes.byteLength }, key);
}

async function put(url: string, headers: Record<string, string>, body: Uint8Array<ArrayBuffer>) {
  const response = await fetch(url, { method: "PUT", headers, body });
  return { status: response.status, body: await response.json() };
}

async function blobFiles(): Promise<string[]> {
  const root = path.join(service.dataDir, "blobs");
  const entries = await fs.readdir(root, { recursive: true, withFileTypes: true });
  return entries.filter((entry) => entry.isFile()).map((entry) => entry.name);
}

describe("assets upload over REST", () => {
  it("presign -> PUT -> finalize, then presign reports a dedup hit", async () => {
    const bytes = new TextEncoder().encode("hello assets");
    const first = await presign(bytes);
    expect(first.status).toBe(200);
    expect(first.body.exists).toBe(false);
    expect(first.body.uploadUrl).toMatch(new RegExp(`^${service.url}/objects/sha256/${sha256(bytes)}\\?`));
    expect(first.body.uploadHeaders).toEqual({ "content-type": "application/octet-stream", "x-content-sha256": sha256(bytes) });
    expect(Date.parse(first.body.expiresAt)).toBeGreaterThan(Date.now());

    const uploaded = await put(first.body.uploadUrl, first.body.uploadHeaders, bytes);
    expect(uploaded).toEqual({ status: 200, body: { sha256: sha256(bytes), sizeBytes: String(bytes.byteLength) } });

    const finalized = await postJson(service.url, "/assets/finalize", { sha256: sha256(bytes) }, KEY_A);
    expect(finalized.status).toBe(200);
    expect(finalized.body.asset).toMatchObject({ sha256: sha256(bytes), sizeBytes: String(bytes.byteLength) });

    expect((await presign(bytes)).body).toEqual({ exists: true, uploadHeaders: {} });
    const again = await postJson(service.url, "/assets/finalize", { sha256: sha256(bytes) }, KEY_A);
    expect(again.body.asset.finalizedAt).toBe(finalized.body.asset.finalizedAt);
  });

  it("gives another workspace no existence oracle for the same bytes", async () => {
    const bytes = new TextEncoder().encode("shared bytes");
    const a = await presign(bytes, KEY_A);
    await put(a.body.uploadUrl, a.body.uploadHeaders, bytes);
    await postJson(service.url, "/assets/finalize", { sha256: sha256(bytes) }, KEY_A);

    expect((await presign(bytes, KEY_B)).body.exists).toBe(false);
    const stolen = await postJson(service.url, "/assets/finalize", { sha256: sha256(bytes) }, KEY_B);
    expect(stolen).toMatchObject({ status: 404, body: { code: "asset_not_found", status: "not_found" } });
  });

  it("refuses calls without or with a wrong key", async () => {
    const none = await postJson(service.url, "/assets/presign", { sha256: "0".repeat(64), sizeBytes: 1 });
    expect(none).toMatchObject({ status: 401, body: { code: "unauthenticated", status: "unauthenticated" } });
    expect(none.body.message).toContain("Authorization");
    const wrong = await postJson(service.url, "/assets/presign", { sha256: "0".repeat(64), sizeBytes: 1 }, "not-a-key-of-anyone");
    expect(wrong).toMatchObject({ status: 401, body: { code: "unauthenticated" } });
  });

  it.each([
    [{ sha256: "ABC", sizeBytes: 1 }, "invalid_sha256"],
    [{ sha256: "A".repeat(64), sizeBytes: 1 }, "invalid_sha256"],
    [{ sha256: "0".repeat(64), sizeBytes: -1 }, "invalid_size"],
    [{ sha256: "0".repeat(64), sizeBytes: 64 * 1024 + 1 }, "invalid_size"],
    [{ sha256: "0".repeat(64), sizeBytes: "many" }, "malformed_request"],
    [{ sha256: "0".repeat(64), unknownField: 1 }, "malformed_request"],
  ])("presign %j is refused with %s", async (body, code) => {
    const response = await postJson(service.url, "/assets/presign", body, KEY_A);
    expect(response).toMatchObject({ status: 400, body: { code, status: "invalid_argument" } });
  });

  it("finalize before upload is asset_not_found", async () => {
    const bytes = new TextEncoder().encode("never uploaded");
    await presign(bytes);
    const response = await postJson(service.url, "/assets/finalize", { sha256: sha256(bytes) }, KEY_A);
    expect(response).toMatchObject({ status: 404, body: { code: "asset_not_found" } });
  });

  describe("the signed PUT", () => {
    const bytes = new TextEncoder().encode("upload refusals");
    let url: string;
    let headers: Record<string, string>;
    beforeAll(async () => {
      ({ uploadUrl: url, uploadHeaders: headers } = (await presign(bytes)).body);
    });

    async function expectNothingStored() {
      expect(await blobFiles()).not.toContain(sha256(bytes));
      const finalize = await postJson(service.url, "/assets/finalize", { sha256: sha256(bytes) }, KEY_A);
      expect(finalize.body.code).toBe("asset_not_found");
    }

    it("refuses bytes whose hash differs (checksum_mismatch)", async () => {
      const other = new TextEncoder().encode("upload refusalS");
      expect(await put(url, headers, other)).toMatchObject({ status: 400, body: { code: "checksum_mismatch" } });
      await expectNothingStored();
    });

    it("refuses a checksum header that differs from the signed hash", async () => {
      const response = await put(url, { ...headers, "x-content-sha256": "1".repeat(64) }, bytes);
      expect(response).toMatchObject({ status: 400, body: { code: "checksum_mismatch" } });
      await expectNothingStored();
    });

    it("refuses a body of another length (size_mismatch)", async () => {
      const longer = new Uint8Array([...bytes, 33]);
      expect(await put(url, headers, longer)).toMatchObject({ status: 400, body: { code: "size_mismatch" } });
      await expectNothingStored();
    });

    it("refuses a tampered URL (upload_url_invalid)", async () => {
      const tampered = new URL(url);
      tampered.searchParams.set("workspace", "b");
      expect(await put(tampered.href, headers, bytes)).toMatchObject({ status: 403, body: { code: "upload_url_invalid" } });
      const resized = new URL(url);
      resized.searchParams.set("size", "3");
      expect(await put(resized.href, headers, bytes)).toMatchObject({ status: 403, body: { code: "upload_url_invalid" } });
      await expectNothingStored();
    });

    it("refuses an expired URL (upload_url_expired)", async () => {
      const signer = await UploadSigner.open(dataDirSecrets(service.dataDir));
      const expired = signer.sign({ workspace: "a", sha256: sha256(bytes), sizeBytes: bytes.byteLength, expires: Math.floor(Date.now() / 1000) - 1 });
      expect(await put(service.url + expired, headers, bytes)).toMatchObject({ status: 403, body: { code: "upload_url_expired" } });
      await expectNothingStored();
    });

    it("refuses a body over the configured maximum (payload_too_large)", async () => {
      const big = new Uint8Array(64 * 1024 + 10);
      const signer = await UploadSigner.open(dataDirSecrets(service.dataDir));
      const signed = signer.sign({ workspace: "a", sha256: sha256(big), sizeBytes: big.byteLength, expires: Math.floor(Date.now() / 1000) + 60 });
      const response = await put(service.url + signed, { "x-content-sha256": sha256(big) }, big);
      expect(response).toMatchObject({ status: 413, body: { code: "payload_too_large" } });
      expect(await blobFiles()).not.toContain(sha256(big));
    });

    it("accepts the right bytes after the refusals", async () => {
      expect((await put(url, headers, bytes)).status).toBe(200);
      expect(await blobFiles()).toContain(sha256(bytes));
    });
  });

  it("answers unknown paths with a JSON 404", async () => {
    const response = await fetch(`${service.url}/no/such/path`);
    expect(response.status).toBe(404);
    expect(await response.json()).toMatchObject({ code: "route_not_found", status: "not_found" });
  });

  const preflight = (url: string, origin: string) =>
    fetch(`${url}/skillenv.assets.v1.AssetService/Presign`, {
      method: "OPTIONS",
      headers: { origin, "access-control-request-method": "POST", "access-control-request-headers": "authorization,content-type" },
    });

  it("allows no other origin by default: a cross-origin preflight gets no CORS headers", async () => {
    const response = await preflight(service.url, "https://app.example.com");
    expect(response.headers.get("access-control-allow-origin")).toBeNull();
    expect(response.headers.get("access-control-allow-methods")).toBeNull();
  });

  it("answers CORS preflights from the origins SERVICE_CORS_ORIGINS lists, and only those", async () => {
    const listed = await startTestService({ SERVICE_CORS_ORIGINS: "https://app.example.com" });
    try {
      const allowed = await preflight(listed.url, "https://app.example.com");
      expect(allowed.status).toBe(204);
      expect(allowed.headers.get("access-control-allow-origin")).toBe("https://app.example.com");
      expect(allowed.headers.get("vary")).toBe("origin");
      expect(allowed.headers.get("access-control-allow-headers")?.toLowerCase()).toContain("authorization");
      const other = await preflight(listed.url, "https://other.example.com");
      expect(other.headers.get("access-control-allow-origin")).toBeNull();
    } finally {
      await listed.close();
    }
  });

  it("answers any origin's preflight with * when SERVICE_CORS_ORIGINS is *", async () => {
    const open = await startTestService({ SERVICE_CORS_ORIGINS: "*" });
    try {
      const response = await preflight(open.url, "https://anywhere.example.org");
      expect(response.status).toBe(204);
      expect(response.headers.get("access-control-allow-origin")).toBe("*");
    } finally {
      await open.close();
    }
  });

  it("logs one JSON line per request, with workspace and code but no key", async () => {
    const before = service.logs.length;
    await postJson(service.url, "/assets/finalize", { sha256: "f".repeat(64) }, KEY_A);
    const lines = await requestLogSince(service, before);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      protocol: "rest",
      method: "POST",
      path: "/assets/finalize",
      procedure: "skillenv.assets.v1.AssetService/Finalize",
      workspace: "a",
      code: "asset_not_found",
      httpStatus: 404,
    });
    expect(lines[0].durationMs).toBeGreaterThan(0);
    expect(service.logs.join("\n")).not.toContain(KEY_A);
  });
});
