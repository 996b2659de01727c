import { createHash, randomBytes } from "node:crypto";
import * as fs from "node:fs/promises";
import * as http from "node:http";
import * as os from "node:os";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { MALLOC_ENVIRONMENT } from "../src/config/index.ts";
import { KEY_A, postJson } from "./helpers/service.ts";
import { whenChangedIn } from "./helpers/files.ts";
import { runUntilExit, spawnService, whenStderrHas } from "./helpers/process.ts";

const KEYS = `a=${KEY_A}`;
const tempDir = () => fs.mkdtemp(path.join(os.tmpdir(), "skillenv-life-"));
const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

describe("process lifecycle", () => {
  it("writes a development key once (mode 0600), prints its path and accepts it", async () => {
    const dataDir = await tempDir();
    const first = await spawnService({ SERVICE_DATA_DIR: dataDir });
    const keyFile = path.join(dataDir, "dev-api-key");
    expect(first.stderr()).toContain(keyFile);
    const key = (await fs.readFile(keyFile, "utf8")).trim();
    expect((await fs.stat(keyFile)).mode & 0o777).toBe(0o600);
    const response = await postJson(first.url, "/assets/presign", { sha256: "0".repeat(64), sizeBytes: 1 }, key);
    expect(response.status).toBe(200);
    expect(first.stderr()).not.toContain(key);
    first.child.kill("SIGTERM");
    expect(await first.exited).toBe(0);

    const second = await spawnService({ SERVICE_DATA_DIR: dataDir });
    expect((await fs.readFile(keyFile, "utf8")).trim()).toBe(key);
    second.child.kill("SIGTERM");
    await second.exited;
  });

  it.runIf(process.platform === "linux")("runs with the malloc settings of MALLOC_ENVIRONMENT, keeping an operator's own value and its pid", async () => {
    const environOf = async (pid: number) => (await fs.readFile(`/proc/${pid}/environ`, "utf8")).split("\0");
    const started = await spawnService({ SERVICE_DATA_DIR: await tempDir(), SERVICE_API_KEYS: KEYS });
    const expected = Object.entries(MALLOC_ENVIRONMENT).map(([name, value]) => `${name}=${value}`);
    // The pid the test spawned is the process that serves: it replaced itself, it did not fork.
    expect(await environOf(started.child.pid!)).toEqual(expect.arrayContaining(expected));
    expect((await postJson(started.url, "/assets/presign", { sha256: "0".repeat(64), sizeBytes: 1 }, KEY_A)).status).toBe(200);
    started.child.kill("SIGTERM");
    expect(await started.exited).toBe(0);

    const own = await spawnService({ SERVICE_DATA_DIR: await tempDir(), SERVICE_API_KEYS: KEYS, MALLOC_MMAP_THRESHOLD_: "65536" });
    expect(await environOf(own.child.pid!)).toContain("MALLOC_MMAP_THRESHOLD_=65536");
    own.child.kill("SIGTERM");
    expect(await own.exited).toBe(0);
  });

  it("drains and exits 0 on a SIGTERM sent the moment it says it listens", async () => {
    // The race this guards (the line written before the handlers were installed) lost about
    // one start in three on two cores; five starts catch it nearly always.
    for (let attempt = 0; attempt < 5; attempt++) {
      const started = await spawnService({ SERVICE_DATA_DIR: await tempDir(), SERVICE_API_KEYS: KEYS });
      started.child.kill("SIGTERM");
      expect(await started.exited).toBe(0);
      expect(started.stderr()).toContain("SIGTERM: draining");
    }
    // Five starts and drains: several seconds each on a loaded 2-core machine.
  }, 180_000);

  it("stops at startup on a bad setting, naming it", async () => {
    const result = await runUntilExit({ SERVICE_ENV_WORKERS: "zero", SERVICE_DATA_DIR: await tempDir() });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain("SERVICE_ENV_WORKERS: expected a positive integer");
  });

  it("a kill during an upload leaves no partial object", async () => {
    const dataDir = await tempDir();
    const service = await spawnService({ SERVICE_DATA_DIR: dataDir, SERVICE_API_KEYS: KEYS });
    const bytes = randomBytes(4 * 1024 * 1024);
    const presigned = (await postJson(service.url, "/assets/presign", { sha256: sha256(bytes), sizeBytes: bytes.byteLength }, KEY_A)).body;

    const request = http.request(presigned.uploadUrl, { method: "PUT", headers: { ...presigned.uploadHeaders, "content-length": bytes.byteLength } });
    request.on("error", () => {});
    request.write(bytes.subarray(0, 1024 * 1024));
    const tmp = path.join(dataDir, "blobs/tmp");
    await whenChangedIn(tmp, async () => (await fs.readdir(tmp)).length === 1);
    service.child.kill("SIGKILL");
    await service.exited;
    request.destroy();

    const restarted = await spawnService({ SERVICE_DATA_DIR: dataDir, SERVICE_API_KEYS: KEYS });
    try {
      expect(await fs.readdir(path.join(dataDir, "blobs/tmp"))).toEqual([]);
      const again = await postJson(restarted.url, "/assets/presign", { sha256: sha256(bytes), sizeBytes: bytes.byteLength }, KEY_A);
      expect(again.body.exists).toBe(false);
      const finalize = await postJson(restarted.url, "/assets/finalize", { sha256: sha256(bytes) }, KEY_A);
      expect(finalize.body.code).toBe("asset_not_found");
    } finally {
      restarted.child.kill("SIGTERM");
      await restarted.exited;
    }
  });

  it("graceful shutdown finishes the in-flight upload and loses no acknowledged write", async () => {
    const dataDir = await tempDir();
    const service = await spawnService({ SERVICE_DATA_DIR: dataDir, SERVICE_API_KEYS: KEYS });
    const acknowledged: string[] = [];
    const small = Array.from({ length: 20 }, () => randomBytes(64));
    for (const bytes of small.slice(0, 10)) {
      await uploadAndFinalize(service.url, bytes);
      acknowledged.push(sha256(bytes));
    }

    // An upload is in flight when SIGTERM arrives, its last bytes sent only once the server
    // drains: it must complete.
    const slow = randomBytes(256 * 1024);
    const presigned = (await postJson(service.url, "/assets/presign", { sha256: sha256(slow), sizeBytes: slow.byteLength }, KEY_A)).body;
    const upload = heldPut(presigned.uploadUrl, presigned.uploadHeaders, slow);
    const tmp = path.join(dataDir, "blobs/tmp");
    await whenChangedIn(tmp, async () => (await fs.readdir(tmp)).length === 1);
    service.child.kill("SIGTERM");
    await whenStderrHas(service, "SIGTERM: draining");
    upload.finish();
    expect(await upload.status).toBe(200);
    expect(await service.exited).toBe(0);

    const restarted = await spawnService({ SERVICE_DATA_DIR: dataDir, SERVICE_API_KEYS: KEYS });
    try {
      for (const hash of acknowledged) {
        const again = await postJson(restarted.url, "/assets/presign", { sha256: hash, sizeBytes: 64 }, KEY_A);
        expect(again.body).toEqual({ exists: true, uploadHeaders: {} });
      }
      const finalize = await postJson(restarted.url, "/assets/finalize", { sha256: sha256(slow) }, KEY_A);
      expect(finalize.status).toBe(200);
    } finally {
      restarted.child.kill("SIGTERM");
      await restarted.exited;
    }
  });
});

async function uploadAndFinalize(base: string, bytes: Uint8Array<ArrayBuffer>): Promise<void> {
  const presigned = (await postJson(base, "/assets/presign", { sha256: sha256(bytes), sizeBytes: bytes.byteLength }, KEY_A)).body;
  const put = await fetch(presigned.uploadUrl, { method: "PUT", headers: presigned.uploadHeaders, body: bytes });
  expect(put.status).toBe(200);
  expect((await postJson(base, "/assets/finalize", { sha256: sha256(bytes) }, KEY_A)).status).toBe(200);
}

/** PUTs all of the body but its last 16 KiB at once, and those when told to `finish`. */
function heldPut(url: string, headers: Record<string, string>, bytes: Uint8Array): { status: Promise<number>; finish(): void } {
  let request!: http.ClientRequest;
  const status = new Promise<number>((resolve, reject) => {
    request = http.request(url, { method: "PUT", headers: { ...headers, "content-length": bytes.byteLength } }, (response) => {
      response.resume();
      resolve(response.statusCode ?? 0);
    });
    request.on("error", reject);
  });
  const last = bytes.byteLength - 16 * 1024;
  request.write(bytes.subarray(0, last));
  return { status, finish: () => request.end(bytes.subarray(last)) };
}
