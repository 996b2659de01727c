import * as fs from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConnectError } from "@connectrpc/connect";
import { ErrorInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import {
  BundleFormatError,
  createNodeTransport,
  createServiceClient,
  DEFAULT_BUNDLE_LIMITS,
  Skill,
  type FetchFunction,
  type ServiceClient,
} from "@skillenv/client/node";
import { KEY_A, KEY_B, requestLogSince, startTestService, type TestService, onEmbeddedStorage } from "./helpers/service.ts";
import { gateUntil } from "./helpers/gate.ts";
import { expectedMetadata, bundleOf, getSkill, skillMd, sleep } from "./helpers/skills.ts";

/**
 * client.skills against a real server. What went over the wire is read from the server's own
 * request log (service.logs), not from the client's account of it.
 */

let service: TestService;
beforeAll(async () => {
  service = await startTestService();
});
afterAll(() => service.close());

function clientFor(key = KEY_A, fetch?: FetchFunction): ServiceClient {
  return createServiceClient(createNodeTransport({ baseUrl: service.url, apiKey: key }), fetch ? { fetch } : {});
}

/** What one log line was: "object-store PUT" or the RPC's short name. */
function callOf(line: any): string {
  return line.protocol === "object-store" ? `object-store ${line.method}` : String(line.procedure).split("/")[1]!;
}

describe("client.skills versions", () => {
  it("lists versions newest first, gets one with its files, rolls back and deletes one; workspace B sees none of it", async () => {
    const client = clientFor();
    const name = "client-versioned";
    const first = await client.skills.upload(Skill.fromFiles({ name, files: { "SKILL.md": skillMd({ description: "First." }), "a.txt": "A" } }));
    await client.skills.upload(Skill.fromContent(skillMd({ description: "Second." }), { name }));
    await client.skills.upload(Skill.fromContent(skillMd({ description: "Third." }), { name }));

    const page = await client.skills.versions(name, { pageSize: 2 });
    expect(page.versions.map((v) => [v.version, v.current])).toEqual([
      [3, true],
      [2, false],
    ]);
    expect((await client.skills.versions(name, { pageToken: page.nextPageToken })).versions.map((v) => v.version)).toEqual([1]);

    const one = await client.skills.get(name, { version: 1 });
    expect(one).toMatchObject({ version: 1, contentHash: first.contentHash, description: "First.", current: false });
    expect(one.files.map((file) => file.path)).toEqual(["SKILL.md", "a.txt"]);
    expect(await client.skills.instructions(name, 2)).toBe(skillMd({ description: "Second." }));

    const rolled = await client.skills.rollback(name, 1);
    expect(rolled).toMatchObject({ changed: true, skill: { version: 4, contentHash: first.contentHash }, version: { version: 4, restoredFrom: 1 } });
    expect((await client.skills.get(name)).description).toBe("First.");
    expect((await client.skills.rollback(name, 1)).changed).toBe(false);

    await client.skills.deleteVersion(name, 2);
    expect((await client.skills.versions(name)).versions.map((v) => v.version)).toEqual([4, 3, 1]);
    const current = await client.skills.deleteVersion(name, 4).catch((error: unknown) => error);
    expect(ConnectError.from(current).findDetails(ErrorInfoSchema)[0]?.reason).toBe("skill_version_current");

    const other = clientFor(KEY_B);
    for (const call of [() => other.skills.versions(name), () => other.skills.get(name, { version: 1 }), () => other.skills.rollback(name, 1)]) {
      const refusal = ConnectError.from(await call().catch((error: unknown) => error));
      expect(["skill_not_found", "skill_version_not_found"]).toContain(refusal.findDetails(ErrorInfoSchema)[0]?.reason);
    }
  });
});

describe("client.skills.upload", () => {
  it.runIf(onEmbeddedStorage)("runs presign -> signed PUT -> finalize -> PutSkill and binds the skill", async () => {
    const description = "Uploaded by the client.";
    const files = { "SKILL.md": skillMd({ name: "client-flow", description }), "scripts/run.py": "print('hi')\n" };
    const mark = service.logs.length;
    const uploaded = await clientFor().skills.upload(Skill.fromFiles({ files }));

    const expected = bundleOf(files);
    expect(uploaded).toMatchObject({ name: "client-flow", contentHash: expected.hash, bytesSent: expected.zip.byteLength, changed: true });
    const lines = await requestLogSince(service, mark);
    expect(lines.map(callOf)).toEqual(["Presign", "object-store PUT", "Finalize", "PutSkill"]);
    expect(lines.every((line) => line.code === "ok" && line.workspace === "a")).toBe(true);
    expect(lines[1].path).toBe(`/objects/sha256/${expected.hash}`);
    expect((await getSkill(service, "client-flow")).body.skill).toMatchObject(expectedMetadata(expected, description));
  });

  it("a new instance with identical bytes sends no bundle bytes and changes nothing", async () => {
    const files = { "SKILL.md": skillMd({ name: "client-dedup", description: "Dedup." }), "data.txt": "some data\n" };
    const client = clientFor();
    const first = await client.skills.upload(Skill.fromFiles({ files }));
    expect(first.bytesSent).toBeGreaterThan(0);
    await sleep(10);

    const mark = service.logs.length;
    const second = await client.skills.upload(Skill.fromFiles({ files }));
    const lines = await requestLogSince(service, mark);
    expect(lines.map((line) => line.protocol)).not.toContain("object-store");
    expect(lines.map(callOf)).toContain("PutSkill");
    expect(second).toMatchObject({ name: "client-dedup", contentHash: first.contentHash, bytesSent: 0, changed: false });
    expect(second.metadata.updatedAt).toEqual(first.metadata.updatedAt);
  });

  it("a fresh client uploading bytes already in the workspace sends none either", async () => {
    const files = { "SKILL.md": skillMd({ name: "client-fresh", description: "Fresh client." }) };
    await clientFor().skills.upload(Skill.fromFiles({ files }));
    const mark = service.logs.length;
    const again = await clientFor().skills.upload(Skill.fromContent(files["SKILL.md"]));
    expect((await requestLogSince(service, mark)).map((line) => line.protocol)).not.toContain("object-store");
    expect(again).toMatchObject({ bytesSent: 0, changed: false });
  });

  it("the same instance uploaded twice makes no round trip the second time", async () => {
    const client = clientFor();
    const skill = Skill.fromContent(skillMd({ name: "client-same", description: "Same instance." }));
    const first = await client.skills.upload(skill);
    const mark = service.logs.length;
    const second = await client.skills.upload(skill);
    expect(await requestLogSince(service, mark)).toEqual([]);
    expect(second).toEqual(first);
  });

  it.runIf(onEmbeddedStorage)("concurrent uploads of one instance share one set of round trips", async () => {
    const client = clientFor();
    const skill = Skill.fromContent(skillMd({ name: "client-shared", description: "Shared." }));
    const mark = service.logs.length;
    const results = await Promise.all(Array.from({ length: 5 }, () => client.skills.upload(skill)));
    const lines = await requestLogSince(service, mark);
    expect(lines.map(callOf)).toEqual(["Presign", "object-store PUT", "Finalize", "PutSkill"]);
    for (const result of results) expect(result).toBe(results[0]);
  });

  it("re-uploading other content under the same name replaces the skill (mutable by name)", async () => {
    const client = clientFor();
    await client.skills.upload(Skill.fromContent(skillMd({ description: "Old." }), { name: "client-mutable" }));
    const replaced = await client.skills.upload(Skill.fromContent(skillMd({ description: "New." }), { name: "client-mutable" }));
    expect(replaced.changed).toBe(true);
    expect((await client.skills.get("client-mutable")).description).toBe("New.");
  });

  it("an explicit name overrides the frontmatter name on the server", async () => {
    const uploaded = await clientFor().skills.upload(
      Skill.fromContent(skillMd({ name: "frontmatter-says", description: "Renamed." }), { name: "caller-says" }),
    );
    expect(uploaded.name).toBe("caller-says");
    expect((await getSkill(service, "caller-says")).status).toBe(200);
    expect((await getSkill(service, "frontmatter-says")).body.code).toBe("skill_not_found");
  });

  it("fromDir without a frontmatter name uploads under the slugified directory name", async () => {
    const parent = await fs.mkdtemp(path.join(os.tmpdir(), "skill-client-"));
    const dir = path.join(parent, "Quarterly Reports");
    await fs.mkdir(dir);
    await fs.writeFile(path.join(dir, "SKILL.md"), skillMd({ description: "From a folder." }));
    try {
      expect((await clientFor().skills.upload(Skill.fromDir(dir))).name).toBe("quarterly-reports");
      expect((await getSkill(service, "quarterly-reports")).body.skill.description).toBe("From a folder.");
    } finally {
      await fs.rm(parent, { recursive: true, force: true });
    }
  });

  it("a skill without any name is refused with invalid_skill_name before any request", async () => {
    const mark = service.logs.length;
    const error = await clientFor()
      .skills.upload(Skill.fromContent(skillMd({ description: "Nameless." })))
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(BundleFormatError);
    expect((error as BundleFormatError).code).toBe("invalid_skill_name");
    expect(await requestLogSince(service, mark)).toEqual([]);
  });

  it("a failed upload is not cached: the same instance retries", async () => {
    let failNext = true;
    const flaky: FetchFunction = async (input, init) => {
      if (failNext) {
        failNext = false;
        return new Response(JSON.stringify({ code: "unavailable", message: "try later" }), { status: 503 });
      }
      return fetch(input, init);
    };
    const client = clientFor(KEY_A, flaky);
    const skill = Skill.fromContent(skillMd({ name: "client-retry", description: "Retried." }));
    await expect(client.skills.upload(skill)).rejects.toMatchObject({ code: "unavailable" });
    expect((await getSkill(service, "client-retry")).body.code).toBe("skill_not_found");
    expect(await client.skills.upload(skill)).toMatchObject({ name: "client-retry", changed: true });
  });

  it("uploads as workspace b only into b", async () => {
    const skill = () => Skill.fromContent(skillMd({ name: "client-b-only", description: "B's." }));
    const uploaded = await clientFor(KEY_B).skills.upload(skill());
    expect(uploaded.bytesSent).toBeGreaterThan(0);
    expect((await getSkill(service, "client-b-only", KEY_A)).body.code).toBe("skill_not_found");
    // a has never uploaded these bytes, so a must send them itself (no cross-workspace dedup).
    expect((await clientFor(KEY_A).skills.upload(skill())).bytesSent).toBeGreaterThan(0);
  });
});

describe("client.skills.uploadAll", () => {
  it("uploads 7 distinct skills with at most 3 in flight, results in input order", async () => {
    // The signed PUTs are held until 3 are in flight and every upload begun (a skill's bundle
    // asked for) is among them: a bound of 3 gets there with 3; without the bound all 7 begin at
    // once and are held together.
    let begun = 0;
    let inFlight = 0;
    let maxInFlight = 0;
    const gate = gateUntil(() => inFlight >= 3 && inFlight === begun);
    const heldPut: FetchFunction = async (input, init) => {
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      try {
        await gate.arrived();
        return await fetch(input, init);
      } finally {
        inFlight--;
      }
    };
    const client = clientFor(KEY_A, heldPut);
    const names = Array.from({ length: 7 }, (_, i) => `bulk-${i}`);
    const skills = names.map((name) => {
      const skill = Skill.fromContent(skillMd({ name, description: `Bulk skill ${name}.` }));
      const bundle = skill.bundle.bind(skill);
      skill.bundle = () => (begun++, bundle());
      return skill;
    });

    const results = await client.skills.uploadAll(skills, { concurrency: 3 });
    expect(results.map((result) => result.name)).toEqual(names);
    expect(results.every((result) => result.changed && result.bytesSent > 0)).toBe(true);
    expect(maxInFlight).toBe(3);

    const listed = (await client.skills.list({ pageSize: 1000 })).skills.map((skill) => skill.name);
    for (const name of names) expect(listed).toContain(name);
    for (const [i, name] of names.entries()) {
      expect((await client.skills.get(name)).description).toBe(`Bulk skill ${name}.`);
      expect((await client.skills.get(name)).contentHash).toBe(results[i]!.contentHash);
    }
  });

  it("concurrent uploads of distinct skills from several clients all land", async () => {
    const names = Array.from({ length: 10 }, (_, i) => `parallel-${i}`);
    const results = await Promise.all(
      names.map((name) =>
        clientFor().skills.upload(Skill.fromFiles({ name, files: { "SKILL.md": skillMd({ description: `Parallel ${name}.` }), "n.txt": name } })),
      ),
    );
    expect(results.map((result) => result.name)).toEqual(names);
    const listed = (await clientFor().skills.list({ pageSize: 1000 })).skills;
    for (const name of names) expect(listed.find((skill) => skill.name === name)?.description).toBe(`Parallel ${name}.`);
  });

  it("concurrent uploads of one name with two contents leave one of them entirely", async () => {
    const one = { "SKILL.md": skillMd({ description: "Racer one." }) };
    const two = { "SKILL.md": skillMd({ description: "Racer two, longer." }), "more.txt": "more".repeat(100) };
    // Both contents are in the workspace already, so only the PutSkill calls race here.
    await clientFor().uploadAsset(bundleOf(one).zip);
    await clientFor().uploadAsset(bundleOf(two).zip);
    const uploads = Array.from({ length: 20 }, (_, i) => Skill.fromFiles({ name: "client-race", files: i % 2 === 0 ? one : two }));
    const results = await clientFor().skills.uploadAll(uploads, { concurrency: 20 });
    expect(results.every((result) => result.bytesSent === 0)).toBe(true);
    expect(results).toHaveLength(20);
    const final = await clientFor().skills.get("client-race");
    const winner = final.contentHash === bundleOf(one).hash ? one : two;
    expect(final.contentHash).toBe(bundleOf(winner).hash);
    expect(final.description).toBe(winner === one ? "Racer one." : "Racer two, longer.");
    expect(final.fileCount).toBe(Object.keys(winner).length);
    expect(final.bundleBytes).toBe(BigInt(bundleOf(winner).zip.byteLength));
  });
});

describe("concurrent uploads of the same content", () => {
  // Separate instances (e.g. one skill passed by two sessions at once) upload the same bytes in
  // parallel; each one does its own presign -> PUT -> finalize and all must succeed.
  it("from separate instances and clients all succeed", async () => {
    for (let round = 0; round < 5; round++) {
      const files = { "SKILL.md": skillMd({ name: `same-content-${round}`, description: `Same content ${round}.` }) };
      const settled = await Promise.allSettled(Array.from({ length: 10 }, () => clientFor().skills.upload(Skill.fromFiles({ files }))));
      const failures = settled.flatMap((result) => (result.status === "rejected" ? [String(result.reason)] : []));
      expect({ round, failures }).toEqual({ round, failures: [] });
    }
  });
});

describe("bundle limits on the client (issue #7, item 11)", () => {
  const MiB = 1024 * 1024;
  const withFiles = (name: string, files: Record<string, Uint8Array>) =>
    Skill.fromFiles({ name, files: { "SKILL.md": skillMd({ description: "Large." }), ...files } });

  it("refuses an 11 MiB file and 54 MiB of files with the server's codes, sending nothing", async () => {
    const mark = service.logs.length;
    const client = clientFor();
    await expect(client.skills.upload(withFiles("one-large-file", { "big.bin": new Uint8Array(11 * MiB) }))).rejects.toEqual(
      new BundleFormatError("bundle_entry_too_large", `"big.bin" has ${11 * MiB} bytes; the limit is ${10 * MiB}`),
    );
    const parts = Object.fromEntries(Array.from({ length: 6 }, (_, i) => [`part-${i}.bin`, new Uint8Array(9 * MiB)]));
    await expect(client.skills.upload(withFiles("many-files", parts))).rejects.toMatchObject({ name: "BundleFormatError", code: "bundle_too_large" });
    expect(await requestLogSince(service, mark)).toEqual([]);
  });

  it("checks the limits it is given: raised ones let the bundle go, and the server answers with its own", async () => {
    const raised = createServiceClient(createNodeTransport({ baseUrl: service.url, apiKey: KEY_A }), {
      bundleLimits: { ...DEFAULT_BUNDLE_LIMITS, maxEntryBytes: 20 * MiB },
    });
    const refusal = await raised.skills.upload(withFiles("raised-limit", { "big.bin": new Uint8Array(11 * MiB) })).catch((error: unknown) => error);
    expect(refusal).toBeInstanceOf(ConnectError);
    expect((refusal as ConnectError).findDetails(ErrorInfoSchema)[0]?.reason).toBe("bundle_entry_too_large");
  });
});
