// The Python client's tests (clients/python/tests, pytest) as one test of `npm test`, so that the
// one command runs the whole suite and `npm test -- <vitest options or files>` keeps working.
// `npm run test:python` runs them alone, with pytest's own report.
import { execFile } from "node:child_process";
import * as path from "node:path";
import { promisify } from "node:util";
import { expect, it } from "vitest";

const ROOT = path.resolve(import.meta.dirname, "../..");

it("the Python client's pytest suite passes", async () => {
  const run = promisify(execFile)("npm", ["run", "--silent", "test:python", "--", "-q"], { cwd: ROOT, maxBuffer: 16 * 1024 * 1024 });
  const { stdout } = await run.catch((failure: { stdout?: string; stderr?: string }) => {
    // The whole report, so that the failing Python test is in vitest's output.
    throw new Error(`npm run test:python failed:\n${failure.stdout ?? ""}${failure.stderr ?? ""}`);
  });
  const summary = stdout.trim().split("\n").at(-1) ?? "";
  console.log(`Python client: ${summary}`);
  expect(summary).toMatch(/^\d+ passed in /);
}, 600_000);
