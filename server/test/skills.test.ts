import { crc32 } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  allSkillNames,
  bundleOf,
  deleteSkill,
  expectedMetadata,
  getSkill,
  listSkills,
  METADATA_FIELDS,
  publish,
  putObject,
  putSkill,
  refusal,
  rest,
  skillMd,
  sleep,
  uploadAsset,
  type SkillJson,
} from "./helpers/skills.ts";
import { KEY_A, KEY_B, postJson, startTestService, type TestService } from "./helpers/service.ts";

let service: TestService;
beforeAll(async () => {
  service = await startTestService();
});
afterAll(() => service.close());

/** A one-file bundle whose description (and so bytes) is unique to `tag`. */
function simpleBundle(tag: string, extraFiles: Record<string, string> = {}) {
  const description = `Skill ${tag}.`;
  return { description, bundle: bundleOf({ "SKILL.md": skillMd({ description }), ...extraFiles }) };
}

describe("skill names (PUT /skills/{name})", () => {
  let hash: string;
  beforeAll(async () => {
    hash = await uploadAsset(service, simpleBundle("names").bundle.zip);
  });

  it.each([
    ["uppercase", "Demo"],
    ["leading hyphen", "-demo"],
    ["leading underscore", "_demo"],
    ["a dot", "demo.v2"],
    ["a space", "my%20skill"],
    ["an encoded slash", "demo%2Fevil"],
    ["a trailing newline", "demo%0A"],
    ["non-ASCII", "d%C3%A9mo"],
    ["a double underscore (MCP separator)", "demo__tool"],
    ["a double underscore at the end", "demo__"],
    ["the reserved name skills", "skills"],
    ["the reserved name skill", "skill"],
    ["129 characters", "a".repeat(129)],
  ])("refuses %s with invalid_skill_name and stores nothing", async (_label, name) => {
    expect(await putSkill(service, name, hash)).toMatchObject(refusal(400, "invalid_skill_name"));
    expect(await allSkillNames(service)).not.toContain(decodeURIComponent(name));
  });

  it.each([
    ["one character", "a"],
    ["one digit", "7"],
    ["128 characters", "a".repeat(128)],
    ["hyphens and single underscores", "my-skill_v2"],
    ["a reserved word as a prefix", "skills-helper"],
    ["a leading digit", "0demo"],
  ])("accepts %s", async (_label, name) => {
    const reply = await putSkill(service, name, hash);
    expect(reply.status).toBe(200);
    expect(reply.body.skill.name).toBe(name);
    expect((await getSkill(service, name)).body.skill.name).toBe(name);
  });

  it.each(["Demo", "demo__tool", "skills", "a".repeat(129)])("GET and DELETE of the invalid name %s are invalid_skill_name", async (name) => {
    expect(await getSkill(service, name)).toMatchObject(refusal(400, "invalid_skill_name"));
    expect(await deleteSkill(service, name)).toMatchObject(refusal(400, "invalid_skill_name"));
  });

  it("binds the path name, not the frontmatter name (an explicit name wins)", async () => {
    const bundle = bundleOf({ "SKILL.md": skillMd({ name: "frontmatter-name", description: "Named twice." }) });
    const skill = await publish(service, "path-name", bundle);
    expect(skill.name).toBe("path-name");
    expect((await getSkill(service, "frontmatter-name")).body.code).toBe("skill_not_found");
  });

  it("binds the path name even when the body carries another name", async () => {
    const redirected = await rest(service, "PUT", "/skills/path-first", { name: "body-second", contentHash: hash });
    expect(redirected.status).toBe(200);
    expect(redirected.body.skill.name).toBe("path-first");
    expect((await getSkill(service, "body-second")).body.code).toBe("skill_not_found");
  });

  it("refuses a body without contentHash with invalid_sha256, and unknown fields with malformed_request", async () => {
    expect(await rest(service, "PUT", "/skills/no-hash", {})).toMatchObject(refusal(400, "invalid_sha256"));
    expect(await rest(service, "PUT", "/skills/no-hash", { contentHash: hash, bytes: "UEsDBA==" })).toMatchObject(refusal(400, "malformed_request"));
    expect((await getSkill(service, "no-hash")).body.code).toBe("skill_not_found");
  });

  it("accepts a bundle whose frontmatter name is invalid when bound under a valid name", async () => {
    const bundle = bundleOf({ "SKILL.md": skillMd({ name: "Not A Valid Name", description: "Overridden name." }) });
    expect((await publish(service, "overridden", bundle)).name).toBe("overridden");
  });
});

describe("description", () => {
  it("comes from the SKILL.md frontmatter and is returned by put, get and list", async () => {
    const description = "Summarises quarterly reports: totals, trends and outliers.";
    const bundle = bundleOf({ "SKILL.md": skillMd({ description }) });
    expect((await publish(service, "reports", bundle)).description).toBe(description);
    expect((await getSkill(service, "reports")).body.skill.description).toBe(description);
    const listed = (await listSkills(service, { pageSize: 1000 })).body.skills as SkillJson[];
    expect(listed.find((skill) => skill.name === "reports")?.description).toBe(description);
  });

  it("is kept whole at exactly 2048 characters, counted as characters rather than bytes", async () => {
    const ascii = "d".repeat(2048);
    expect((await publish(service, "long-ascii", bundleOf({ "SKILL.md": skillMd({ description: ascii }) }))).description).toBe(ascii);
    const accented = "é".repeat(2048); // 4096 UTF-8 bytes
    expect((await publish(service, "long-accented", bundleOf({ "SKILL.md": skillMd({ description: accented }) }))).description).toBe(accented);
  });

  it.each([
    ["2049 characters", skillMd({ description: "d".repeat(2049) }), "description_too_long"],
    ["no description", "---\nname: nodesc\n---\nBody.\n", "description_missing"],
    ["an empty description", '---\ndescription: ""\n---\nBody.\n', "description_missing"],
    ["no frontmatter", "# Just Markdown\n", "frontmatter_missing"],
  ])("is required: %s is refused with %s", async (_label, text, code) => {
    const hash = await uploadAsset(service, bundleOf({ "SKILL.md": text }).zip);
    expect(await putSkill(service, "needs-description", hash)).toMatchObject(refusal(400, code));
    expect((await getSkill(service, "needs-description")).body.code).toBe("skill_not_found");
  });
});

describe("upsert by name", () => {
  it("creates, then treats the identical hash as a no-op that writes nothing", async () => {
    const { description, bundle } = simpleBundle("noop", { "scripts/run.sh": "echo hi\n" });
    await uploadAsset(service, bundle.zip);
    const created = await putSkill(service, "noop", bundle.hash);
    expect(created.status).toBe(200);
    expect(created.body.changed).toBe(true);
    expect(created.body.skill).toMatchObject({ name: "noop", ...expectedMetadata(bundle, description) });
    expect(created.body.skill.createdAt).toBe(created.body.skill.updatedAt);

    await sleep(10);
    const again = await putSkill(service, "noop", bundle.hash);
    expect(again.status).toBe(200);
    expect(again.body.changed).toBe(false);
    expect(again.body.skill).toEqual(created.body.skill);
    expect((await getSkill(service, "noop")).body.skill).toEqual(created.body.skill);
  });

  it("is mutable by name: other bytes under the same name replace hash, description and sizes", async () => {
    const first = simpleBundle("v1");
    const second = simpleBundle("v2 with more files", { "reference.md": "# Reference\n", "scripts/a.py": "print(1)\n" });
    const created = await publish(service, "mutable", first.bundle);
    await sleep(10);

    await uploadAsset(service, second.bundle.zip);
    const replaced = await putSkill(service, "mutable", second.bundle.hash);
    expect(replaced.body.changed).toBe(true);
    expect(replaced.body.skill).toMatchObject(expectedMetadata(second.bundle, second.description));
    expect(replaced.body.skill.createdAt).toBe(created.createdAt);
    expect(Date.parse(replaced.body.skill.updatedAt)).toBeGreaterThan(Date.parse(created.updatedAt));
    expect((await getSkill(service, "mutable")).body.skill).toEqual(replaced.body.skill);

    // Going back to the first bytes is a change too, not a no-op.
    await sleep(10);
    const reverted = await putSkill(service, "mutable", first.bundle.hash);
    expect(reverted.body.changed).toBe(true);
    expect(reverted.body.skill).toMatchObject(expectedMetadata(first.bundle, first.description));
  });

  it("refuses a hash this workspace never uploaded with asset_not_found", async () => {
    const { bundle } = simpleBundle("never uploaded");
    expect(await putSkill(service, "ghost", bundle.hash)).toMatchObject(refusal(404, "asset_not_found"));
    expect((await getSkill(service, "ghost")).body.code).toBe("skill_not_found");
  });

  it("refuses a hash that was uploaded but not finalized", async () => {
    const { bundle } = simpleBundle("uploaded only");
    const presigned = await postJson(service.url, "/assets/presign", { sha256: bundle.hash, sizeBytes: bundle.zip.byteLength }, KEY_A);
    await putObject(presigned.body.uploadUrl, presigned.body.uploadHeaders, bundle.zip);
    expect(await putSkill(service, "unfinalized", bundle.hash)).toMatchObject(refusal(404, "asset_not_found"));
    expect((await getSkill(service, "unfinalized")).body.code).toBe("skill_not_found");
  });

  it("refuses a hash finalized only by workspace b, and leaves an existing skill unchanged", async () => {
    const existing = await publish(service, "cross-bind", simpleBundle("a's own").bundle);
    const { bundle } = simpleBundle("b's private");
    await uploadAsset(service, bundle.zip, KEY_B);
    expect(await putSkill(service, "cross-bind", bundle.hash)).toMatchObject(refusal(404, "asset_not_found"));
    expect(await putSkill(service, "cross-fresh", bundle.hash)).toMatchObject(refusal(404, "asset_not_found"));
    expect((await getSkill(service, "cross-bind")).body.skill).toEqual(existing);
    expect((await getSkill(service, "cross-fresh")).body.code).toBe("skill_not_found");
  });

  it.each([
    ["short", "abc"],
    ["uppercase", "A".repeat(64)],
  ])("refuses a %s content hash with invalid_sha256", async (_label, contentHash) => {
    expect(await putSkill(service, "bad-hash", contentHash)).toMatchObject(refusal(400, "invalid_sha256"));
  });

  it("refuses a call without a key", async () => {
    const response = await fetch(`${service.url}/skills`);
    expect(response.status).toBe(401);
    expect(await response.json()).toMatchObject({ code: "unauthenticated" });
  });
});

describe("get, list and delete", () => {
  it("get and list return metadata only, never bytes", async () => {
    const marker = "BODY-MARKER-4f1c";
    const fileMarker = "FILE-MARKER-9a2e";
    const bundle = bundleOf({
      "SKILL.md": skillMd({ description: "Metadata only.", body: `${marker}\n` }),
      "data/notes.txt": fileMarker,
    });
    await publish(service, "metadata-only", bundle);
    const got = await getSkill(service, "metadata-only");
    const listed = await listSkills(service, { pageSize: 1000 });
    const fromList = (listed.body.skills as SkillJson[]).find((skill) => skill.name === "metadata-only")!;

    for (const skill of [got.body.skill, fromList]) {
      expect(Object.keys(skill).sort()).toEqual(METADATA_FIELDS);
      expect(skill).toMatchObject({ name: "metadata-only", ...expectedMetadata(bundle, "Metadata only.") });
      expect(Date.parse(skill.createdAt)).not.toBeNaN();
    }
    expect(Object.keys(got.body).sort()).toEqual(["files", "skill"]);
    const skillMdBytes = new TextEncoder().encode(skillMd({ description: "Metadata only.", body: `${marker}\n` })).byteLength;
    const skillMdText = skillMd({ description: "Metadata only.", body: `${marker}\n` });
    expect(got.body.files).toEqual([
      { path: "SKILL.md", sizeBytes: String(skillMdBytes), crc32: crc32(skillMdText) },
      { path: "data/notes.txt", sizeBytes: String(fileMarker.length), crc32: crc32(fileMarker) },
    ]);
    const base64 = (text: string) => Buffer.from(text).toString("base64");
    for (const text of [got.text, listed.text]) {
      for (const forbidden of [marker, fileMarker, base64(marker), base64(fileMarker), Buffer.from(bundle.zip).toString("base64").slice(0, 40)]) {
        expect(text).not.toContain(forbidden);
      }
    }
  });

  it("get of an unknown name is skill_not_found", async () => {
    expect(await getSkill(service, "no-such-skill")).toMatchObject(refusal(404, "skill_not_found"));
  });

  it("delete removes the skill; get and a second delete are skill_not_found", async () => {
    await publish(service, "doomed", simpleBundle("doomed").bundle);
    const deleted = await deleteSkill(service, "doomed");
    expect(deleted).toMatchObject({ status: 200, body: {} });
    expect(await getSkill(service, "doomed")).toMatchObject(refusal(404, "skill_not_found"));
    expect(await deleteSkill(service, "doomed")).toMatchObject(refusal(404, "skill_not_found"));
    expect(await allSkillNames(service)).not.toContain("doomed");
  });

  it("binding a deleted name again creates a new skill, once its bundle is uploaded again (its asset went with its last version)", async () => {
    const { bundle } = simpleBundle("reborn");
    const first = await publish(service, "reborn", bundle);
    await deleteSkill(service, "reborn");
    await sleep(10);
    expect(await putSkill(service, "reborn", bundle.hash)).toMatchObject(refusal(404, "asset_not_found"));
    await uploadAsset(service, bundle.zip);
    const again = await putSkill(service, "reborn", bundle.hash);
    expect(again.body.changed).toBe(true);
    expect(again.body.skill.version).toBe(1);
    expect(Date.parse(again.body.skill.createdAt)).toBeGreaterThan(Date.parse(first.createdAt));
  });
});

describe("list pagination", () => {
  // A service of its own, so the workspace holds exactly the skills created here.
  let fresh: TestService;
  const names = ["delta", "alpha", "golf", "charlie", "echo", "bravo", "foxtrot"];
  beforeAll(async () => {
    fresh = await startTestService();
    const { bundle } = simpleBundle("paged");
    for (const name of names) await publish(fresh, name, bundle);
  });
  afterAll(() => fresh.close());

  it("pages 7 skills 3 at a time in name order", async () => {
    const first = await listSkills(fresh, { pageSize: 3 });
    expect(first.body.skills.map((s: SkillJson) => s.name)).toEqual(["alpha", "bravo", "charlie"]);
    expect(first.body.nextPageToken).toMatch(/.+/);

    const second = await listSkills(fresh, { pageSize: 3, pageToken: first.body.nextPageToken });
    expect(second.body.skills.map((s: SkillJson) => s.name)).toEqual(["delta", "echo", "foxtrot"]);
    expect(second.body.nextPageToken).toMatch(/.+/);
    expect(second.body.nextPageToken).not.toBe(first.body.nextPageToken);

    const third = await listSkills(fresh, { pageSize: 3, pageToken: second.body.nextPageToken });
    expect(third.body.skills.map((s: SkillJson) => s.name)).toEqual(["golf"]);
    expect(third.body.nextPageToken ?? "").toBe("");
  });

  it("ends without a token when the last page is exactly full", async () => {
    const first = await listSkills(fresh, { pageSize: 7 });
    expect(first.body.skills).toHaveLength(7);
    expect(first.body.nextPageToken ?? "").toBe("");
  });

  it("returns everything in one page when pageSize is omitted", async () => {
    const all = await listSkills(fresh);
    expect(all.body.skills.map((s: SkillJson) => s.name)).toEqual([...names].sort());
    expect(all.body.nextPageToken ?? "").toBe("");
  });

  it("continues correctly when the last skill of a page is deleted between pages", async () => {
    const first = await listSkills(fresh, { pageSize: 2 });
    expect(first.body.skills.map((s: SkillJson) => s.name)).toEqual(["alpha", "bravo"]);
    await deleteSkill(fresh, "bravo");
    try {
      const second = await listSkills(fresh, { pageSize: 2, pageToken: first.body.nextPageToken });
      expect(second.body.skills.map((s: SkillJson) => s.name)).toEqual(["charlie", "delta"]);
    } finally {
      await publish(fresh, "bravo", simpleBundle("paged").bundle);
    }
  });

  it("ends a page early, with a token, before the skill that would pass SERVICE_LIST_MAX_BYTES; one larger than that comes alone", async () => {
    const small = await startTestService({ SERVICE_LIST_MAX_BYTES: "4096", SERVICE_SESSION_MAX_BYTES: "4096" });
    try {
      // About 1.7 KB stored each: two fit the budget, a third does not.
      const long = bundleOf({ "SKILL.md": skillMd({ description: `Long ${"x".repeat(1500)}` }) });
      for (const name of ["a1", "a2", "a3", "a4", "a5"]) await publish(small, name, long);
      // 4096 UTF-8 bytes of description alone: more than the budget, so a page of its own.
      await publish(small, "wide", bundleOf({ "SKILL.md": skillMd({ description: "é".repeat(2048) }) }));
      const pages: string[][] = [];
      let pageToken = "";
      do {
        const page = await listSkills(small, { pageSize: 1000, pageToken });
        expect(page.status).toBe(200);
        pages.push(page.body.skills.map((s: SkillJson) => s.name));
        pageToken = page.body.nextPageToken ?? "";
      } while (pageToken !== "");
      expect(pages).toEqual([["a1", "a2"], ["a3", "a4"], ["a5"], ["wide"]]);
    } finally {
      await small.close();
    }
  });

  it("does not count a skill's file listing, which a list does not answer, against the page's bytes", async () => {
    const small = await startTestService({ SERVICE_LIST_MAX_BYTES: "8192", SERVICE_SESSION_MAX_BYTES: "8192" });
    try {
      // 300 files: a listing of about 20 KB, more than the whole budget, behind a small record.
      const files = Object.fromEntries(Array.from({ length: 300 }, (_, i) => [`reference/chapter-${String(i).padStart(3, "0")}.md`, `${i}`]));
      const many = bundleOf({ "SKILL.md": skillMd({ description: "Many files." }), ...files });
      for (const name of ["m1", "m2", "m3"]) await publish(small, name, many);
      const page = await listSkills(small, { pageSize: 1000 });
      expect(page.body.skills.map((s: SkillJson) => s.name)).toEqual(["m1", "m2", "m3"]);
      expect(page.body.nextPageToken ?? "").toBe("");
      const got = await getSkill(small, "m2");
      expect(got.body.files).toHaveLength(301);
    } finally {
      await small.close();
    }
  });

  it.each([
    ["a page size above 1000", { pageSize: 1001 }],
    ["a negative page size", { pageSize: -1 }],
    ["a token the server never issued", { pageToken: "not a token!" }],
  ])("refuses %s with invalid_argument", async (_label, query) => {
    expect(await listSkills(fresh, query)).toMatchObject(refusal(400, "invalid_argument"));
  });
});

describe("workspace isolation", () => {
  const name = "isolated";
  let aSkill: SkillJson;
  beforeAll(async () => {
    aSkill = await publish(service, name, simpleBundle("a's isolated").bundle, KEY_A);
  });

  it("b cannot list, get or delete a's skill", async () => {
    expect(await allSkillNames(service, KEY_B)).not.toContain(name);
    expect(await getSkill(service, name, KEY_B)).toMatchObject(refusal(404, "skill_not_found"));
    expect(await deleteSkill(service, name, KEY_B)).toMatchObject(refusal(404, "skill_not_found"));
    expect((await getSkill(service, name, KEY_A)).body.skill).toEqual(aSkill);
  });

  it("b cannot bind a's hash even knowing it", async () => {
    expect(await putSkill(service, name, aSkill.contentHash, KEY_B)).toMatchObject(refusal(404, "asset_not_found"));
    expect((await getSkill(service, name, KEY_A)).body.skill).toEqual(aSkill);
  });

  it("b's PUT of the same name creates b's own skill; a's stays unchanged", async () => {
    const { description, bundle } = simpleBundle("b's isolated");
    const bSkill = await publish(service, name, bundle, KEY_B);
    expect(bSkill).toMatchObject({ name, ...expectedMetadata(bundle, description) });
    expect((await getSkill(service, name, KEY_B)).body.skill).toEqual(bSkill);
    expect((await getSkill(service, name, KEY_A)).body.skill).toEqual(aSkill);

    expect(await deleteSkill(service, name, KEY_B)).toMatchObject({ status: 200 });
    expect((await getSkill(service, name, KEY_A)).body.skill).toEqual(aSkill);
  });
});

describe("concurrent upserts of one name", () => {
  it("20 PUTs alternating two bundles all succeed and leave one bundle's state, never a mix", async () => {
    const one = simpleBundle("concurrent one");
    const two = simpleBundle("concurrent two, a longer description", { "extra/file.txt": "x".repeat(500) });
    await uploadAsset(service, one.bundle.zip);
    await uploadAsset(service, two.bundle.zip);
    const expected = new Map([
      [one.bundle.hash, expectedMetadata(one.bundle, one.description)],
      [two.bundle.hash, expectedMetadata(two.bundle, two.description)],
    ]);

    const replies = await Promise.all(Array.from({ length: 20 }, (_, i) => putSkill(service, "contended", i % 2 === 0 ? one.bundle.hash : two.bundle.hash)));
    for (const reply of replies) {
      expect(reply.status).toBe(200);
      expect(reply.body.skill).toMatchObject(expected.get(reply.body.skill.contentHash)!);
    }
    expect(replies.filter((reply) => reply.body.changed === true).length).toBeGreaterThanOrEqual(1);
    // Only the first writer created the name; everyone else saw its createdAt.
    expect(new Set(replies.map((reply) => reply.body.skill.createdAt)).size).toBe(1);

    const final = (await getSkill(service, "contended")).body.skill as SkillJson;
    expect(final).toMatchObject(expected.get(final.contentHash)!);
    expect(final.createdAt).toBe(replies[0]!.body.skill.createdAt);
  });
});

describe("concurrent uploads of identical bundle bytes by one workspace", () => {
  /** One uploader: presign, then (unless deduplicated) the signed PUT and finalize. Returns the finalize code. */
  async function uploadOnce(bundle: { zip: Uint8Array; hash: string }): Promise<string> {
    const presigned = await postJson(service.url, "/assets/presign", { sha256: bundle.hash, sizeBytes: bundle.zip.byteLength }, KEY_A);
    if (presigned.body.exists) return "ok";
    await putObject(presigned.body.uploadUrl, presigned.body.uploadHeaders, bundle.zip);
    const finalized = await postJson(service.url, "/assets/finalize", { sha256: bundle.hash }, KEY_A);
    return finalized.status === 200 ? "ok" : finalized.body.code;
  }

  // Two drafts with the same content (or two processes) upload the same bytes at once: every
  // uploader did PUT the bytes, so every finalize must succeed and every bind after it too.
  it("every presign -> PUT -> finalize succeeds, then the bind succeeds", async () => {
    for (let round = 0; round < 10; round++) {
      const { bundle } = simpleBundle(`same bytes, round ${round}`);
      const codes = await Promise.all(Array.from({ length: 10 }, () => uploadOnce(bundle)));
      expect({ round, codes }).toEqual({ round, codes: Array(10).fill("ok") });
      expect((await putSkill(service, `same-bytes-${round}`, bundle.hash)).status).toBe(200);
    }
  });
});
