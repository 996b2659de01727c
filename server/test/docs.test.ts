import { readFileSync } from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { renderErrorDocs } from "../src/errors/docs.ts";

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
});
