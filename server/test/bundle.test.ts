import { Code, ConnectError } from "@connectrpc/connect";
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { BundleFormatError, canonicalZip, resolveSkillName } from "@skillenv/client/bundle";
import { stableCodeOf, type ErrorCode } from "../src/errors/index.ts";
import { asServiceError, defaultBundleLimits, readBundle, type BundleLimits } from "../src/skills/bundle/index.ts";
import { bytesOf, deflatedEntry, rawZip, storedEntry, type RawEntry } from "./helpers/raw-zip.ts";

const vectorsDir = new URL("../../testdata/bundles/", import.meta.url);

interface Vector {
  name: string;
  files: Record<string, string | { base64: string }>;
  zip: string;
}

const vectors = JSON.parse(readFileSync(new URL("vectors.json", vectorsDir), "utf8")) as Vector[];

const SKILL_MD = "---\nname: demo\ndescription: A demo skill.\n---\nBody.\n";
const skill = (overrides: Partial<RawEntry> = {}): RawEntry => storedEntry("SKILL.md", SKILL_MD, overrides);
const MiB = 1024 * 1024;

function filesOf(vector: Vector): Map<string, Uint8Array> {
  return new Map(
    Object.entries(vector.files).map(([path, content]) => [
      path,
      typeof content === "string" ? bytesOf(content) : new Uint8Array(Buffer.from(content.base64, "base64")),
    ]),
  );
}

function canonical(files: Record<string, string | Uint8Array>): Uint8Array {
  return canonicalZip(new Map(Object.entries(files).map(([path, content]) => [path, bytesOf(content)])));
}

async function refusalOf(zip: Uint8Array, limits: BundleLimits = defaultBundleLimits): Promise<ErrorCode> {
  const error = await readBundle(zip, limits).then(
    () => expect.unreachable("the bundle was accepted"),
    (thrown: unknown) => thrown,
  );
  expect(error).toBeInstanceOf(ConnectError);
  expect((error as ConnectError).code).toBe(Code.InvalidArgument);
  return stableCodeOf(error as ConnectError);
}

describe("test vectors", () => {
  for (const vector of vectors) {
    it(`${vector.name}: accepted with its files`, async () => {
      const zip = new Uint8Array(readFileSync(new URL(vector.zip, vectorsDir)));
      const files = filesOf(vector);
      const bundle = await readBundle(zip);
      expect(bundle.files).toEqual(files);
      expect(bundle.fileCount).toBe(files.size);
      expect(bundle.totalBytes).toBe([...files.values()].reduce((sum, data) => sum + data.length, 0));
      expect(bundle.frontmatterName).toBe(vector.name);
      expect(bundle.description.length).toBeGreaterThan(0);
    });
  }

  it("the test helper's independent writer produces the same canonical bytes", () => {
    for (const vector of vectors) {
      const sorted = [...filesOf(vector)].sort(([a], [b]) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
      expect(Buffer.from(rawZip(sorted.map(([path, data]) => storedEntry(path, data))))).toEqual(Buffer.from(canonicalZip(filesOf(vector))));
    }
  });

  it("accepts a view into a larger buffer", async () => {
    const zip = canonical({ "SKILL.md": SKILL_MD });
    const padded = new Uint8Array(zip.length + 20);
    padded.set(zip, 10);
    expect((await readBundle(padded.subarray(10, 10 + zip.length))).description).toBe("A demo skill.");
  });

  it("returns the frontmatter name unvalidated, since an explicit name may override it", async () => {
    const bundle = await readBundle(canonical({ "SKILL.md": "---\nname: Not Valid\ndescription: d\n---\n" }));
    expect(bundle.frontmatterName).toBe("Not Valid");
    expect((await readBundle(canonical({ "SKILL.md": "---\ndescription: d\n---\n" }))).frontmatterName).toBeUndefined();
  });
});

describe("refusals", () => {
  const cases: [string, ErrorCode, () => Uint8Array, BundleLimits?][] = [
    ["random bytes", "bundle_not_zip", () => bytesOf("this is not a zip archive at all")],
    ["no bytes", "bundle_not_zip", () => new Uint8Array()],
    ["a truncated archive", "bundle_not_zip", () => canonical({ "SKILL.md": SKILL_MD }).subarray(0, 100)],
    ["bytes after the end record", "bundle_not_zip", () => Buffer.concat([canonical({ "SKILL.md": SKILL_MD }), Buffer.from("junk")])],
    ["a stored entry whose sizes disagree", "bundle_not_zip", () => rawZip([skill({ compressedSize: 10, uncompressedSize: 20 })])],
    ["a wrong CRC-32", "bundle_not_zip", () => rawZip([skill({ crc32: 0x12345678 })])],
    ["corrupt deflate data", "bundle_not_zip", () => rawZip([skill(), { ...deflatedEntry("x", "x".repeat(100)), data: bytesOf("\xff\xff garbage") }])],
    ["a deflated entry shorter than declared", "bundle_not_zip", () => rawZip([skill(), deflatedEntry("x", "abc", { uncompressedSize: 4 })])],

    ["no SKILL.md", "bundle_missing_skill_md", () => canonical({ "README.md": "x" })],
    ["SKILL.md in a subdirectory", "bundle_missing_skill_md", () => canonical({ "docs/SKILL.md": SKILL_MD })],
    ["skill.md in lowercase", "bundle_missing_skill_md", () => canonical({ "skill.md": SKILL_MD })],
    ["an empty archive", "bundle_missing_skill_md", () => canonical({})],

    ["SKILL.md without frontmatter", "frontmatter_missing", () => canonical({ "SKILL.md": "# Title\n" })],
    ["malformed frontmatter", "frontmatter_invalid", () => canonical({ "SKILL.md": "---\ndescription: [x\n---\n" })],
    ["a frontmatter that is a list", "frontmatter_invalid", () => canonical({ "SKILL.md": "---\n- a\n---\n" })],
    ["a description that is not a string", "frontmatter_invalid", () => canonical({ "SKILL.md": "---\ndescription: 3\n---\n" })],
    ["SKILL.md that is not UTF-8", "frontmatter_invalid", () => canonical({ "SKILL.md": new Uint8Array([0x2d, 0x2d, 0x2d, 0x0a, 0xff, 0x0a]) })],
    ["no description", "description_missing", () => canonical({ "SKILL.md": "---\nname: x\n---\n" })],
    ["a 2049-character description", "description_too_long", () => canonical({ "SKILL.md": `---\ndescription: ${"d".repeat(2049)}\n---\n` })],

    ["a .. segment", "bundle_path_invalid", () => rawZip([skill(), storedEntry("../evil.sh", "x")])],
    ["a .. segment deeper down", "bundle_path_invalid", () => rawZip([skill(), storedEntry("a/../../evil.sh", "x")])],
    ["an absolute path", "bundle_path_invalid", () => rawZip([skill(), storedEntry("/etc/cron.d/x", "x")])],
    ["a drive letter", "bundle_path_invalid", () => rawZip([skill(), storedEntry("C:/x", "x")])],
    ["a backslash", "bundle_path_invalid", () => rawZip([skill(), storedEntry("..\\evil", "x")])],
    ["a NUL", "bundle_path_invalid", () => rawZip([skill(), storedEntry("a\u0000.txt", "x")])],
    ["an empty segment", "bundle_path_invalid", () => rawZip([skill(), storedEntry("a//b", "x")])],
    ["a . segment", "bundle_path_invalid", () => rawZip([skill(), storedEntry("./a", "x")])],
    ["a name that is not UTF-8", "bundle_path_invalid", () => rawZip([skill(), storedEntry("x", "x", { name: new Uint8Array([0x61, 0xff]) })])],

    ["SKILL.md twice", "bundle_duplicate_entry", () => rawZip([skill(), skill()])],
    ["a file that is also a directory", "bundle_duplicate_entry", () => rawZip([skill(), storedEntry("docs", "x"), storedEntry("docs/a", "y")])],

    ["a symlink", "bundle_special_entry", () => rawZip([skill(), storedEntry("link", "/etc/passwd", { externalAttributes: (0o120777 << 16) >>> 0 })])],
    ["a directory entry", "bundle_special_entry", () => rawZip([storedEntry("docs/", ""), skill()])],
    ["a directory by its mode", "bundle_special_entry", () => rawZip([skill(), storedEntry("docs", "", { externalAttributes: (0o040755 << 16) >>> 0 })])],
    ["a directory by its DOS attribute", "bundle_special_entry", () => rawZip([skill(), storedEntry("docs", "", { externalAttributes: 0x10 })])],
    ["a character device", "bundle_special_entry", () => rawZip([skill(), storedEntry("tty", "", { externalAttributes: (0o020644 << 16) >>> 0 })])],
    ["a FIFO", "bundle_special_entry", () => rawZip([skill(), storedEntry("fifo", "", { externalAttributes: (0o010644 << 16) >>> 0 })])],

    ["an encrypted entry", "bundle_encrypted", () => rawZip([skill({ flags: 0x0801 })])],
    ["strong encryption", "bundle_encrypted", () => rawZip([skill({ flags: 0x0841 })])],
    ["AES (method 99)", "bundle_encrypted", () => rawZip([skill(), storedEntry("x", "x", { method: 99 })])],

    ["too many entries", "bundle_too_many_entries", () => canonical({ "SKILL.md": SKILL_MD, a: "", b: "" }), { ...defaultBundleLimits, maxEntries: 2 }],
    ["an entry count above the limit in the end record", "bundle_too_many_entries", () => rawZip([skill()], { entryCount: 65535 })],
    [
      "an entry declared too large",
      "bundle_entry_too_large",
      () => canonical({ "SKILL.md": SKILL_MD, big: "x".repeat(101) }),
      { ...defaultBundleLimits, maxEntryBytes: 100 },
    ],
    [
      "entries declared too large together",
      "bundle_too_large",
      () => canonical({ "SKILL.md": SKILL_MD, a: "x".repeat(60), b: "x".repeat(60) }),
      { ...defaultBundleLimits, maxTotalBytes: 150 },
    ],
    ["a 20 MB zip bomb", "bundle_compression_ratio", () => rawZip([skill(), deflatedEntry("bomb", new Uint8Array(20 * MiB))])],
    [
      "a 4 GB declared size",
      "bundle_entry_too_large",
      () => rawZip([skill(), storedEntry("x", "", { compressedSize: 0xfffffffe, uncompressedSize: 0xfffffffe })]),
    ],
  ];

  it.each(cases)("%s -> %s", async (_, code, build, limits) => {
    expect(await refusalOf(build(), limits)).toBe(code);
  });

  it("refuses a bomb from the central directory, before inflating anything", async () => {
    // The data is not even valid DEFLATE: inflating it would have failed with bundle_not_zip.
    const bomb = { ...deflatedEntry("bomb", "x"), data: bytesOf("not deflate"), uncompressedSize: 10 * MiB };
    expect(await refusalOf(rawZip([skill(), bomb]))).toBe("bundle_compression_ratio");
    const large = { ...bomb, uncompressedSize: 1000 };
    expect(await refusalOf(rawZip([skill(), large]), { ...defaultBundleLimits, maxEntryBytes: 999 })).toBe("bundle_entry_too_large");
  });

  describe("limits enforced while inflating, whatever the sizes declare", () => {
    const lying = (name: string, content: Uint8Array) => deflatedEntry(name, content, { uncompressedSize: 10 });

    it("compression ratio", async () => {
      expect(await refusalOf(rawZip([skill(), lying("bomb", new Uint8Array(20 * MiB))]))).toBe("bundle_compression_ratio");
    });

    it("entry size", async () => {
      const limits = { ...defaultBundleLimits, maxEntryBytes: 1000, maxCompressionRatio: 1e9 };
      expect(await refusalOf(rawZip([skill(), lying("big", new Uint8Array(5000))]), limits)).toBe("bundle_entry_too_large");
    });

    it("total size", async () => {
      const limits = { ...defaultBundleLimits, maxTotalBytes: 6000, maxCompressionRatio: 1e9 };
      // The first entry is honest: a lying one is refused for its size mismatch once it ends.
      const zip = rawZip([skill(), deflatedEntry("a", new Uint8Array(3000)), lying("b", new Uint8Array(3000))]);
      expect(await refusalOf(zip, limits)).toBe("bundle_too_large");
    });
  });

  describe("valid contents in a non-canonical archive", () => {
    const files = (): RawEntry[] => [skill(), storedEntry("docs/a.md", "a"), storedEntry("docs/b.md", "b")];
    const noncanonical: [string, () => Uint8Array][] = [
      ["deflated by node:zlib", () => rawZip([deflatedEntry("SKILL.md", SKILL_MD), deflatedEntry("docs/a.md", "a"), deflatedEntry("docs/b.md", "b")])],
      ["with real timestamps", () => rawZip(files().map((entry) => ({ ...entry, dosTime: 0x6a3c, dosDate: 0x5a95 })))],
      ["out of order", () => rawZip(files().reverse())],
      ["without the UTF-8 flag", () => rawZip(files().map((entry) => ({ ...entry, flags: 0 })))],
      ["with an extended-timestamp extra field", () => rawZip([skill({ extra: new Uint8Array([0x55, 0x54, 0x05, 0x00, 0x01, 0, 0, 0, 0]) })])],
      ["with an archive comment", () => rawZip(files(), { comment: "made elsewhere" })],
      ["with a file comment", () => rawZip([skill({ comment: "hi" })])],
      ["made by MS-DOS", () => rawZip(files().map((entry) => ({ ...entry, versionMadeBy: 0x0014, externalAttributes: 0x20 })))],
      ["with an executable bit", () => rawZip([skill({ externalAttributes: (0o100755 << 16) >>> 0 })])],
      ["with a data-descriptor flag", () => rawZip([skill({ flags: 0x0808 })])],
      ["with bzip2 (method 12)", () => rawZip([skill(), storedEntry("x", "x", { method: 12 })])],
    ];

    it.each(noncanonical)("%s -> bundle_not_canonical", async (_, build) => {
      expect(await refusalOf(build())).toBe("bundle_not_canonical");
    });
  });

  describe("safety checks win over the canonical comparison", () => {
    const order: [string, ErrorCode, () => Uint8Array][] = [
      ["a deflated zip bomb", "bundle_compression_ratio", () => rawZip([deflatedEntry("SKILL.md", SKILL_MD), deflatedEntry("bomb", new Uint8Array(20 * MiB))])],
      ["a deflated zip slip", "bundle_path_invalid", () => rawZip([deflatedEntry("SKILL.md", SKILL_MD), deflatedEntry("../../evil", "x")])],
      [
        "a deflated symlink",
        "bundle_special_entry",
        () => rawZip([deflatedEntry("SKILL.md", SKILL_MD), deflatedEntry("l", "/", { externalAttributes: (0o120777 << 16) >>> 0 })]),
      ],
      ["a deflated duplicate", "bundle_duplicate_entry", () => rawZip([deflatedEntry("SKILL.md", SKILL_MD), deflatedEntry("SKILL.md", SKILL_MD)])],
      ["a deflated SKILL.md with bad frontmatter", "frontmatter_missing", () => rawZip([deflatedEntry("SKILL.md", "no frontmatter")])],
    ];

    it.each(order)("%s -> %s", async (_, code, build) => {
      expect(await refusalOf(build())).toBe(code);
    });
  });
});

describe("asServiceError", () => {
  it("turns a BundleFormatError into a service error with the same code and passes other errors through", () => {
    let thrown: unknown;
    try {
      resolveSkillName({ name: "Bad__Name" });
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(BundleFormatError);
    const converted = asServiceError(thrown);
    expect(converted).toBeInstanceOf(ConnectError);
    expect(stableCodeOf(converted as ConnectError)).toBe("invalid_skill_name");
    const other = new Error("boom");
    expect(asServiceError(other)).toBe(other);
  });
});
