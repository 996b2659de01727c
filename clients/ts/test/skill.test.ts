import { createHash } from "node:crypto";
import * as fs from "node:fs/promises";
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { deflatedEntry, rawZip, storedEntry } from "../../../server/test/helpers/raw-zip.ts";
import { BundleFormatError, canonicalZip } from "../src/bundle/index.ts";
import type { FetchFunction } from "../src/assets.ts";
import { Skill } from "../src/skills/index.ts";

const encoder = new TextEncoder();
const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

function skillMd(frontmatter: Record<string, string>, body = "Do the thing.\n"): string {
  const lines = Object.entries(frontmatter).map(([key, value]) => `${key}: ${JSON.stringify(value)}\n`);
  return `---\n${lines.join("")}---\n${body}`;
}

const SKILL_MD = skillMd({ name: "report-writer", description: "Writes reports." });

/** Three files in nested folders: the shape every factory must reproduce byte for byte. */
const FILES: Record<string, string> = {
  "SKILL.md": SKILL_MD,
  "scripts/build.sh": "#!/bin/sh\necho build\n",
  "docs/guide/intro.md": "# Intro\n\nÜnïcödé text.\n",
};

const canonicalOf = (files: Record<string, string>) => canonicalZip(new Map(Object.entries(files).map(([p, c]) => [p, encoder.encode(c)])));

let tmp: string;
beforeAll(async () => {
  tmp = await fs.mkdtemp(path.join(os.tmpdir(), "skill-factories-"));
});
afterAll(() => fs.rm(tmp, { recursive: true, force: true }));

async function writeDir(name: string, files: Record<string, string>): Promise<string> {
  const dir = path.join(tmp, name);
  for (const [relative, content] of Object.entries(files)) {
    await fs.mkdir(path.dirname(path.join(dir, relative)), { recursive: true });
    await fs.writeFile(path.join(dir, relative), content);
  }
  return dir;
}

/** A deflated, unsorted zip with directory entries, written with node:zlib: valid but far from canonical. */
function messyZip(files: Record<string, string>): Uint8Array {
  const entries = Object.entries(files)
    .reverse()
    .map(([p, c]) => deflatedEntry(p, c, { dosDate: 0x5a21, dosTime: 0x6000 }));
  const directories = [...new Set(Object.keys(files).flatMap((p) => (p.includes("/") ? [p.slice(0, p.lastIndexOf("/") + 1)] : [])))];
  return rawZip([...directories.map((d) => storedEntry(d, "", { externalAttributes: (0o040755 << 16) >>> 0 })), ...entries]);
}

/** A local HTTP server on 127.0.0.1, port 0. */
async function serve(handler: http.RequestListener): Promise<{ url: string; requests: () => number; close: () => Promise<void> }> {
  let count = 0;
  const server = http.createServer((req, res) => {
    count++;
    handler(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests: () => count,
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

async function formatErrorCode(promise: Promise<unknown>): Promise<string> {
  const error = await promise.then(
    () => expect.unreachable("bundle() succeeded; expected a BundleFormatError"),
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(BundleFormatError);
  return (error as BundleFormatError).code;
}

describe("factories perform no I/O", () => {
  it("fromDir on a nonexistent directory does not throw until bundle()", async () => {
    const skill = Skill.fromDir(path.join(tmp, "does-not-exist"));
    await expect(skill.bundle()).rejects.toMatchObject({ code: "file_unreadable", cause: { code: "ENOENT" } });
  });

  it("fromDir reads the folder when bundled, not when created", async () => {
    const dir = path.join(tmp, "late");
    const skill = Skill.fromDir(dir);
    await writeDir("late", { "SKILL.md": skillMd({ name: "late", description: "Written after the factory." }) });
    expect((await skill.bundle()).name).toBe("late");
  });

  it("fromUrl does not call fetch until used, and then once", async () => {
    const zip = canonicalOf(FILES);
    const fetchSpy = vi.fn<FetchFunction>(async () => new Response(zip as Uint8Array<ArrayBuffer>));
    const skill = Skill.fromUrl("https://skills.example.com/report.zip", { fetch: fetchSpy });
    expect(fetchSpy).not.toHaveBeenCalled();
    await skill.bundle();
    await skill.bundle();
    expect(fetchSpy).toHaveBeenCalledTimes(1);
    expect(fetchSpy.mock.calls[0]![0]).toBe("https://skills.example.com/report.zip");
  });

  it("fromUrl without any fetch fails only when used", async () => {
    const original = globalThis.fetch;
    // @ts-expect-error simulating a runtime without a global fetch
    delete globalThis.fetch;
    try {
      const skill = Skill.fromUrl("https://skills.example.com/x.zip");
      await expect(skill.bundle()).rejects.toThrow(/fetch/);
    } finally {
      globalThis.fetch = original;
    }
  });

  it("fromBytes of garbage and fromFiles without SKILL.md fail only at bundle()", async () => {
    const garbage = Skill.fromBytes({ zip: encoder.encode("not a zip at all"), name: "x" });
    const empty = Skill.fromFiles({ name: "x", files: { "README.md": "hi" } });
    expect(await formatErrorCode(garbage.bundle())).toBe("bundle_not_zip");
    expect(await formatErrorCode(empty.bundle())).toBe("bundle_missing_skill_md");
  });
});

describe("every factory yields the same canonical bytes and hash", () => {
  let server: Awaited<ReturnType<typeof serve>>;
  const served = new Map<string, Uint8Array>();
  beforeAll(async () => {
    server = await serve((req, res) => {
      const body = served.get(req.url ?? "");
      if (!body) return void res.writeHead(404).end();
      res.writeHead(200, { "content-type": "application/zip" }).end(body);
    });
  });
  afterAll(() => server.close());

  it.each([
    ["three nested files", FILES],
    ["a lone SKILL.md", { "SKILL.md": SKILL_MD }],
  ])("%s", async (label, files) => {
    const dir = await writeDir(`same-${label.replaceAll(" ", "-")}`, files);
    served.set(`/${label.length}.zip`, messyZip(files));
    const skills: Record<string, Skill> = {
      fromDir: Skill.fromDir(dir),
      fromFiles: Skill.fromFiles({ files }),
      fromFilesMap: Skill.fromFiles({ files: new Map(Object.entries(files).map(([p, c]) => [p, encoder.encode(c)])) }),
      fromBytesDeflated: Skill.fromBytes({ zip: messyZip(files) }),
      fromBytesCanonical: Skill.fromBytes({ zip: canonicalOf(files) }),
      fromUrl: Skill.fromUrl(`${server.url}/${label.length}.zip`),
    };
    if (Object.keys(files).length === 1) skills.fromContent = Skill.fromContent(files["SKILL.md"]!);

    const expected = canonicalOf(files);
    for (const [factory, skill] of Object.entries(skills)) {
      const bundle = await skill.bundle();
      expect({ factory, hash: bundle.contentHash }).toEqual({ factory, hash: sha256(expected) });
      expect(Buffer.from(bundle.zip).equals(Buffer.from(expected)), factory).toBe(true);
      expect(bundle).toMatchObject({ name: "report-writer", description: "Writes reports." });
    }
  });

  it("the canonical bytes do not depend on file order or mtimes", async () => {
    const reversed = Object.fromEntries(Object.entries(FILES).reverse());
    const dir = await writeDir("mtimes", FILES);
    await fs.utimes(path.join(dir, "SKILL.md"), new Date(2001, 1, 1), new Date(2001, 1, 1));
    const a = await Skill.fromFiles({ files: reversed }).bundle();
    const b = await Skill.fromDir(dir).bundle();
    expect(a.contentHash).toBe(b.contentHash);
  });

  it("different content gives a different hash", async () => {
    const a = await Skill.fromFiles({ files: FILES }).bundle();
    const b = await Skill.fromFiles({ files: { ...FILES, "scripts/build.sh": "#!/bin/sh\necho other\n" } }).bundle();
    expect(a.contentHash).not.toBe(b.contentHash);
  });
});

describe("Skill.fromUrl", () => {
  it("accepts the right sha256 (in either case) and refuses a wrong one", async () => {
    const zip = canonicalOf(FILES);
    const server = await serve((_req, res) => res.writeHead(200).end(zip));
    try {
      const right = sha256(zip);
      expect((await Skill.fromUrl(`${server.url}/s.zip`, { sha256: right }).bundle()).contentHash).toBe(right);
      expect((await Skill.fromUrl(`${server.url}/s.zip`, { sha256: right.toUpperCase() }).bundle()).contentHash).toBe(right);
      await expect(Skill.fromUrl(`${server.url}/s.zip`, { sha256: "0".repeat(64) }).bundle()).rejects.toMatchObject({
        name: "SkillSourceError",
        code: "download_failed",
        message: expect.stringMatching(/hashes to [0-9a-f]{64}, expected 0{64}/),
      });
    } finally {
      await server.close();
    }
  });

  it("reports an error status, a refused connection and a timeout as download_failed, as the Python client does", async () => {
    const server = await serve((req, res) => {
      if (req.url === "/missing.zip") res.writeHead(404).end();
      // Never answers: the client's timeout decides.
    });
    try {
      const failure = (url: string, timeoutMs?: number) => Skill.fromUrl(url, timeoutMs === undefined ? {} : { timeoutMs }).bundle();
      await expect(failure(`${server.url}/missing.zip`)).rejects.toMatchObject({
        name: "SkillSourceError",
        code: "download_failed",
        message: expect.stringContaining("HTTP 404"),
      });
      await expect(failure(`${server.url}/slow.zip`, 200)).rejects.toMatchObject({ name: "SkillSourceError", code: "download_failed" });
    } finally {
      await server.close();
    }
    await expect(Skill.fromUrl(`${server.url}/gone.zip`).bundle()).rejects.toMatchObject({ name: "SkillSourceError", code: "download_failed" });
  });

  it("checks sha256 against the downloaded archive, not the canonical re-zip", async () => {
    const messy = messyZip(FILES);
    const server = await serve((_req, res) => res.writeHead(200).end(messy));
    try {
      const bundle = await Skill.fromUrl(`${server.url}/m.zip`, { sha256: sha256(messy) }).bundle();
      expect(bundle.contentHash).toBe(sha256(canonicalOf(FILES)));
    } finally {
      await server.close();
    }
  });

  it("fails after timeoutMs when the server never answers", async () => {
    const server = await serve(() => {
      /* never responds */
    });
    try {
      const started = Date.now();
      await expect(Skill.fromUrl(`${server.url}/hang.zip`, { timeoutMs: 200 }).bundle()).rejects.toThrow(/timeout|abort/i);
      expect(Date.now() - started).toBeGreaterThanOrEqual(150);
      expect(Date.now() - started).toBeLessThan(5_000);
      expect(server.requests()).toBe(1);
    } finally {
      await server.close();
    }
  });

  it("fails after timeoutMs when the body stalls after the headers", async () => {
    const server = await serve((_req, res) => {
      res.writeHead(200, { "content-length": "100000" });
      res.write(new Uint8Array(10));
    });
    try {
      const started = Date.now();
      await expect(Skill.fromUrl(`${server.url}/stall.zip`, { timeoutMs: 200 }).bundle()).rejects.toThrow(/timeout|abort/i);
      expect(Date.now() - started).toBeGreaterThanOrEqual(150);
      expect(Date.now() - started).toBeLessThan(5_000);
    } finally {
      await server.close();
    }
  });

  it("refuses an HTTP error status", async () => {
    const server = await serve((_req, res) => res.writeHead(403).end("denied"));
    try {
      await expect(Skill.fromUrl(`${server.url}/x.zip`).bundle()).rejects.toThrow(/403/);
    } finally {
      await server.close();
    }
  });

  it("does not take a name from the URL", async () => {
    const zip = canonicalOf({ "SKILL.md": skillMd({ description: "No name." }) });
    const server = await serve((_req, res) => res.writeHead(200).end(zip));
    try {
      expect(await formatErrorCode(Skill.fromUrl(`${server.url}/good-name.zip`).bundle())).toBe("invalid_skill_name");
      expect((await Skill.fromUrl(`${server.url}/good-name.zip`, { name: "given" }).bundle()).name).toBe("given");
    } finally {
      await server.close();
    }
  });
});

describe("Skill.fromBytes reads only what a bundle may hold", () => {
  const md = skillMd({ name: "zipped", description: "From a zip." });

  it("refuses a zip slip entry with bundle_path_invalid", async () => {
    const zip = rawZip([storedEntry("SKILL.md", md), storedEntry("../evil", "pwned")]);
    expect(await formatErrorCode(Skill.fromBytes({ zip }).bundle())).toBe("bundle_path_invalid");
  });

  it("refuses an encrypted entry with bundle_encrypted", async () => {
    const zip = rawZip([storedEntry("SKILL.md", md, { flags: 0x0801 })]);
    expect(await formatErrorCode(Skill.fromBytes({ zip }).bundle())).toBe("bundle_encrypted");
  });

  it("refuses random bytes with bundle_not_zip", async () => {
    expect(await formatErrorCode(Skill.fromBytes({ zip: new Uint8Array(200).fill(7) }).bundle())).toBe("bundle_not_zip");
  });

  // The three below are where the client's unzip (clients/ts/src/skills/unzip.ts) diverges
  // from docs/bundle-format.md and from the server's reader: it rewrites content silently.

  it.each([
    ["stored", storedEntry("SKILL.md", md, { crc32: 0x12345678 })],
    ["deflated", deflatedEntry("SKILL.md", md, { crc32: 0x12345678 })],
  ])("refuses a %s entry failing its CRC-32 with bundle_not_zip instead of re-zipping corrupt data", async (_label, entry) => {
    expect(await formatErrorCode(Skill.fromBytes({ zip: rawZip([entry]) }).bundle())).toBe("bundle_not_zip");
  });

  it("refuses a symbolic link entry with bundle_special_entry instead of turning it into a file", async () => {
    const link = storedEntry("link", "/etc/passwd", { externalAttributes: (0o120777 << 16) >>> 0 });
    expect(await formatErrorCode(Skill.fromBytes({ zip: rawZip([storedEntry("SKILL.md", md), link]) }).bundle())).toBe("bundle_special_entry");
  });

  it("refuses an entry name that is not UTF-8 with bundle_path_invalid instead of renaming it", async () => {
    const latin1 = storedEntry("x", "data", { name: new Uint8Array([0x63, 0x61, 0x66, 0xe9]) }); // "café" in Latin-1
    expect(await formatErrorCode(Skill.fromBytes({ zip: rawZip([storedEntry("SKILL.md", md), latin1]) }).bundle())).toBe("bundle_path_invalid");
  });
});

describe("Skill.fromDir", () => {
  it("skips .git (and .DS_Store) anywhere in the tree", async () => {
    const dir = await writeDir("with-git", {
      ...FILES,
      ".git/config": "[core]\n",
      ".git/objects/ab/cdef": "blob",
      ".DS_Store": "finder",
      "scripts/.DS_Store": "finder",
    });
    const bundle = await Skill.fromDir(dir).bundle();
    expect(bundle.contentHash).toBe(sha256(canonicalOf(FILES)));
  });

  it("keeps other dotfiles", async () => {
    const dir = await writeDir("dotfiles", { ...FILES, ".env.example": "KEY=\n" });
    expect((await Skill.fromDir(dir).bundle()).contentHash).toBe(sha256(canonicalOf({ ...FILES, ".env.example": "KEY=\n" })));
  });

  it("refuses a symbolic link to a file, even one inside the folder, with bundle_special_entry", async () => {
    const dir = await writeDir("symlink-file", FILES);
    await fs.symlink(path.join(dir, "scripts/build.sh"), path.join(dir, "link.sh"));
    await expect(Skill.fromDir(dir).bundle()).rejects.toThrow(/"link\.sh" is a symbolic link/);
    expect(await formatErrorCode(Skill.fromDir(dir).bundle())).toBe("bundle_special_entry");
  });

  it("refuses a symbolic link to a directory outside the folder with bundle_special_entry", async () => {
    const outside = await writeDir("outside", { "secret.txt": "secret" });
    const dir = await writeDir("symlink-dir", FILES);
    await fs.symlink(outside, path.join(dir, "escape"));
    expect(await formatErrorCode(Skill.fromDir(dir).bundle())).toBe("bundle_special_entry");
  });

  it("refuses a file name that is not UTF-8 with bundle_path_invalid, as the server would", async () => {
    const dir = await writeDir("latin1-name", FILES);
    await fs.writeFile(Buffer.concat([Buffer.from(`${dir}/scripts/caf`), Buffer.from([0xe9]), Buffer.from(".sh")]), "echo\n");
    await expect(Skill.fromDir(dir).bundle()).rejects.toThrow(/a name in "scripts" is not UTF-8 \(bytes 636166e92e7368\)/);
    expect(await formatErrorCode(Skill.fromDir(dir).bundle())).toBe("bundle_path_invalid");
  });

  it("refuses a SKILL.md that is not UTF-8 with frontmatter_invalid, as the server would", async () => {
    const dir = await writeDir("latin1-skill-md", FILES);
    await fs.writeFile(path.join(dir, "SKILL.md"), Buffer.from("---\ndescription: caf\xe9\n---\n", "latin1"));
    expect(await formatErrorCode(Skill.fromDir(dir).bundle())).toBe("frontmatter_invalid");
  });

  it("refuses a folder without SKILL.md at its root", async () => {
    const dir = await writeDir("no-root-skill-md", { "nested/SKILL.md": SKILL_MD });
    expect(await formatErrorCode(Skill.fromDir(dir).bundle())).toBe("bundle_missing_skill_md");
  });
});

describe("name resolution", () => {
  const NAMELESS = skillMd({ description: "No name in the frontmatter." });

  it("explicit { name } overrides the frontmatter name", async () => {
    expect((await Skill.fromContent(SKILL_MD, { name: "explicit" }).bundle()).name).toBe("explicit");
    expect((await Skill.fromFiles({ name: "explicit", files: FILES }).bundle()).name).toBe("explicit");
    expect((await Skill.fromBytes({ name: "explicit", zip: canonicalOf(FILES) }).bundle()).name).toBe("explicit");
  });

  it("the frontmatter name is used when there is no explicit name", async () => {
    expect((await Skill.fromContent(SKILL_MD).bundle()).name).toBe("report-writer");
  });

  it("fromDir: explicit > frontmatter > slugified directory basename", async () => {
    const named = await writeDir("Named Folder", FILES);
    const nameless = await writeDir("Ünïcode Folder (v2)", { "SKILL.md": NAMELESS });
    expect((await Skill.fromDir(named, { name: "explicit" }).bundle()).name).toBe("explicit");
    expect((await Skill.fromDir(named).bundle()).name).toBe("report-writer");
    expect((await Skill.fromDir(nameless).bundle()).name).toBe("unicode-folder-v2");
    expect((await Skill.fromDir(`${nameless}/`).bundle()).name).toBe("unicode-folder-v2");
  });

  it("fromDir names a linked folder by the link's basename as given, as the Python client does", async () => {
    const target = await writeDir("store-3f2a", { "SKILL.md": NAMELESS });
    const link = path.join(path.dirname(target), "Linked Folder");
    await fs.symlink(target, link);
    expect((await Skill.fromDir(link).bundle()).name).toBe("linked-folder");
  });

  it("fromDir refuses a basename that slugifies to nothing or to a reserved name", async () => {
    const reserved = await writeDir("Skills", { "SKILL.md": NAMELESS });
    const empty = await writeDir("___", { "SKILL.md": NAMELESS });
    expect(await formatErrorCode(Skill.fromDir(reserved).bundle())).toBe("invalid_skill_name");
    expect(await formatErrorCode(Skill.fromDir(empty).bundle())).toBe("invalid_skill_name");
  });

  it("fromContent without a name and without a frontmatter name is invalid_skill_name", async () => {
    expect(await formatErrorCode(Skill.fromContent(NAMELESS).bundle())).toBe("invalid_skill_name");
    expect(await formatErrorCode(Skill.fromFiles({ files: { "SKILL.md": NAMELESS } }).bundle())).toBe("invalid_skill_name");
    expect(await formatErrorCode(Skill.fromBytes({ zip: canonicalOf({ "SKILL.md": NAMELESS }) }).bundle())).toBe("invalid_skill_name");
  });

  it("an invalid explicit name is refused, not rescued by a valid frontmatter name", async () => {
    expect(await formatErrorCode(Skill.fromContent(SKILL_MD, { name: "Bad Name" }).bundle())).toBe("invalid_skill_name");
    expect(await formatErrorCode(Skill.fromContent(SKILL_MD, { name: "skill" }).bundle())).toBe("invalid_skill_name");
    expect(await formatErrorCode(Skill.fromContent(SKILL_MD, { name: "a__b" }).bundle())).toBe("invalid_skill_name");
  });

  it("an invalid frontmatter name is refused unless an explicit name overrides it", async () => {
    const invalid = skillMd({ name: "Not Valid", description: "d" });
    expect(await formatErrorCode(Skill.fromContent(invalid).bundle())).toBe("invalid_skill_name");
    expect((await Skill.fromContent(invalid, { name: "fixed" }).bundle()).name).toBe("fixed");
  });

  it("the description comes from the frontmatter and is checked on the client too", async () => {
    expect((await Skill.fromContent(SKILL_MD).bundle()).description).toBe("Writes reports.");
    const tooLong = skillMd({ name: "long", description: "x".repeat(2049) });
    expect(await formatErrorCode(Skill.fromContent(tooLong).bundle())).toBe("description_too_long");
  });
});

describe("bundle() caching", () => {
  it("reads once and returns the same bundle", async () => {
    const dir = await writeDir("cached", FILES);
    const skill = Skill.fromDir(dir);
    const first = await skill.bundle();
    await fs.writeFile(path.join(dir, "SKILL.md"), skillMd({ name: "changed", description: "Changed on disk." }));
    expect(await skill.bundle()).toBe(first);
  });

  it("does not cache a failure: a retry reads again", async () => {
    const dir = path.join(tmp, "appears-later");
    const skill = Skill.fromDir(dir);
    await expect(skill.bundle()).rejects.toThrow();
    await writeDir("appears-later", FILES);
    expect((await skill.bundle()).name).toBe("report-writer");
  });
});
