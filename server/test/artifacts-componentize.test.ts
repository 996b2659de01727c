import { componentWit } from "@bytecodealliance/jco";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ENTRYPOINT_TYPE, readComponentSections } from "../src/engine/component/index.ts";
import { componentizeJsTool } from "./helpers/components.ts";
import { bearer, KEY_A, postJson, startTestService, type TestService } from "./helpers/service.ts";
import { sha256 } from "./helpers/skills.ts";

/** Admission of a real componentize-js tool (~12 MB), with the production limits. */

const SOURCE = `export function run(input, configuration, deadlineMs) {
  return JSON.stringify({ v: 1, echoed: JSON.parse(input) });
}`;

let service: TestService;
let tool: Uint8Array;
beforeAll(async () => {
  tool = await componentizeJsTool(SOURCE);
  service = await startTestService();
}, 400_000);
afterAll(() => service?.close());

/** The byte ranges of the core modules embedded in a component (top-level sections of id 1). */
function coreModuleRanges(component: Uint8Array): [number, number][] {
  const ranges: [number, number][] = [];
  let at = 8;
  while (at < component.byteLength) {
    const id = component[at++]!;
    let size = 0;
    for (let shift = 0; ; shift += 7) {
      const byte = component[at++]!;
      size += (byte & 0x7f) * 2 ** shift;
      if ((byte & 0x80) === 0) break;
    }
    if (id === 1) ranges.push([at, at + size]);
    at += size;
  }
  return ranges;
}

describe("a componentize-js tool", () => {
  it("is read by the section reader exactly as wasm-tools reads it", async () => {
    expect(tool.byteLength).toBeGreaterThan(8 * 1024 * 1024);
    const sections = readComponentSections(tool);
    const wit = await componentWit(tool);
    const witImports = [...wit.matchAll(/^\s*import ([a-z0-9-]+:[a-z0-9-/]+@[0-9.]+);$/gm)].map((match) => match[1]);
    const witExports = [...wit.matchAll(/^\s*export ([a-z0-9-]+): func/gm)].map((match) => match[1]);
    expect(sections.imports.filter((item) => item.sort === "instance").map((item) => item.name)).toEqual(witImports);
    expect(witExports).toEqual(["run"]);
    expect(sections.exports).toEqual([{ name: "run", sort: "func", type: ENTRYPOINT_TYPE }]);
  });

  it("is read without touching its core modules (the bulk of its bytes)", () => {
    const ranges = coreModuleRanges(tool);
    const coreBytes = ranges.reduce((sum, [start, end]) => sum + end - start, 0);
    expect(coreBytes).toBeGreaterThan(tool.byteLength * 0.9);
    // Scrambled core modules (section framing intact) read exactly the same.
    const scrambled = new Uint8Array(tool);
    for (const [start, end] of ranges) scrambled.fill(0xff, start, end);
    expect(readComponentSections(scrambled)).toEqual(readComponentSections(tool));
  });

  it("is admitted over REST as application/wasm, reported and prepared", async () => {
    const response = await fetch(`${service.url}/v1/tools`, {
      method: "POST",
      headers: { "content-type": "application/wasm", ...bearer(KEY_A) },
      body: tool as BodyInit,
    });
    expect(await response.json()).toEqual({ id: sha256(tool) });

    const reported = await (await fetch(`${service.url}/v1/tools/${sha256(tool)}`, { headers: bearer(KEY_A) })).json();
    expect(reported.artifact).toMatchObject({ kind: "tool", sizeBytes: String(tool.byteLength), world: "skillenv:env/tool@0.1.0" });
    expect(reported.artifact.imports).toContain("wasi:http/outgoing-handler@0.2.10");
    expect(reported.artifact.imports.some((name: string) => name.startsWith("wasi:sockets/"))).toBe(false);

    const prepared = await postJson(service.url, "/v1/service-env/prepare", { tools: [sha256(tool)] }, KEY_A);
    expect(prepared).toEqual({ status: 200, body: { artifacts: [{ id: sha256(tool), kind: "tool", ready: true }] } });
  });
});
