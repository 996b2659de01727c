/**
 * Skill versions (issue 24): every binding of another hash is an immutable version; runs pin
 * one or get the current; rollback is recorded as a new version; retention keeps the newest
 * versions and those a retained run used, and the bytes nobody holds any more are collected,
 * never those an upload of the same bytes is storing. Through the JSON API and Connect, on a real
 * server (and, in the postgres-s3 project, on PostgreSQL and S3).
 */
import * as fs from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import { crc32 } from "node:zlib";
import type { Client } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunInput, RunService } from "../../gen/skillenv/sessions/v1/runs_pb.js";
import type { SessionService } from "../../gen/skillenv/sessions/v1/sessions_pb.js";
import { startScriptedProvider, type ScriptedProvider } from "../../testing/scripted-provider/index.ts";
import { Level } from "level";
import { LevelStore } from "../src/storage/index.ts";
import { blobExists, KEY_A, KEY_B, onEmbeddedStorage, postJson, startTestService, type TestService } from "./helpers/service.ts";
import { eventsUntil, runClient, runEnded, sessionClient } from "./helpers/sessions.ts";
import { bundleOf, deleteSkill, getSkill, publish, putSkill, refusal, rest, skillMd, uploadAsset, type Bundle } from "./helpers/skills.ts";

const versionsOf = (service: TestService, name: string, query = "", key = KEY_A) => rest(service, "GET", `/skills/${name}/versions${query}`, undefined, key);
const versionOf = (service: TestService, name: string, version: number | string, key = KEY_A) =>
  rest(service, "GET", `/skills/${name}/versions/${version}`, undefined, key);
const deleteVersion = (service: TestService, name: string, version: number, key = KEY_A) =>
  rest(service, "DELETE", `/skills/${name}/versions/${version}`, undefined, key);
const rollback = (service: TestService, name: string, version: number, key = KEY_A) => rest(service, "POST", `/skills/${name}/rollback`, { version }, key);

/** A bundle of SKILL.md and one file, both saying `tag`. */
function content(tag: string, extra: Record<string, string> = {}): Bundle {
  return bundleOf({ "SKILL.md": skillMd({ description: `Content ${tag}.`, body: `Body ${tag}.\n` }), [`${tag}.txt`]: tag, ...extra });
}

async function presignSays(service: TestService, bundle: Bundle, key = KEY_A): Promise<boolean> {
  const reply = await postJson(service.url, "/assets/presign", { sha256: bundle.hash, sizeBytes: bundle.zip.byteLength }, key);
  return reply.body.exists === true;
}

let provider: ScriptedProvider;
let root: string;
let service: TestService;
let sessions: Client<typeof SessionService>;
let runs: Client<typeof RunService>;

beforeAll(async () => {
  provider = await startScriptedProvider();
  root = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "skillenv-versions-")));
  service = await startTestService({
    SERVICE_ANTHROPIC_BASE_URL: provider.anthropicBaseUrl,
    SERVICE_MODEL_MAX_RETRIES: "0",
    SERVICE_ENV_FILESYSTEM_ALLOW: root,
    SERVICE_ENV_WORKSPACE_ROOT: path.join(root, "workspaces"),
  });
  sessions = sessionClient(service.url, KEY_A);
  runs = runClient(service.url, KEY_A);
}, 120_000);
afterAll(async () => {
  await service?.close();
  await provider?.close();
  if (root) await fs.rm(root, { recursive: true, force: true });
});

/** A session with one service environment with a workspace; its id and that /workspace. */
async function sessionWithWorkspace(): Promise<{ sessionId: string; dir: string }> {
  const { session } = await sessions.createSession({
    environments: [{ name: "box", kind: { case: "service", value: { grants: { filesystem: { workspace: "write" } } } as never } }],
  });
  return { sessionId: session!.id, dir: path.join(root, "workspaces", "a", session!.id, "box") };
}

/** Runs one turn answering "ok" with these skill references; the ended run and its run.submitted event's data. */
async function runWith(sessionId: string, skills: Array<{ name: string; version?: number }>, client = runs, watch = sessions) {
  const model = "versions-model";
  provider.script(model, [{ text: "ok" }], { loop: true });
  const input = {
    model: { provider: "anthropic", name: model, maxTokens: 0 },
    message: "go",
    providerKeys: { anthropic: "k" },
    skills: skills.map((skill) => ({ kind: "skill", ...skill })),
  } as never as RunInput;
  const { run } = await client.createRun({ sessionId, run: input });
  const events = await eventsUntil(watch, sessionId, runEnded(run!.id));
  expect(events.at(-1)?.type).toBe("turn.completed");
  const submitted = events.find((event) => event.type === "run.submitted" && event.data?.runId === run!.id);
  return { run: (await client.getRun({ sessionId, runId: run!.id })).run!, submitted: submitted?.data as Record<string, unknown> };
}

describe("versions of a skill", () => {
  const [one, two, three] = [content("one"), content("two"), content("three")];

  beforeAll(async () => {
    for (const bundle of [one, two, three]) await publish(service, "notes", bundle);
  });

  it("numbers each binding of another hash; re-binding an older content is a new version, re-binding the current one a no-op", async () => {
    expect((await getSkill(service, "notes")).body.skill).toMatchObject({ version: 3, contentHash: three.hash });
    const again = await putSkill(service, "notes", two.hash);
    expect(again.body).toMatchObject({ changed: true, skill: { version: 4, contentHash: two.hash, description: "Content two." } });
    const same = await putSkill(service, "notes", two.hash);
    expect(same.body).toMatchObject({ changed: false, skill: { version: 4 } });

    const listed = await versionsOf(service, "notes");
    expect(listed.status).toBe(200);
    expect(listed.body.versions.map((v: any) => [v.version, v.contentHash, v.current ?? false])).toEqual([
      [4, two.hash, true],
      [3, three.hash, false],
      [2, two.hash, false],
      [1, one.hash, false],
    ]);
    expect(listed.body.versions[3]).toMatchObject({
      name: "notes",
      description: "Content one.",
      bundleBytes: String(one.zip.byteLength),
      fileCount: 2,
      totalFileBytes: String(one.totalFileBytes),
    });
    // Metadata only: no field carries bytes.
    expect(listed.text).not.toContain("Body one.");
  });

  it("pages newest first", async () => {
    const first = await versionsOf(service, "notes", "?pageSize=3");
    expect(first.body.versions.map((v: any) => v.version)).toEqual([4, 3, 2]);
    const second = await versionsOf(service, "notes", `?pageSize=3&pageToken=${first.body.nextPageToken}`);
    expect(second.body.versions.map((v: any) => v.version)).toEqual([1]);
    expect(second.body.nextPageToken ?? "").toBe("");
    expect(await versionsOf(service, "notes", "?pageToken=bm90LWEtdmVyc2lvbg")).toMatchObject(refusal(400, "invalid_argument"));
  });

  it("gets one version's metadata and files", async () => {
    const got = await versionOf(service, "notes", 1);
    expect(got.status).toBe(200);
    expect(got.body.version).toMatchObject({ name: "notes", version: 1, contentHash: one.hash });
    expect(got.body.version.current ?? false).toBe(false);
    expect(got.body.files.map((file: any) => [file.path, file.crc32])).toEqual([
      ["SKILL.md", crc32(skillMd({ description: "Content one.", body: "Body one.\n" }))],
      ["one.txt", crc32("one")],
    ]);
  });

  it("reads one version's SKILL.md through GetSkillInstructions only, in its own workspace", async () => {
    const instructions = await rest(service, "GET", "/skills/notes/versions/1/instructions");
    expect(instructions).toMatchObject({ status: 200, body: { skillMd: skillMd({ description: "Content one.", body: "Body one.\n" }) } });
    expect((await rest(service, "GET", "/skills/notes/versions/3/instructions")).body.skillMd).toContain("Body three.");
    expect(await rest(service, "GET", "/skills/notes/versions/99/instructions")).toMatchObject(refusal(404, "skill_version_not_found"));
    expect(await rest(service, "GET", "/skills/notes/versions/1/instructions", undefined, KEY_B)).toMatchObject(refusal(404, "skill_version_not_found"));
  });

  it("refuses unknown versions, unknown skills and bad numbers with stable codes", async () => {
    expect(await versionOf(service, "notes", 99)).toMatchObject(refusal(404, "skill_version_not_found"));
    expect(await versionOf(service, "notes", 0)).toMatchObject(refusal(400, "invalid_argument"));
    expect(await versionOf(service, "notes", -2)).toMatchObject(refusal(400, "invalid_argument"));
    expect(await versionsOf(service, "no-such-skill")).toMatchObject(refusal(404, "skill_not_found"));
    expect(await versionsOf(service, "Bad__Name")).toMatchObject(refusal(400, "invalid_skill_name"));
    expect(await rollback(service, "notes", 99)).toMatchObject(refusal(404, "skill_version_not_found"));
    expect(await rollback(service, "no-such-skill", 1)).toMatchObject(refusal(404, "skill_not_found"));
    expect(await deleteVersion(service, "notes", 99)).toMatchObject(refusal(404, "skill_version_not_found"));
  });

  it("deletes a version but never the current one", async () => {
    expect(await deleteVersion(service, "notes", 4)).toMatchObject({ status: 409, body: { code: "skill_version_current" } });
    expect((await deleteVersion(service, "notes", 3)).status).toBe(200);
    expect(await versionOf(service, "notes", 3)).toMatchObject(refusal(404, "skill_version_not_found"));
    expect((await versionsOf(service, "notes")).body.versions.map((v: any) => v.version)).toEqual([4, 2, 1]);
    // Version 3 was the only one bound to `three`: its asset and bytes went with it.
    expect(await presignSays(service, three)).toBe(false);
    expect(await blobExists(service, three.hash)).toBe(false);
    // `two` is still bound (versions 2 and 4): kept.
    expect(await blobExists(service, two.hash)).toBe(true);
  });

  it("rolls back as a new version that says where it came from; rolling back to the current content is a no-op", async () => {
    const rolled = await rollback(service, "notes", 1);
    expect(rolled.status).toBe(200);
    expect(rolled.body).toMatchObject({ changed: true, skill: { version: 5, contentHash: one.hash }, version: { version: 5, restoredFrom: 1, current: true } });
    expect((await getSkill(service, "notes")).body.skill).toMatchObject({ version: 5, contentHash: one.hash, description: "Content one." });
    const again = await rollback(service, "notes", 1);
    expect(again.body).toMatchObject({ skill: { version: 5 }, version: { version: 5 } });
    expect(again.body.changed).toBe(false);
  });

  it("is the workspace's own: workspace B sees, changes and pins none of A's versions", async () => {
    expect(await versionsOf(service, "notes", "", KEY_B)).toMatchObject(refusal(404, "skill_not_found"));
    expect(await versionOf(service, "notes", 1, KEY_B)).toMatchObject(refusal(404, "skill_version_not_found"));
    expect(await rollback(service, "notes", 1, KEY_B)).toMatchObject(refusal(404, "skill_not_found"));
    expect(await deleteVersion(service, "notes", 1, KEY_B)).toMatchObject(refusal(404, "skill_version_not_found"));
    expect((await versionOf(service, "notes", 1)).status).toBe(200);

    // B's own skill of the same name numbers from 1, apart from A's.
    const own = content("b-own");
    await publish(service, "notes", own, KEY_B);
    expect((await versionsOf(service, "notes", "", KEY_B)).body.versions.map((v: any) => [v.version, v.contentHash])).toEqual([[1, own.hash]]);
    const runsB = runClient(service.url, KEY_B);
    const { session } = await sessionClient(service.url, KEY_B).createSession({});
    const pinned = runsB.createRun({
      sessionId: session!.id,
      run: {
        model: { provider: "anthropic", name: "m", maxTokens: 0 },
        message: "go",
        providerKeys: { anthropic: "k" },
        skills: [{ kind: "skill", name: "notes", version: 2 }],
      } as never,
    });
    await expect(pinned).rejects.toMatchObject({ rawMessage: expect.stringContaining("no version 2") });
  });

  it("deleting the skill deletes its versions", async () => {
    const gone = content("gone");
    await publish(service, "short-lived", gone);
    await publish(service, "short-lived", content("gone-2"));
    expect((await deleteSkill(service, "short-lived")).status).toBe(200);
    expect(await versionsOf(service, "short-lived")).toMatchObject(refusal(404, "skill_not_found"));
    expect(await versionOf(service, "short-lived", 1)).toMatchObject(refusal(404, "skill_version_not_found"));
    expect(await blobExists(service, gone.hash)).toBe(false);
    // A new skill of the name starts again at 1.
    await publish(service, "short-lived", gone);
    expect((await versionsOf(service, "short-lived")).body.versions.map((v: any) => v.version)).toEqual([1]);
  });
});

describe("runs and versions", () => {
  const v1 = content("pin-1", { "only-in-1.txt": "first" });
  const v2 = content("pin-2");
  const v3 = content("pin-3", { "only-in-3.txt": "third" });

  beforeAll(async () => {
    for (const bundle of [v1, v2, v3]) await publish(service, "pinned", bundle);
  });

  it("stages the pinned version's files, and the current version's for an unpinned reference; both recorded", async () => {
    const { sessionId, dir } = await sessionWithWorkspace();
    const pinned = await runWith(sessionId, [{ name: "pinned", version: 1 }]);
    expect((await fs.readdir(path.join(dir, "skills", "pinned"))).sort()).toEqual(["SKILL.md", "only-in-1.txt", "pin-1.txt"]);
    expect(await fs.readFile(path.join(dir, "skills", "pinned", "SKILL.md"), "utf8")).toContain("Body pin-1.");
    expect(pinned.run.skills).toEqual([expect.objectContaining({ name: "pinned", version: 1, pinned: true, contentHash: v1.hash })]);
    expect(pinned.submitted.skills).toEqual([{ name: "pinned", contentHash: v1.hash, version: 1, pinned: true }]);

    const current = await runWith(sessionId, [{ name: "pinned" }]);
    expect((await fs.readdir(path.join(dir, "skills", "pinned"))).sort()).toEqual(["SKILL.md", "only-in-3.txt", "pin-3.txt"]);
    expect(current.run.skills).toEqual([expect.objectContaining({ name: "pinned", version: 3, pinned: false, contentHash: v3.hash })]);
    expect(current.submitted.skills).toEqual([{ name: "pinned", contentHash: v3.hash, version: 3 }]);
  });

  it("after a rollback, the next unpinned run gets the restored content", async () => {
    const { sessionId, dir } = await sessionWithWorkspace();
    await rollback(service, "pinned", 2);
    const after = await runWith(sessionId, [{ name: "pinned" }]);
    expect(after.run.skills[0]).toMatchObject({ version: 4, contentHash: v2.hash });
    expect((await fs.readdir(path.join(dir, "skills", "pinned"))).sort()).toEqual(["SKILL.md", "pin-2.txt"]);
  });

  it("hashes unpinned references by name only (SPEC 4.1.5) and a pin as part of the submission", async () => {
    const { sessionId } = await sessionWithWorkspace();
    const unpinned = await runWith(sessionId, [{ name: "pinned" }]);
    await publish(service, "pinned", content("pin-5"));
    const unpinnedAfterChange = await runWith(sessionId, [{ name: "pinned" }]);
    expect(unpinnedAfterChange.run.skills[0]!.contentHash).not.toBe(unpinned.run.skills[0]!.contentHash);
    expect(unpinnedAfterChange.run.idempotencyHash).toBe(unpinned.run.idempotencyHash);
    const pinnedOne = await runWith(sessionId, [{ name: "pinned", version: 1 }]);
    const pinnedTwo = await runWith(sessionId, [{ name: "pinned", version: 2 }]);
    expect(new Set([unpinned.run.idempotencyHash, pinnedOne.run.idempotencyHash, pinnedTwo.run.idempotencyHash]).size).toBe(3);
  });

  it("refuses a pin to a version the skill does not have, and a negative one", async () => {
    const { sessionId } = await sessionWithWorkspace();
    const submit = (version: number) =>
      runs.createRun({
        sessionId,
        run: {
          model: { provider: "anthropic", name: "m", maxTokens: 0 },
          message: "go",
          providerKeys: { anthropic: "k" },
          skills: [{ kind: "skill", name: "pinned", version }],
        } as never,
      });
    await expect(submit(42)).rejects.toMatchObject({ rawMessage: "skill pinned has no version 42" });
    await expect(submit(-1)).rejects.toMatchObject({ rawMessage: expect.stringContaining("skills[].version") });
    const json = await postJson(
      service.url,
      `/v1/sessions/${sessionId}/runs`,
      {
        model: { provider: "anthropic", name: "m" },
        message: "go",
        providerKeys: { anthropic: "k" },
        skills: [{ kind: "skill", name: "pinned", version: 42 }],
      },
      KEY_A,
    );
    expect(json).toMatchObject({ status: 404, body: { code: "skill_version_not_found" } });
  });
});

describe("retention (SERVICE_SKILL_MAX_VERSIONS) and the collection of bytes", () => {
  let small: TestService;
  beforeAll(async () => {
    small = await startTestService({ SERVICE_SKILL_MAX_VERSIONS: "2", SERVICE_ANTHROPIC_BASE_URL: provider.anthropicBaseUrl });
  });
  afterAll(() => small?.close());

  it("drops the oldest unused version and its bytes, keeps one a retained run used until the run is deleted", async () => {
    const [r1, r2, r3, r4] = ["r1", "r2", "r3", "r4"].map((tag) => content(tag));
    const smallRuns = runClient(small.url, KEY_A);
    const smallSessions = sessionClient(small.url, KEY_A);
    await publish(small, "kept", r1!);
    const { session } = await smallSessions.createSession({});
    const used = await runWith(session!.id, [{ name: "kept" }], smallRuns, smallSessions);
    expect(used.run.skills[0]).toMatchObject({ version: 1 });

    // Workspace B uploads r3's bytes too: its asset holds them whatever A's versions do.
    await uploadAsset(small, r3!.zip, KEY_B);
    await publish(small, "kept", r2!);
    await publish(small, "kept", r3!);
    // Newest two (2, 3) plus 1, which the run used.
    expect((await versionsOf(small, "kept")).body.versions.map((v: any) => v.version)).toEqual([3, 2, 1]);

    await publish(small, "kept", r4!);
    expect((await versionsOf(small, "kept")).body.versions.map((v: any) => v.version)).toEqual([4, 3, 1]);
    expect(await blobExists(small, r2!.hash)).toBe(false);
    expect(await presignSays(small, r2!)).toBe(false);
    expect(await blobExists(small, r1!.hash)).toBe(true);

    await publish(small, "kept", content("r5"));
    // 3 is dropped from A, but B's asset still holds its bytes: B can bind them.
    expect((await versionsOf(small, "kept")).body.versions.map((v: any) => v.version)).toEqual([5, 4, 1]);
    expect(await blobExists(small, r3!.hash)).toBe(true);
    expect((await putSkill(small, "from-b", r3!.hash, KEY_B)).status).toBe(200);

    // The run goes: nothing keeps version 1 any more.
    await smallRuns.deleteRun({ sessionId: session!.id, runId: used.run.id });
    expect((await versionsOf(small, "kept")).body.versions.map((v: any) => v.version)).toEqual([5, 4]);
    expect(await blobExists(small, r1!.hash)).toBe(false);
    // A pinned reference to a dropped version is refused by code.
    await expect(
      smallRuns.createRun({
        sessionId: session!.id,
        run: {
          model: { provider: "anthropic", name: "m", maxTokens: 0 },
          message: "go",
          providerKeys: { anthropic: "k" },
          skills: [{ kind: "skill", name: "kept", version: 1 }],
        } as never,
      }),
    ).rejects.toMatchObject({ rawMessage: "skill kept has no version 1" });
  });

  it("loses nothing when a collection races an upload of the same bytes by another workspace", async () => {
    for (let round = 0; round < 8; round++) {
      const bundle = content(`race-${round}`);
      await publish(small, "racer", bundle);
      // A's only version of the bytes goes (collecting them) while B uploads and binds the same bytes.
      const [deleted, bound] = await Promise.all([
        deleteSkill(small, "racer"),
        (async () => {
          await uploadAsset(small, bundle.zip, KEY_B);
          return putSkill(small, `racer-${round}`, bundle.hash, KEY_B);
        })(),
      ]);
      expect(deleted.status).toBe(200);
      expect(bound.status, bound.text).toBe(200);
      // B's skill has its bytes: they are there, and a run can read them.
      expect(await blobExists(small, bundle.hash)).toBe(true);
      const got = await getSkill(small, `racer-${round}`, KEY_B);
      expect(got.body.skill.contentHash).toBe(bundle.hash);
    }
    const runsB = runClient(small.url, KEY_B);
    const sessionsB = sessionClient(small.url, KEY_B);
    const { session } = await sessionsB.createSession({});
    const ran = await runWith(session!.id, [{ name: "racer-7" }], runsB, sessionsB);
    expect(ran.run.skills[0]).toMatchObject({ name: "racer-7", version: 1 });
  });
});

describe("skills bound before versions were kept", () => {
  it.runIf(onEmbeddedStorage)("get version 1 (their content) when the server starts, and number on from there", async () => {
    // The data directory of a server that kept no versions has neither them nor the migration's mark.
    const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "skillenv-versions-migrate-"));
    const old = content("before-versions");
    const first = await startTestService({ SERVICE_DATA_DIR: dataDir });
    await publish(first, "legacy", old);
    await first.close();

    // The record as a server without versions wrote it: no version, and no version records.
    const db = new Level<string, string>(path.join(dataDir, "metadata"), { valueEncoding: "utf8" });
    await db.open();
    const store = new LevelStore(db);
    const skills = store.table<Record<string, unknown>>("skills");
    const { version: _dropped, ...unversioned } = (await skills.get("a/legacy"))!;
    const versions = store.table("skill-versions");
    const bindings = store.table("skill-bindings");
    const migrations = store.table("skill-migrations");
    const migrationKeys = (await migrations.entries({})).map(([key]) => key);
    expect(migrationKeys).toEqual(["versions"]);
    const versionKeys = (await versions.entries({})).map(([key]) => key);
    const bindingKeys = (await bindings.entries({})).map(([key]) => key);
    await store.write([
      skills.putOp("a/legacy", unversioned),
      ...versionKeys.map((key) => versions.deleteOp(key)),
      ...bindingKeys.map((key) => bindings.deleteOp(key)),
      ...migrationKeys.map((key) => migrations.deleteOp(key)),
    ]);
    await store.close();

    const second = await startTestService({ SERVICE_DATA_DIR: dataDir });
    try {
      expect((await getSkill(second, "legacy")).body.skill).toMatchObject({ version: 1, contentHash: old.hash });
      expect((await versionsOf(second, "legacy")).body.versions).toEqual([expect.objectContaining({ version: 1, contentHash: old.hash, current: true })]);
      await publish(second, "legacy", content("after-versions"));
      expect((await versionsOf(second, "legacy")).body.versions.map((v: any) => v.version)).toEqual([2, 1]);
      // Version 1 binds the old bundle like any other: deleting it releases the asset and the bytes.
      expect((await deleteVersion(second, "legacy", 1)).status).toBe(200);
      expect(await presignSays(second, old)).toBe(false);
    } finally {
      await second.close();
      await fs.rm(dataDir, { recursive: true, force: true });
    }
  });
});
