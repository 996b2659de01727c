import { readFileSync } from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { renderErrorDocs } from "../src/errors/docs.ts";
import { RESERVED_PARAMETERS } from "../src/runs/submission.ts";

const root = path.resolve(import.meta.dirname, "../..");
const read = (file: string) => readFileSync(path.join(root, file), "utf8");

describe("docs stay true", () => {
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
