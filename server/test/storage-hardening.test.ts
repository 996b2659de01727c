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
 * Runs `work` with every file handle's sync in this process (the service's included: it runs
 * here) recorded by the path of the file synced, read from /proc/self/fd as the sync starts.
 */
async function recordingSyncs(work: () => Promise<void>): Promise<string[]> {
  const probe = await fs.open(import.meta.filename, "r");
  const prototype = Object.getPrototypeOf(probe) as { sync(this: fs.FileHandle): Promise<void> };
  await probe.close();
  const sync = prototype.sync;
  const synced: string[] = [];
  prototype.sync = async function (this: fs.FileHandle) {
    synced.push(await fs.readlink(`/proc/self/fd/${this.fd}`).catch((error: Error) => `unknown: ${error.message}`));
    return sync.call(this);
  };
  try {
    await work();
  } finally {
    prototype.sync = sync;
  }
  return synced;
}

/** What of the blob store was synced: the temporary files a write starts with, and the directory of the blob's content address. */
function blobSyncs(synced: string[], id: string): { tmp: number; directory: number } {
  const tmp = path.join(service.dataDir, "blobs", "tmp") + path.sep;
  return {
    tmp: synced.filter((file) => file.startsWith(tmp) && /^[0-9a-f-]{36}$/.test(file.slice(tmp.length))).length,
    directory: synced.filter((file) => file === path.dirname(blobPath(id))).length,
  };
}

describe.runIf(process.platform === "linux")("no timing oracle for bytes another workspace stored (issue #7, item 7)", () => {
  it("admitting a program workspace a admitted writes and syncs the bytes again, and keeps the stored blob", async () => {
    const source = `function run() { return "oracle ${Date.now()}"; }`;
    const id = sha256(new TextEncoder().encode(source));
    const first = await recordingSyncs(async () => expect((await postJson(service.url, "/v1/programs", { source }, KEY_A)).status).toBe(200));
    expect(blobSyncs(first, id)).toEqual({ tmp: 1, directory: 1 });
    const stored = await fs.stat(blobPath(id));

    const again = await recordingSyncs(async () =>
      expect(await postJson(service.url, "/v1/programs", { source }, KEY_B)).toEqual({ status: 200, body: { id } }),
    );
    // The same work as the first write: a file written and synced, then dropped; the directory synced.
    expect(blobSyncs(again, id)).toEqual({ tmp: 1, directory: 1 });
    const after = await fs.stat(blobPath(id));
    expect([after.ino, after.mtimeMs]).toEqual([stored.ino, stored.mtimeMs]);
    expect(await fs.readdir(path.join(service.dataDir, "blobs", "tmp"))).toEqual([]);
  });

  it("uploading an asset workspace a uploaded writes and syncs the bytes again, and keeps the stored blob", async () => {
    const bytes = new TextEncoder().encode(`asset ${Date.now()}`);
    const hash = sha256(bytes);
    const first = await recordingSyncs(async () => void (await uploadAsset(service, bytes, KEY_A)));
    expect(blobSyncs(first, hash)).toEqual({ tmp: 1, directory: 1 });
    const stored = await fs.stat(blobPath(hash));

    const again = await recordingSyncs(async () => void (await uploadAsset(service, bytes, KEY_B)));
    expect(blobSyncs(again, hash)).toEqual({ tmp: 1, directory: 1 });
    const after = await fs.stat(blobPath(hash));
    expect([after.ino, after.mtimeMs]).toEqual([stored.ino, stored.mtimeMs]);
    expect(await fs.readdir(path.join(service.dataDir, "blobs", "tmp"))).toEqual([]);
  });
});

describe("a data directory in use (issue #7, item 9)", () => {
  it("stops a second server at startup, saying the directory is locked by another process", async () => {
    const second = await runUntilExit({ SERVICE_DATA_DIR: service.dataDir, SERVICE_LISTEN: "127.0.0.1:0", SERVICE_API_KEYS: `a=${KEY_A}` });
    expect(second.code).toBe(1);
    // Its port opened first (the probes answer while a server starts), then the start failed.
    expect(second.stderr.split("\n")).toEqual([
      expect.stringMatching(/^skillenv starting on http:\/\/127\.0\.0\.1:\d+ /),
      `startup failed: the data directory ${service.dataDir} is locked by another process (is another server running on it?)`,
      "",
    ]);
  });
});
