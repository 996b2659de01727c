import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deflatedEntry, rawZip, storedEntry } from "./helpers/raw-zip.ts";
import { startTestService, type TestService } from "./helpers/service.ts";
import { bundleOf, getSkill, publish, putSkill, refusal, skillMd, uploadAsset, type SkillJson } from "./helpers/skills.ts";

/**
 * Hostile and broken bundles go through the real endpoints: uploaded as an ordinary asset
 * (presign, signed PUT, finalize, which do not look inside), then refused by PUT /skills/{name}.
 */

const SKILL_MD = skillMd({ description: "A valid skill." });
const MiB = 1024 * 1024;

let service: TestService;
let existing: SkillJson;
beforeAll(async () => {
  service = await startTestService();
  existing = await publish(service, "existing", bundleOf({ "SKILL.md": skillMd({ description: "The good version." }) }));
});
afterAll(() => service.close());

/** Uploads `zip`, binds it to a fresh name and to the existing skill; both must be refused with `code`, changing nothing. */
async function expectRefused(zip: Uint8Array, code: string, fresh: string): Promise<void> {
  const hash = await uploadAsset(service, zip);
  expect(await putSkill(service, fresh, hash)).toMatchObject(refusal(400, code));
  expect(await getSkill(service, fresh)).toMatchObject(refusal(404, "skill_not_found"));
  expect(await putSkill(service, "existing", hash)).toMatchObject(refusal(400, code));
  expect((await getSkill(service, "existing")).body.skill).toEqual(existing);
}

const zeros = (size: number) => new Uint8Array(size);

describe("hostile bundles through PUT /skills/{name}", () => {
  it("zip bomb: an entry declaring a huge inflation ratio is bundle_compression_ratio", async () => {
    const bomb = rawZip([storedEntry("SKILL.md", SKILL_MD), deflatedEntry("bomb.bin", zeros(4 * MiB))]);
    expect(bomb.byteLength).toBeLessThan(64 * 1024);
    await expectRefused(bomb, "bundle_compression_ratio", "bomb");
  });

  it("zip bomb that lies about its size: stopped while inflating with bundle_compression_ratio", async () => {
    const honest = deflatedEntry("bomb.bin", zeros(4 * MiB));
    const lying = { ...honest, uncompressedSize: honest.data.length, crc32: 0 };
    await expectRefused(rawZip([storedEntry("SKILL.md", SKILL_MD), lying]), "bundle_compression_ratio", "lying-bomb");
  });

  it("zip slip: ../evil is bundle_path_invalid", async () => {
    await expectRefused(rawZip([storedEntry("../evil", "pwned"), storedEntry("SKILL.md", SKILL_MD)]), "bundle_path_invalid", "slip");
  });

  it.each([
    ["an absolute path", "/etc/passwd"],
    ["a nested ..", "scripts/../../evil"],
    ["a backslash", "scripts\\..\\evil"],
  ])("zip slip variant with %s is bundle_path_invalid", async (_label, path) => {
    await expectRefused(rawZip([storedEntry("SKILL.md", SKILL_MD), storedEntry(path, "pwned")]), "bundle_path_invalid", "slip-variant");
  });

  it("a symbolic link entry is bundle_special_entry", async () => {
    const link = storedEntry("link", "/etc/passwd", { externalAttributes: (0o120777 << 16) >>> 0 });
    await expectRefused(rawZip([storedEntry("SKILL.md", SKILL_MD), link]), "bundle_special_entry", "symlink");
  });

  it("random bytes are bundle_not_zip", async () => {
    await expectRefused(new Uint8Array(randomBytes(300)), "bundle_not_zip", "noise");
  });

  it("a truncated canonical bundle is bundle_not_zip", async () => {
    const zip = bundleOf({ "SKILL.md": SKILL_MD }).zip;
    await expectRefused(zip.subarray(0, zip.length - 10), "bundle_not_zip", "truncated");
  });

  it("a valid but non-canonical zip (deflated) is bundle_not_canonical", async () => {
    await expectRefused(rawZip([deflatedEntry("SKILL.md", SKILL_MD)]), "bundle_not_canonical", "deflated");
  });

  it("a valid but non-canonical zip (entries out of order, other timestamp) is bundle_not_canonical", async () => {
    await expectRefused(rawZip([storedEntry("z.txt", "z"), storedEntry("SKILL.md", SKILL_MD)]), "bundle_not_canonical", "unsorted");
    await expectRefused(rawZip([storedEntry("SKILL.md", SKILL_MD, { dosDate: 0x5a21 })]), "bundle_not_canonical", "dated");
  });

  it("a canonical zip without SKILL.md at the root is bundle_missing_skill_md", async () => {
    await expectRefused(bundleOf({ "README.md": "# hi\n" }).zip, "bundle_missing_skill_md", "no-skill-md");
    await expectRefused(bundleOf({ "nested/SKILL.md": SKILL_MD }).zip, "bundle_missing_skill_md", "nested-skill-md");
  });

  it.each([
    ["no frontmatter", "# Title\n", "frontmatter_missing"],
    ["an unclosed frontmatter", "---\ndescription: x\n", "frontmatter_invalid"],
    ["invalid YAML", "---\ndescription: [unclosed\n---\n", "frontmatter_invalid"],
    ["a YAML list instead of a mapping", "---\n- a\n- b\n---\n", "frontmatter_invalid"],
    ["a non-string description", "---\ndescription: 42\n---\n", "frontmatter_invalid"],
    ["duplicate keys", "---\ndescription: a\ndescription: b\n---\n", "frontmatter_invalid"],
    ["no description", "---\nname: x\n---\n", "description_missing"],
    ["a description over 2048 characters", skillMd({ description: "x".repeat(2049) }), "description_too_long"],
  ])("bad frontmatter: %s is %s", async (_label, text, code) => {
    await expectRefused(bundleOf({ "SKILL.md": text }).zip, code, "bad-frontmatter");
  });

  it("a SKILL.md that is not UTF-8 is frontmatter_invalid", async () => {
    await expectRefused(bundleOf({ "SKILL.md": new Uint8Array([0x2d, 0x2d, 0x2d, 0x0a, 0xff, 0xfe, 0x0a]) }).zip, "frontmatter_invalid", "latin");
  });

  it("the existing skill still binds its good bundle after all the refusals", async () => {
    const again = await putSkill(service, "existing", existing.contentHash);
    expect(again.body).toEqual({ skill: existing, changed: false });
  });
});

describe("bundle limits are settings", () => {
  let limited: TestService;
  beforeAll(async () => {
    limited = await startTestService({
      SERVICE_SKILL_MAX_ENTRIES: "2",
      SERVICE_SKILL_MAX_ENTRY_BYTES: "1000",
      SERVICE_SKILL_MAX_TOTAL_BYTES: "1500",
      SERVICE_SKILL_MAX_COMPRESSION_RATIO: "5",
    });
  });
  afterAll(() => limited.close());

  async function bind(files: Record<string, string | Uint8Array>, name: string) {
    return putSkill(limited, name, await uploadAsset(limited, bundleOf(files).zip));
  }

  it("SERVICE_SKILL_MAX_ENTRIES=2: two files pass, three are bundle_too_many_entries", async () => {
    expect((await bind({ "SKILL.md": SKILL_MD, "a.txt": "a" }, "two-files")).status).toBe(200);
    expect(await bind({ "SKILL.md": SKILL_MD, "a.txt": "a", "b.txt": "b" }, "three-files")).toMatchObject(refusal(400, "bundle_too_many_entries"));
    expect(await getSkill(limited, "three-files")).toMatchObject(refusal(404, "skill_not_found"));
  });

  it("SERVICE_SKILL_MAX_ENTRY_BYTES=1000: a 1001-byte file is bundle_entry_too_large", async () => {
    expect((await bind({ "SKILL.md": SKILL_MD, "a.bin": zeros(1000) }, "entry-at-limit")).status).toBe(200);
    expect(await bind({ "SKILL.md": SKILL_MD, "a.bin": zeros(1001) }, "entry-over")).toMatchObject(refusal(400, "bundle_entry_too_large"));
  });

  it("SERVICE_SKILL_MAX_TOTAL_BYTES=1500: files summing past it are bundle_too_large", async () => {
    const bigSkillMd = skillMd({ description: "Long body.", body: "b".repeat(900) });
    expect((await bind({ "SKILL.md": bigSkillMd, "a.bin": zeros(500) }, "total-under")).status).toBe(200);
    expect(await bind({ "SKILL.md": bigSkillMd, "a.bin": zeros(1000) }, "total-over")).toMatchObject(refusal(400, "bundle_too_large"));
  });

  it("SERVICE_SKILL_MAX_COMPRESSION_RATIO=5: a 10x deflated entry is bundle_compression_ratio", async () => {
    const text = "abcdefghij".repeat(90);
    const entry = deflatedEntry("a.txt", text);
    expect(text.length / entry.data.length).toBeGreaterThan(5);
    const hash = await uploadAsset(limited, rawZip([storedEntry("SKILL.md", SKILL_MD), entry]));
    expect(await putSkill(limited, "ratio", hash)).toMatchObject(refusal(400, "bundle_compression_ratio"));
  });

  it("the default service accepts what the limited one refuses", async () => {
    const files = { "SKILL.md": SKILL_MD, "a.txt": "a", "b.txt": "b" };
    expect((await putSkill(service, "three-files", await uploadAsset(service, bundleOf(files).zip))).status).toBe(200);
  });
});
