import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { crc32 as zlibCrc32 } from "node:zlib";
import { describe, expect, it } from "vitest";
import {
  assertWithinLimits,
  BundleFormatError,
  canonicalLayout,
  canonicalZip,
  crc32,
  decodeSkillMd,
  DEFAULT_BUNDLE_LIMITS,
  FRONTMATTER_LIMITS,
  maxCanonicalArchiveBytes,
  tableCrc32,
  parseSkillMd,
  resolveSkillName,
  sha256Hex,
  slugifySkillName,
  validateBundlePath,
  validateSkillName,
  type BundleErrorCode,
} from "../src/bundle/index.ts";

const vectorsDir = new URL("../../../testdata/bundles/", import.meta.url);

interface Vector {
  name: string;
  files: Record<string, string | { base64: string }>;
  zip: string;
  sha256: string;
}

const vectors = JSON.parse(readFileSync(new URL("vectors.json", vectorsDir), "utf8")) as Vector[];
const encoder = new TextEncoder();

function filesOf(vector: Vector): Map<string, Uint8Array> {
  return new Map(
    Object.entries(vector.files).map(([path, content]) => [
      path,
      typeof content === "string" ? encoder.encode(content) : new Uint8Array(Buffer.from(content.base64, "base64")),
    ]),
  );
}

function codeOf(action: () => unknown): BundleErrorCode | undefined {
  try {
    action();
  } catch (error) {
    if (error instanceof BundleFormatError) return error.code;
    throw error;
  }
  return undefined;
}

function skillMd(frontmatter: string, body = "Body.\n"): string {
  return `---\n${frontmatter}---\n${body}`;
}

describe("test vectors", () => {
  it("covers the required shapes", () => {
    expect(vectors.map((v) => v.name)).toEqual(["minimal", "nested-utf8", "empty-file", "binary"]);
  });

  for (const vector of vectors) {
    it(`${vector.name}: canonicalZip writes the committed bytes and sha256Hex the listed hash`, async () => {
      const zip = canonicalZip(filesOf(vector));
      expect(Buffer.from(zip).equals(readFileSync(new URL(vector.zip, vectorsDir)))).toBe(true);
      expect(await sha256Hex(zip)).toBe(vector.sha256);
      expect(createHash("sha256").update(zip).digest("hex")).toBe(vector.sha256);
    });
  }

  it("does not depend on the insertion order of the map", () => {
    const vector = vectors.find((v) => v.name === "nested-utf8")!;
    const reversed = new Map([...filesOf(vector)].reverse());
    expect(canonicalZip(reversed)).toEqual(canonicalZip(filesOf(vector)));
  });
});

describe("canonicalZip", () => {
  it("sorts by UTF-8 bytes, not UTF-16 code units", () => {
    // U+1F600 is F0 9F 98 80 in UTF-8 but D83D DE00 in UTF-16; U+FF21 is EF BC A1 / FF21.
    const zip = canonicalZip(
      new Map([
        ["\u{1F600}", new Uint8Array()],
        ["\uFF21", new Uint8Array()],
      ]),
    );
    const text = Buffer.from(zip).toString("utf8");
    expect(text.indexOf("\uFF21")).toBeLessThan(text.indexOf("\u{1F600}"));
    expect(["\u{1F600}", "\uFF21"].sort()[0]).toBe("\u{1F600}");
  });

  it("writes only the end-of-central-directory record for no files", () => {
    expect(Array.from(canonicalZip(new Map()))).toEqual([0x50, 0x4b, 0x05, 0x06, ...new Array<number>(18).fill(0)]);
  });

  it("pins every variable header field", () => {
    const zip = canonicalZip(new Map([["a", encoder.encode("x")]]));
    const view = new DataView(zip.buffer);
    expect(view.getUint32(0, true)).toBe(0x04034b50);
    expect([4, 6, 8, 10, 12].map((at) => view.getUint16(at, true))).toEqual([20, 0x0800, 0, 0, 0x0021]);
    expect(view.getUint32(14, true)).toBe(zlibCrc32("x"));
    const central = 30 + 1 + 1;
    expect(view.getUint32(central, true)).toBe(0x02014b50);
    expect(view.getUint16(central + 4, true)).toBe(0x0314);
    expect(view.getUint32(central + 38, true)).toBe(0x81a40000);
  });

  it.each([
    ["../evil", "bundle_path_invalid"],
    ["dir/", "bundle_path_invalid"],
    ["a\\b", "bundle_path_invalid"],
    ["\ud800", "bundle_path_invalid"],
  ] as const)("refuses the path %j with %s", (path, code) => {
    expect(codeOf(() => canonicalZip(new Map([[path, new Uint8Array()]])))).toBe(code);
  });

  it("refuses a path that is also another path's directory", () => {
    const files = new Map([
      ["docs/a.md", new Uint8Array()],
      ["docs", new Uint8Array()],
    ]);
    expect(codeOf(() => canonicalZip(files))).toBe("bundle_duplicate_entry");
  });

  it("keeps paths that only share a prefix", () => {
    const files = new Map([
      ["docs-a", new Uint8Array()],
      ["docs/a", new Uint8Array()],
      ["doc", new Uint8Array()],
    ]);
    expect(codeOf(() => canonicalZip(files))).toBeUndefined();
  });
});

describe("crc32 and sha256Hex", () => {
  it("matches the CRC-32 check value and zlib", () => {
    expect(crc32(encoder.encode("123456789"))).toBe(0xcbf43926);
    expect(crc32(new Uint8Array())).toBe(0);
    const random = new Uint8Array(4096).map((_, i) => (i * 7919 + 13) & 0xff);
    expect(crc32(random)).toBe(zlibCrc32(random));
  });

  it("computes the same CRC-32 with the portable table loop (browsers) at every length", () => {
    for (const length of [0, 1, 7, 8, 9, 15, 16, 17, 4096, 100_003]) {
      const bytes = new Uint8Array(length).map((_, i) => (i * 2654435761) >>> 24);
      expect(tableCrc32(bytes), `length ${length}`).toBe(zlibCrc32(bytes));
    }
    expect(tableCrc32(encoder.encode("123456789"))).toBe(0xcbf43926);
  });

  it("hashes to lowercase hex, also from a shared buffer and a subarray", async () => {
    const abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
    expect(await sha256Hex(encoder.encode("abc"))).toBe(abc);
    const shared = new Uint8Array(new SharedArrayBuffer(5));
    shared.set(encoder.encode("xabcx"));
    expect(await sha256Hex(shared.subarray(1, 4))).toBe(abc);
    expect(await sha256Hex(encoder.encode("xabcx").subarray(1, 4))).toBe(abc);
  });
});

describe("validateBundlePath", () => {
  it.each(["SKILL.md", "a/b/c.txt", "docs/r\u00e9sum\u00e9 final.md", ".hidden", "a..b", "...", "\u{1F600}/x"])("accepts %j", (path) => {
    expect(validateBundlePath(path)).toBeUndefined();
  });

  it.each([
    "",
    "/etc/passwd",
    "../x",
    "a/../../x",
    "a/..",
    "./a",
    "a/./b",
    "a//b",
    "a/",
    "a\\b",
    "a\u0000b",
    "a\nb",
    "a\u007fb",
    "C:/x",
    "c:x",
    "\udc00",
    "a".repeat(0x10000),
  ])("refuses %j", (path) => {
    expect(validateBundlePath(path)).toBeTypeOf("string");
  });
});

describe("skill names", () => {
  it.each(["a", "0", "my-skill", "my_skill", "a-", "a_b-c", "skills-helper", "skill1", "myskills", "a".repeat(128)])("accepts %j", (name) => {
    expect(validateSkillName(name)).toBeUndefined();
  });

  it.each(["", "A", "My-skill", "-a", "_a", "a".repeat(129), "a__b", "a___b", "__", "skills", "skill", "a b", "a.b", "caf\u00e9", "a/b"])(
    "refuses %j",
    (name) => {
      expect(validateSkillName(name)).toBeTypeOf("string");
    },
  );

  it.each([
    ["My Skill", "my-skill"],
    ["pdf_tools", "pdf_tools"],
    ["R\u00e9sum\u00e9 Builder!", "resume-builder"],
    ["a__b___c", "a_b_c"],
    ["--Data.Cleaner--", "data-cleaner"],
    ["\u65e5\u672c\u8a9e", ""],
    ["x".repeat(127) + "-yz", "x".repeat(127)],
  ])("slugifies %j to %j", (basename, slug) => {
    expect(slugifySkillName(basename)).toBe(slug);
  });

  it("resolves explicit name, then frontmatter, then directory basename", () => {
    expect(resolveSkillName({ name: "explicit", frontmatterName: "front", directoryBasename: "Dir" })).toBe("explicit");
    expect(resolveSkillName({ frontmatterName: "front", directoryBasename: "Dir" })).toBe("front");
    expect(resolveSkillName({ directoryBasename: "My Dir" })).toBe("my-dir");
    expect(resolveSkillName({ name: "explicit", frontmatterName: "Not Valid" })).toBe("explicit");
  });

  it.each([[{}], [{ name: "Bad" }], [{ frontmatterName: "a__b" }], [{ directoryBasename: "skills" }], [{ directoryBasename: "\u65e5\u672c" }]])(
    "refuses %j with invalid_skill_name",
    (sources) => {
      expect(codeOf(() => resolveSkillName(sources))).toBe("invalid_skill_name");
    },
  );
});

describe("parseSkillMd", () => {
  it("reads name, description, other keys and the body", () => {
    const parsed = parseSkillMd(skillMd("name: pdf\ndescription: Fill PDF forms.\nlicense: MIT\n", "# PDF\n"));
    expect(parsed).toEqual({
      name: "pdf",
      description: "Fill PDF forms.",
      frontmatter: { name: "pdf", description: "Fill PDF forms.", license: "MIT" },
      body: "# PDF\n",
    });
  });

  it("accepts CRLF line endings, a BOM and a frontmatter without name", () => {
    const parsed = parseSkillMd("\uFEFF---\r\ndescription: Windows.\r\n---\r\nBody\r\n");
    expect(parsed.description).toBe("Windows.");
    expect(parsed.name).toBeUndefined();
    expect(parsed.body).toBe("Body\r\n");
  });

  it("closes at the first line that is exactly --- (trailing blanks allowed), even at the end of the file", () => {
    expect(parseSkillMd("---\ndescription: a\n--- \t").body).toBe("");
    expect(parseSkillMd("---\ndescription: a\n---\n---\nrest\n").body).toBe("---\nrest\n");
    expect(codeOf(() => parseSkillMd("---\ndescription: a\n----\n"))).toBe("frontmatter_invalid");
    expect(codeOf(() => parseSkillMd("---\ndescription: a\u2028---\n"))).toBe("frontmatter_invalid");
  });

  it("trims the description, e.g. the newline a block scalar keeps", () => {
    expect(parseSkillMd(skillMd("description: >\n  Folded\n  text.\n")).description).toBe("Folded text.");
  });

  it("counts description length in code points: 2048 accepted, 2049 refused", () => {
    expect(parseSkillMd(skillMd(`description: ${"d".repeat(2048)}\n`)).description).toHaveLength(2048);
    expect(parseSkillMd(skillMd(`description: ${"\u{1F600}".repeat(2048)}\n`)).description).toHaveLength(4096);
    expect(codeOf(() => parseSkillMd(skillMd(`description: ${"d".repeat(2049)}\n`)))).toBe("description_too_long");
  });

  it.each([
    ["no frontmatter", "# Title\ndescription: x\n", "frontmatter_missing"],
    ["empty file", "", "frontmatter_missing"],
    ["blank line first", "\n---\ndescription: x\n---\n", "frontmatter_missing"],
    ["opening not alone", "--- description: x\n---\n", "frontmatter_missing"],
    ["never closed", "---\ndescription: x\n", "frontmatter_invalid"],
    ["malformed YAML", skillMd("description: [unclosed\n"), "frontmatter_invalid"],
    ["bad indentation", skillMd("description: a\n  b: c\n"), "frontmatter_invalid"],
    ["duplicate key", skillMd("description: a\ndescription: b\n"), "frontmatter_invalid"],
    ["a list", skillMd("- description\n- x\n"), "frontmatter_invalid"],
    ["a scalar", skillMd("just text\n"), "frontmatter_invalid"],
    ["description a number", skillMd("description: 42\n"), "frontmatter_invalid"],
    ["description a list", skillMd("description:\n  - a\n"), "frontmatter_invalid"],
    ["description a mapping", skillMd("description:\n  a: b\n"), "frontmatter_invalid"],
    ["name a number", skillMd("name: 7\ndescription: x\n"), "frontmatter_invalid"],
    ["empty frontmatter", skillMd(""), "description_missing"],
    ["no description", skillMd("name: x\n"), "description_missing"],
    ["null description", skillMd("description:\n"), "description_missing"],
    ["blank description", skillMd("description: '  '\n"), "description_missing"],
  ] as const)("%s -> %s", (_, text, code) => {
    expect(codeOf(() => parseSkillMd(text))).toBe(code);
  });
});

describe("frontmatter bounds", () => {
  const { maxBytes, maxKeys, maxDepth, maxAliases } = FRONTMATTER_LIMITS;
  const keys = (count: number, indent = "") => Array.from({ length: count }, (_, i) => `${indent}k${i}: v\n`).join("");
  /** `depth` collections nested in flow style: description's sibling x holds [[...]]. */
  const flowNesting = (depth: number) => `description: d\nx: ${"[".repeat(depth - 1)}${"]".repeat(depth - 1)}\n`;
  /** `depth` collections nested in block style: a mapping of mappings. */
  const blockNesting = (depth: number) =>
    `description: d\n${Array.from({ length: depth - 1 }, (_, i) => `${" ".repeat(i)}k:\n`).join("")}${" ".repeat(depth - 1)}leaf: 1\n`;
  /** `count` anchors, each aliased once (so no anchor is expanded often). */
  const aliases = (count: number) => {
    const indices = Array.from({ length: count }, (_, i) => i);
    return `description: d\nx: [${indices.map((i) => `&a${i} ${i}`).join(", ")}]\ny: [${indices.map((i) => `*a${i}`).join(", ")}]\n`;
  };

  it("takes a frontmatter of exactly the size limit and refuses one byte more with frontmatter_too_large", () => {
    const description = "description: d\n";
    const filler = (bytes: number) => `# ${"x".repeat(bytes - 3)}\n`;
    expect(parseSkillMd(skillMd(description + filler(maxBytes - description.length))).description).toBe("d");
    expect(codeOf(() => parseSkillMd(skillMd(description + filler(maxBytes - description.length + 1))))).toBe("frontmatter_too_large");
  });

  it("counts the size in UTF-8 bytes, not characters", () => {
    const description = `description: ${"é".repeat(maxBytes / 2)}\n`;
    expect(description.length).toBeLessThan(maxBytes);
    expect(codeOf(() => parseSkillMd(skillMd(description)))).toBe("frontmatter_too_large");
  });

  it("stops looking for the closing line once the block is too long, with frontmatter_too_large", () => {
    expect(codeOf(() => parseSkillMd(`---\ndescription: d\n${"body line\n".repeat(maxBytes / 5)}`))).toBe("frontmatter_too_large");
  });

  it("refuses the issue's 20 000 keys with frontmatter_too_large", () => {
    expect(codeOf(() => parseSkillMd(skillMd(`description: d\n${keys(20_000)}`)))).toBe("frontmatter_too_large");
  });

  it("takes as many keys as allowed, at every level together, and refuses one more", () => {
    expect(parseSkillMd(skillMd(`description: d\nmeta:\n${keys(maxKeys - 2, "  ")}`)).description).toBe("d");
    expect(codeOf(() => parseSkillMd(skillMd(`description: d\nmeta:\n${keys(maxKeys - 1, "  ")}`)))).toBe("frontmatter_too_large");
    expect(codeOf(() => parseSkillMd(skillMd(`description: d\nx: {${Array.from({ length: maxKeys }, (_, i) => `f${i}: 1`).join(", ")}}\n`)))).toBe(
      "frontmatter_too_large",
    );
  });

  it.each([
    ["flow", flowNesting],
    ["block", blockNesting],
  ])("takes %s collections nested as deep as allowed and refuses one level more", (_, nesting) => {
    expect(parseSkillMd(skillMd(nesting(maxDepth))).description).toBe("d");
    expect(codeOf(() => parseSkillMd(skillMd(nesting(maxDepth + 1))))).toBe("frontmatter_too_large");
  });

  it("refuses deep nesting before composing it: 100 000 levels is frontmatter_too_large, not a stack overflow", () => {
    expect(codeOf(() => parseSkillMd(skillMd(`description: d\nx: ${"[".repeat(100_000)}\n`)))).toBe("frontmatter_too_large");
    expect(codeOf(() => parseSkillMd(skillMd(`description: d\nx:\n${"- ".repeat(100_000)}1\n`)))).toBe("frontmatter_too_large");
  });

  it("takes as many aliases as allowed and refuses one more", () => {
    expect(parseSkillMd(skillMd(aliases(maxAliases))).frontmatter.y).toHaveLength(maxAliases);
    expect(codeOf(() => parseSkillMd(skillMd(aliases(maxAliases + 1))))).toBe("frontmatter_too_large");
  });

  it("still refuses duplicate keys, nested ones and ones spelled differently, with frontmatter_invalid", () => {
    expect(codeOf(() => parseSkillMd(skillMd("description: d\nmeta:\n  a: 1\n  a: 2\n")))).toBe("frontmatter_invalid");
    expect(codeOf(() => parseSkillMd(skillMd("description: d\nx: [{a: 1, a: 2}]\n")))).toBe("frontmatter_invalid");
    expect(codeOf(() => parseSkillMd(skillMd("description: d\n'description': e\n")))).toBe("frontmatter_invalid");
    expect(parseSkillMd(skillMd("description: d\nmeta:\n  a: 1\nother:\n  a: 2\n")).frontmatter).toEqual({ description: "d", meta: { a: 1 }, other: { a: 2 } });
  });

  it("refuses a second YAML document with frontmatter_invalid", () => {
    expect(codeOf(() => parseSkillMd(skillMd("description: d\n...\nx: 1\n")))).toBe("frontmatter_invalid");
  });
});

describe("decodeSkillMd", () => {
  it("drops a byte-order mark and refuses bytes that are not UTF-8 with frontmatter_invalid", () => {
    expect(decodeSkillMd(new Uint8Array([0xef, 0xbb, 0xbf, 0x2d]))).toBe("-");
    expect(codeOf(() => decodeSkillMd(new Uint8Array([0x2d, 0xe9])))).toBe("frontmatter_invalid");
  });
});

describe("assertWithinLimits", () => {
  const limits = { ...DEFAULT_BUNDLE_LIMITS, maxEntries: 3, maxEntryBytes: 10, maxTotalBytes: 25 };
  const sizes = (...bytes: number[]) => new Map(bytes.map((size, i) => [`f${i}`, size]));

  it("takes files exactly at every limit", () => {
    expect(() => assertWithinLimits(sizes(10, 10, 5), limits)).not.toThrow();
  });

  it.each([
    ["one file too many", sizes(1, 1, 1, 1), "bundle_too_many_entries"],
    ["one file a byte too large", sizes(11), "bundle_entry_too_large"],
    ["the files together a byte too large", sizes(10, 10, 6), "bundle_too_large"],
  ] as const)("refuses %s with %s, the server's code", (_, files, code) => {
    expect(codeOf(() => assertWithinLimits(files, limits))).toBe(code);
  });
});

describe("canonicalLayout", () => {
  const files = new Map([
    ["b.txt", encoder.encode("bee")],
    ["SKILL.md", encoder.encode("---\ndescription: d\n---\n")],
    ["a/c", new Uint8Array(0)],
  ]);

  it("puts each header where canonicalZip writes it, the data right after, and the trailer at the end", () => {
    const zip = canonicalZip(files);
    const entries = Array.from(files, ([path, data]) => ({ name: encoder.encode(path), size: data.length, crc: crc32(data), data }));
    const layout = canonicalLayout(entries);
    expect(layout.size).toBe(zip.length);
    expect(layout.localHeaders.map(({ entry }) => new TextDecoder().decode(entry.name))).toEqual(["SKILL.md", "a/c", "b.txt"]);
    for (const { offset, bytes, entry } of layout.localHeaders) {
      expect(zip.subarray(offset, offset + bytes.length)).toEqual(bytes);
      expect(zip.subarray(offset + bytes.length, offset + bytes.length + entry.size)).toEqual(entry.data);
    }
    expect(zip.subarray(layout.trailer.offset)).toEqual(layout.trailer.bytes);
  });

  it("bounds the archive exactly: the limits filled with the longest paths give maxCanonicalArchiveBytes", () => {
    const limits = { ...DEFAULT_BUNDLE_LIMITS, maxEntries: 2, maxTotalBytes: 100 };
    const longest = (letter: string) => letter.repeat(0xffff);
    const full = new Map([
      [longest("a"), new Uint8Array(60)],
      [longest("b"), new Uint8Array(40)],
    ]);
    expect(canonicalZip(full).length).toBe(maxCanonicalArchiveBytes(limits));
  });
});
