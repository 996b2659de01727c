import { describe, expect, it } from "vitest";
import { fileChanges, lineDiff, MAX_DIFF_CELLS, type DiffLine } from "../src/skill-diff.ts";

/** A diff as compact strings: "  same", "- removed", "+ added". */
const compact = (diff: DiffLine[]) => diff.map(({ kind, text }) => `${kind === "same" ? " " : kind === "added" ? "+" : "-"} ${text}`);

/** What a diff says the older and newer texts were. */
const older = (diff: DiffLine[]) => diff.filter(({ kind }) => kind !== "added").map(({ text }) => text);
const newer = (diff: DiffLine[]) => diff.filter(({ kind }) => kind !== "removed").map(({ text }) => text);

describe("the console's SKILL.md line diff", () => {
  it("marks a changed line as removed then added, between the lines both texts share", () => {
    expect(compact(lineDiff("---\ndescription: One.\n---\nStep 1\nStep 2\n", "---\ndescription: Two.\n---\nStep 1\nStep 2\n"))).toEqual([
      "  ---",
      "- description: One.",
      "+ description: Two.",
      "  ---",
      "  Step 1",
      "  Step 2",
    ]);
  });

  it("aligns insertions and deletions in the middle on the longest run of shared lines", () => {
    const diff = lineDiff("a\nb\nc\nd\ne\n", "a\nc\nd\nx\ne\ny\n");
    expect(compact(diff)).toEqual(["  a", "- b", "  c", "  d", "+ x", "  e", "+ y"]);
  });

  it("gives empty and identical texts their obvious diffs", () => {
    expect(lineDiff("", "")).toEqual([]);
    expect(compact(lineDiff("", "new\n"))).toEqual(["+ new"]);
    expect(compact(lineDiff("old\n", ""))).toEqual(["- old"]);
    expect(compact(lineDiff("same\n", "same\n"))).toEqual(["  same"]);
  });

  it("always reproduces both texts, whatever they are (random texts of few distinct lines)", () => {
    let seed = 7;
    const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    for (let round = 0; round < 200; round++) {
      const text = () => Array.from({ length: Math.floor(random() * 12) }, () => "abc"[Math.floor(random() * 3)]!);
      const [a, b] = [text(), text()];
      const diff = lineDiff(a.map((line) => `${line}\n`).join(""), b.map((line) => `${line}\n`).join(""));
      expect(older(diff)).toEqual(a);
      expect(newer(diff)).toEqual(b);
    }
  });

  it("shows a middle too large to align as removed then added, still reproducing both texts", () => {
    const side = Math.ceil(Math.sqrt(MAX_DIFF_CELLS)) + 1;
    const a = Array.from({ length: side }, (_, i) => `old ${i}`);
    const b = Array.from({ length: side }, (_, i) => `new ${i}`);
    const diff = lineDiff(["top", ...a, "bottom"].join("\n"), ["top", ...b, "bottom"].join("\n"));
    expect(diff[0]).toEqual({ kind: "same", text: "top" });
    expect(diff.at(-1)).toEqual({ kind: "same", text: "bottom" });
    expect(diff.slice(1, -1).map(({ kind }) => kind)).toEqual([...a.map(() => "removed"), ...b.map(() => "added")]);
  });
});

describe("the console's file changes between versions", () => {
  it("tells added, removed and changed files by path, size and CRC-32", () => {
    const before = [
      { path: "SKILL.md", sizeBytes: 100, crc32: 1 },
      { path: "same.txt", sizeBytes: 5, crc32: 2 },
      { path: "edited.txt", sizeBytes: 5, crc32: 3 },
      { path: "gone.txt", sizeBytes: 9, crc32: 4 },
    ];
    const after = [
      { path: "SKILL.md", sizeBytes: 120, crc32: 5 },
      { path: "same.txt", sizeBytes: 5, crc32: 2 },
      { path: "edited.txt", sizeBytes: 5, crc32: 6 },
      { path: "new.txt", sizeBytes: 1, crc32: 7 },
    ];
    const changes = fileChanges(before, after);
    expect(changes.added.map(({ path }) => path)).toEqual(["new.txt"]);
    expect(changes.removed.map(({ path }) => path)).toEqual(["gone.txt"]);
    expect(changes.changed.map(({ path, sizeBeforeBytes, sizeBytes }) => [path, sizeBeforeBytes, sizeBytes])).toEqual([
      ["SKILL.md", 100, 120],
      ["edited.txt", 5, 5],
    ]);
  });

  it("compares sizes only when a listing kept no CRC-32", () => {
    const changes = fileChanges([{ path: "a", sizeBytes: 5, crc32: 0 }], [{ path: "a", sizeBytes: 5, crc32: 9 }]);
    expect(changes.changed).toEqual([]);
  });
});
