import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { renderErrorDocs } from "../src/errors/docs.ts";
import { RESERVED_PARAMETERS } from "../src/runs/submission.ts";

const root = path.resolve(import.meta.dirname, "../..");
const read = (file: string) => readFileSync(path.join(root, file), "utf8");

/** Every tracked text file, by its path from the repository's root. */
function trackedFiles(): string[] {
  return execFileSync("git", ["ls-files", "-z"], { cwd: root, encoding: "utf8" })
    .split("\0")
    .filter((file) => file !== "" && /\.(md|ts|py|proto|json|yaml|html)$/.test(file));
}

describe("docs stay true", () => {
  it("names only the model ids docs/models.md lists, wherever a model id appears", () => {
    const table = /## Model ids in examples([\s\S]*?)\n## /.exec(read("docs/models.md"))?.[1] ?? "";
    const listed = new Set([...table.matchAll(/\| `[a-z]+` \| `([^`]+)` \|/g)].map((match) => match[1]));
    expect([...listed].sort()).toEqual(["claude-sonnet-4-6", "gpt-4.1"]);
    const named = new Map<string, string>();
    for (const file of trackedFiles()) {
      for (const [id] of read(file).matchAll(/\b(?:claude-[a-z]+-[0-9][a-z0-9.-]*|gpt-[0-9][a-z0-9.-]*)/g)) named.set(id, file);
    }
    const unlisted = [...named].filter(([id]) => !listed.has(id));
    expect(unlisted).toEqual([]);
  });

  it("docs/errors.md is the rendering of the error catalogue (npm run docs:errors)", () => {
    expect(read("docs/errors.md")).toBe(renderErrorDocs());
  });

  it("docs/operations.md documents every setting the config module reads", () => {
    const settingsSource = read("server/src/config/settings.ts");
    const names = new Set(settingsSource.match(/SERVICE_[A-Z0-9_]+/g));
    const operations = read("docs/operations.md");
    expect(names.size).toBeGreaterThan(10);
    for (const name of names) expect(operations, name).toContain(`\`${name}\``);
  });

  it("runs.proto and docs/runs.md name exactly the model parameters a run may not set", () => {
    const reserved = [...RESERVED_PARAMETERS].sort();
    const proto = read("proto/skillenv/sessions/v1/runs.proto");
    const comment = /service sets itself are refused: ([^.]+)\./.exec(proto.replace(/\n\s*\/\/ /g, " "))?.[1];
    expect(comment?.split(", ").sort()).toEqual(reserved);
    const listed = /\((`model`[^)]+)\), which are refused/.exec(read("docs/runs.md").replace(/\n\s*/g, " "))?.[1];
    expect(
      listed
        ?.split(", ")
        .map((name) => name.replaceAll("`", ""))
        .sort(),
    ).toEqual(reserved);
  });
});
