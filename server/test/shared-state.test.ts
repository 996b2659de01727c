/**
 * Two services on one PostgreSQL database and one S3 bucket stand for two replicas: what one
 * stores, the other serves, and concurrent writes through both leave consistent records
 * (conditional writes, docs/operations.md). Real PostgreSQL and a real S3 implementation,
 * started here.
 */
import * as fs from "node:fs/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startPostgres } from "./helpers/postgres.ts";
import { startS3 } from "./helpers/s3.ts";
import { KEY_A, KEY_B, postJson, startTestService, type TestService } from "./helpers/service.ts";
import { bundleOf, getSkill, publish, putSkill, rest, skillMd, uploadAsset } from "./helpers/skills.ts";

let postgres: Awaited<ReturnType<typeof startPostgres>>;
let s3: Awaited<ReturnType<typeof startS3>>;
let replicas: TestService[];

beforeAll(async () => {
  [postgres, s3] = await Promise.all([startPostgres(), startS3()]);
  Object.assign(process.env, s3.env);
  const shared = { SERVICE_DATABASE_URL: await postgres.createDatabase(), SERVICE_BLOB_URL: s3.blobUrl() };
  // One after the other: the second finds the schema the first migrated and the keys it created.
  replicas = [await startTestService(shared), await startTestService(shared)];
});

afterAll(async () => {
  await Promise.allSettled((replicas ?? []).map((replica) => replica.close()));
  await Promise.allSettled([postgres?.stop(), s3?.stop()]);
});

describe("two replicas on one PostgreSQL and one S3", () => {
  it("serve a skill uploaded through either, bytes and all", async () => {
    const [a, b] = replicas;
    const bundle = bundleOf({ "SKILL.md": skillMd({ description: "Shared between replicas." }), "notes/readme.txt": "kept in S3" });
    const published = await publish(a!, "shared-skill", bundle);
    const seen = await getSkill(b!, "shared-skill");
    expect(seen.status).toBe(200);
    expect(seen.body.skill).toMatchObject({ name: "shared-skill", contentHash: published.contentHash, description: "Shared between replicas." });
    // Workspace b sees nothing of workspace a's skill, through either replica.
    expect((await getSkill(b!, "shared-skill", KEY_B)).status).toBe(404);
  });

  it("accept an upload presigned by one replica and finalized by the other", async () => {
    const [a, b] = replicas;
    const bytes = new TextEncoder().encode(`bytes presigned by a, finalized by b ${Math.random()}`);
    const { createHash } = await import("node:crypto");
    const hash = createHash("sha256").update(bytes).digest("hex");
    const presigned = await postJson(a!.url, "/assets/presign", { sha256: hash, sizeBytes: bytes.byteLength }, KEY_A);
    expect(presigned.status).toBe(200);
    const put = await fetch(presigned.body.uploadUrl, { method: "PUT", headers: presigned.body.uploadHeaders, body: bytes });
    expect(put.status).toBe(200);
    const finalized = await postJson(b!.url, "/assets/finalize", { sha256: hash }, KEY_A);
    expect(finalized.status).toBe(200);
    expect(finalized.body.asset.sha256).toBe(hash);
  });

  it("leave one consistent record after 50 concurrent PutSkills of one name through both", async () => {
    const [a, b] = replicas;
    const bundles = Array.from({ length: 50 }, (_, i) => bundleOf({ "SKILL.md": skillMd({ description: `Version ${i}.` }) }));
    await Promise.all(bundles.map((bundle, i) => uploadAsset(i % 2 === 0 ? a! : b!, bundle.zip)));
    const replies = await Promise.all(bundles.map((bundle, i) => putSkill(i % 2 === 0 ? a! : b!, "contended", bundle.hash)));
    expect(replies.map((reply) => reply.status)).toEqual(replies.map(() => 200));
    const [fromA, fromB] = await Promise.all([getSkill(a!, "contended"), getSkill(b!, "contended")]);
    expect(fromA.body).toEqual(fromB.body);
    // The record is one of the bundles, whole: its description is the one its content hash says.
    const winner = bundles.findIndex((bundle) => bundle.hash === fromA.body.skill.contentHash);
    expect(winner).toBeGreaterThanOrEqual(0);
    expect(fromA.body.skill.description).toBe(`Version ${winner}.`);
    // Its bundle is there to read.
    const listing = await rest(b!, "GET", "/skills/contended");
    expect(listing.body.skill.fileCount).toBe(1);

    // Every put was a new version, numbered without gap or repeat across both replicas; retention
    // (SERVICE_SKILL_MAX_VERSIONS, 20) kept the newest 20, the current one the newest of them.
    expect(fromA.body.skill.version).toBe(50);
    const versions = (await rest(a!, "GET", "/skills/contended/versions?pageSize=100")).body.versions;
    expect(versions.map((version: { version: number }) => version.version)).toEqual(Array.from({ length: 20 }, (_, i) => 50 - i));
    expect(versions[0]).toMatchObject({ current: true, contentHash: fromA.body.skill.contentHash });
    const kept = new Set(versions.map((version: { contentHash: string }) => version.contentHash));
    expect(kept.size).toBe(20);
    // The 30 dropped versions took their workspace's assets with them: presign asks for the bytes again.
    const dropped = bundles.filter((bundle) => !kept.has(bundle.hash));
    expect(dropped).toHaveLength(30);
    for (const bundle of dropped.slice(0, 5)) {
      const presigned = await postJson(b!.url, "/assets/presign", { sha256: bundle.hash, sizeBytes: bundle.zip.byteLength }, KEY_A);
      expect(presigned.body.exists).toBe(false);
    }
  });

  it("share the keys a data directory held: a development key made by one is accepted by the other", async () => {
    const database = await postgres.createDatabase();
    const shared = { SERVICE_DATABASE_URL: database, SERVICE_BLOB_URL: s3.blobUrl("dev-keys"), SERVICE_API_KEYS: "" };
    const [first, second] = await Promise.all([startTestService(shared), startTestService(shared)]);
    try {
      const keys = await Promise.all([first, second].map((replica) => fs.readFile(replica.devKeyFile!, "utf8")));
      expect(keys[0]!.trim()).toMatch(/^dev_/);
      expect(keys[1]).toBe(keys[0]);
      for (const replica of [first, second]) {
        const listed = await fetch(`${replica.url}/skills`, { headers: { authorization: `Bearer ${keys[0]!.trim()}` } });
        expect(listed.status).toBe(200);
      }
    } finally {
      await Promise.allSettled([first.close(), second.close()]);
    }
  });

  it("admit the same program through both at once as one artifact", async () => {
    const [a, b] = replicas;
    const source = `export function run() { return ${Math.random()}; }`;
    const replies = await Promise.all([a!, b!, a!, b!].map((replica) => postJson(replica.url, "/v1/programs", { source }, KEY_A)));
    expect(replies.map((reply) => reply.status)).toEqual([200, 200, 200, 200]);
    expect(new Set(replies.map((reply) => reply.body.id)).size).toBe(1);
    const id = replies[0]!.body.id;
    const [fromA, fromB] = await Promise.all(
      [a!, b!].map((replica) => fetch(`${replica.url}/v1/programs/${id}`, { headers: { authorization: `Bearer ${KEY_A}` } }).then((r) => r.json())),
    );
    expect(fromA).toEqual(fromB);
  });
});
