import { randomBytes } from "node:crypto";
import * as fs from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { spawnService, type ServiceProcess } from "./helpers/process.ts";
import { KEY_A, KEY_B, startTestService, type TestService, onEmbeddedStorage } from "./helpers/service.ts";
import { bundleOf, listSkills, publish, putSkill, refusal, skillMd, uploadAsset, type Reply } from "./helpers/skills.ts";

/**
 * PutSkill costs bounded work whatever the bundle (issue #7, items 3 and 5): a hostile
 * frontmatter is refused by its bounds, an oversized asset by its recorded size, and other
 * workspaces keep being answered meanwhile.
 */

/**
 * Runs `work` with the handles the service opens on stored blobs counted as they are read (from
 * their first stat to their close): how many bundles were read, and the most read at once. The
 * service runs in this process, so its file handles are this process's.
 */
async function countingBundleReads(dataDir: string, work: () => Promise<void>): Promise<{ reads: number; peak: number }> {
  const probe = await fs.open(import.meta.filename, "r");
  const prototype = Object.getPrototypeOf(probe) as { stat(this: fs.FileHandle, ...args: unknown[]): Promise<unknown> };
  await probe.close();
  const stat = prototype.stat;
  const blobs = path.join(dataDir, "blobs", "sha256") + path.sep;
  const reading = new Set<fs.FileHandle>();
  const counts = { reads: 0, peak: 0 };
  prototype.stat = async function (this: fs.FileHandle, ...args: unknown[]) {
    const file = await fs.readlink(`/proc/self/fd/${this.fd}`).catch(() => "");
    if (file.startsWith(blobs) && !reading.has(this)) {
      reading.add(this);
      counts.reads++;
      counts.peak = Math.max(counts.peak, reading.size);
      // A handle's close is its own property, not its prototype's.
      const close = this.close;
      this.close = () => (reading.delete(this), close.call(this));
    }
    return stat.apply(this, args);
  };
  try {
    await work();
  } finally {
    prototype.stat = stat;
  }
  return counts;
}

describe("a frontmatter with many keys (issue #7, item 3)", () => {
  // A server process of its own: a server in the test's process would stall the test's clock with it.
  let server: ServiceProcess;
  let service: TestService;
  beforeAll(async () => {
    const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "skillenv-hardening-"));
    server = await spawnService({ SERVICE_DATA_DIR: dataDir, SERVICE_API_KEYS: `a=${KEY_A},b=${KEY_B}` });
    service = { url: server.url } as TestService;
  });
  afterAll(async () => {
    server.child.kill("SIGTERM");
    await server.exited;
  });

  it("is refused with frontmatter_too_large, and another workspace's ListSkills is answered all along", async () => {
    // The case, four times over: 20 000 keys in a 190 KB bundle held every workspace up
    // for 12 s, and the parse was quadratic in the keys. Parsed whole on the server's thread these
    // would hold it for minutes, far past the test's timeout, which is then what fails it: no
    // bound here depends on how busy the machine is.
    const keys = Array.from({ length: 80_000 }, (_, i) => `key${i}: value\n`).join("");
    const hostile = bundleOf({ "SKILL.md": `---\ndescription: Many keys.\n${keys}---\n` });
    const hash = await uploadAsset(service, hostile.zip);

    let answered = false;
    const put = putSkill(service, "many-keys", hash).finally(() => (answered = true));
    do {
      expect((await listSkills(service, {}, KEY_B)).status).toBe(200);
    } while (!answered);
    expect(await put).toMatchObject(refusal(400, "frontmatter_too_large"));
  });

  it("nested too deep, with too many keys or aliases: each is frontmatter_too_large through the parser threads", async () => {
    const cases = [
      `description: d\nx: ${"[".repeat(40)}${"]".repeat(40)}\n`,
      `description: d\nx: {${Array.from({ length: 1001 }, (_, i) => `k${i}: 1`).join(", ")}}\n`,
      `description: d\nx: [${Array.from({ length: 101 }, (_, i) => `&a${i} ${i}`).join(", ")}]\ny: [${Array.from({ length: 101 }, (_, i) => `*a${i}`).join(", ")}]\n`,
    ];
    for (const [i, frontmatter] of cases.entries()) {
      const hash = await uploadAsset(service, bundleOf({ "SKILL.md": `---\n${frontmatter}---\n` }).zip);
      expect(await putSkill(service, `bounded-${i}`, hash)).toMatchObject(refusal(400, "frontmatter_too_large"));
    }
  });
});

describe("bundle size and concurrency (issue #7, item 5)", () => {
  let service: TestService;
  beforeAll(async () => {
    // The largest canonical archive within these limits: 1024 + 2 x (76 + 2 x 65535) + 22 = 263 338 bytes.
    service = await startTestService({
      SERVICE_SKILL_MAX_ENTRIES: "2",
      SERVICE_SKILL_MAX_TOTAL_BYTES: "1024",
      SERVICE_SKILL_MAX_CONCURRENT_VALIDATIONS: "1",
    });
  });
  afterAll(() => service.close());

  it("refuses an asset larger than any bundle within the limits with bundle_too_large, without reading it", async () => {
    // Random bytes: were they read, they would be bundle_not_zip.
    const hash = await uploadAsset(service, randomBytes(263_339));
    const reply = await putSkill(service, "oversized", hash);
    expect(reply).toMatchObject(refusal(400, "bundle_too_large"));
    expect(reply.body.message).toContain("263339 bytes");
  });

  it("reads an asset of exactly that size", async () => {
    const hash = await uploadAsset(service, randomBytes(263_338));
    expect(await putSkill(service, "at-the-bound", hash)).toMatchObject(refusal(400, "bundle_not_zip"));
  });

  it.runIf(onEmbeddedStorage)("answers 8 concurrent PutSkills of one bundle, one validation at a time", async () => {
    const bundle = bundleOf({ "SKILL.md": skillMd({ description: "Validated in turn." }), "data.txt": "x".repeat(500) });
    const hash = await uploadAsset(service, bundle.zip);
    let replies: Reply[] = [];
    const reads = await countingBundleReads(service.dataDir, async () => {
      replies = await Promise.all(Array.from({ length: 8 }, (_, i) => putSkill(service, `queued-${i}`, hash)));
    });
    expect(replies.map((reply) => [reply.status, reply.body.skill?.contentHash])).toEqual(Array(8).fill([200, hash]));
    // Each PutSkill read the bundle (eight names), never two at once (SERVICE_SKILL_MAX_CONCURRENT_VALIDATIONS=1).
    expect(reads).toEqual({ reads: 8, peak: 1 });
  });

  it("still refuses what breaks the limits once read", async () => {
    const tooMany = bundleOf({ "SKILL.md": skillMd({ description: "Three files." }), a: "a", b: "b" });
    expect(await putSkill(service, "too-many", await uploadAsset(service, tooMany.zip))).toMatchObject(refusal(400, "bundle_too_many_entries"));
    await expect(publish(service, "fits", bundleOf({ "SKILL.md": skillMd({ description: "Fits." }) }))).resolves.toMatchObject({ name: "fits" });
  });
});
