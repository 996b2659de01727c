import { watch } from "node:fs";
import * as fs from "node:fs/promises";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runUntilExit } from "./helpers/process.ts";
import { KEY_A, KEY_B, postJson, startTestService, type TestService } from "./helpers/service.ts";
import { sha256, uploadAsset } from "./helpers/skills.ts";

let service: TestService;
beforeAll(async () => {
  service = await startTestService();
});
afterAll(() => service.close());

const blobPath = (id: string) => path.join(service.dataDir, "blobs", "sha256", id.slice(0, 2), id);

/**
 * Resolves with the first file created in blobs/tmp, where every blob write starts. Bounded, so
 * that a write that never happens fails the test instead of hanging it.
 */
function nextBlobWrite(): { written: Promise<string>; stop(): void } {
  const watcher = watch(path.join(service.dataDir, "blobs", "tmp"));
  const written = new Promise<string>((resolve, reject) => {
    watcher.once("change", (_event, name) => resolve(String(name)));
    setTimeout(() => reject(new Error("no blob write within 5 s")), 5_000).unref();
  });
  return { written, stop: () => watcher.close() };
}

describe("no timing oracle for bytes another workspace stored (issue #7, item 7)", () => {
  it("admitting a program workspace a admitted writes and syncs the bytes again, and keeps the stored blob", async () => {
    const source = `function run() { return "oracle ${Date.now()}"; }`;
    const id = sha256(new TextEncoder().encode(source));
    expect((await postJson(service.url, "/v1/programs", { source }, KEY_A)).status).toBe(200);
    const stored = await fs.stat(blobPath(id));

    const write = nextBlobWrite();
    try {
      expect(await postJson(service.url, "/v1/programs", { source }, KEY_B)).toEqual({ status: 200, body: { id } });
      await expect(write.written).resolves.toMatch(/^[0-9a-f-]{36}$/);
    } finally {
      write.stop();
    }
    const after = await fs.stat(blobPath(id));
    expect([after.ino, after.mtimeMs]).toEqual([stored.ino, stored.mtimeMs]);
  });

  it("uploading an asset workspace a uploaded writes and syncs the bytes again, and keeps the stored blob", async () => {
    const bytes = new TextEncoder().encode(`asset ${Date.now()}`);
    const hash = await uploadAsset(service, bytes, KEY_A);
    const stored = await fs.stat(blobPath(hash));

    const write = nextBlobWrite();
    try {
      await uploadAsset(service, bytes, KEY_B);
      await expect(write.written).resolves.toMatch(/^[0-9a-f-]{36}$/);
    } finally {
      write.stop();
    }
    const after = await fs.stat(blobPath(hash));
    expect([after.ino, after.mtimeMs]).toEqual([stored.ino, stored.mtimeMs]);
  });
});

describe("a data directory in use (issue #7, item 9)", () => {
  it("stops a second server at startup, saying the directory is locked by another process", async () => {
    const second = await runUntilExit({ SERVICE_DATA_DIR: service.dataDir, SERVICE_LISTEN: "127.0.0.1:0", SERVICE_API_KEYS: `a=${KEY_A}` });
    expect(second.code).toBe(1);
    expect(second.stderr).toBe(`startup failed: the data directory ${service.dataDir} is locked by another process (is another server running on it?)\n`);
  });
});
