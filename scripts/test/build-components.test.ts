// scripts/build-components.ts as the README and docs/ call it: components of components/ by name,
// and builds started from another directory than the repository's.
import { execFile } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const ROOT = path.resolve(import.meta.dirname, "../..");
const BUILDER = path.join(ROOT, "scripts/build-components.ts");

let elsewhere: string;
beforeAll(() => {
  elsewhere = fs.mkdtempSync(path.join(os.tmpdir(), "build-components-test-"));
});
afterAll(() => fs.rmSync(elsewhere, { recursive: true, force: true }));

function node(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, args, { cwd: elsewhere }, (error, stdout, stderr) => {
      resolve({ code: error ? (typeof error.code === "number" ? error.code : 1) : 0, stdout, stderr });
    });
  });
}

describe("build-components", () => {
  it("builds the components it is given by name, and only those, from any directory", async () => {
    const { code, stdout, stderr } = await node([BUILDER, "echo-wat"]);
    expect(code, stderr).toBe(0);
    expect(stdout).toMatch(/^echo-wat\s/m);
    expect(stdout).toContain("1 components ready in build/components/");
    expect(fs.existsSync(path.join(ROOT, "build/components/echo-wat.wasm"))).toBe(true);
  });

  it("refuses a name that is neither a directory nor a component, naming the components there are", async () => {
    const { code, stderr } = await node([BUILDER, "no-such-component"]);
    expect(code).not.toBe(0);
    expect(stderr).toMatch(/no-such-component: neither a directory nor a component of components\/ \(.*\becho-wat\b.*\)/);
  });

  it("componentizes a component importing ../shared/ when started from another directory", async () => {
    const out = path.join(elsewhere, "out");
    // Into a directory of its own, so that it builds rather than finds a current stamp.
    const script = `import { buildComponents } from ${JSON.stringify(BUILDER)};
await buildComponents({ dirs: [${JSON.stringify(path.join(ROOT, "components/js-program-tool"))}], outDir: ${JSON.stringify(out)}, log: () => {} });`;
    const { code, stderr } = await node(["--input-type=module", "-e", script]);
    expect(code, stderr).toBe(0);
    expect(fs.statSync(path.join(out, "js-program-tool.wasm")).size).toBeGreaterThan(1024 * 1024);
  }, 120_000);
});
