import { spawn } from "node:child_process";
import * as fs from "node:fs/promises";
import * as path from "node:path";
import { expect, it } from "vitest";

const DEMO = path.resolve(import.meta.dirname, "../../examples/demo/main.ts");

/** Runs the demo as `npm run demo` does, in its own process. */
async function runDemo(): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [DEMO], { stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const code = await new Promise<number | null>((resolve) => child.once("close", resolve));
  return { code, stdout, stderr };
}

it("runs the demo end to end: the skill is loaded, the service's tools and the demo's own host tool are called, the answer is printed, nothing is left behind", async () => {
  const { code, stdout, stderr } = await runDemo();

  expect(code, `${stdout}\n${stderr}`).toBe(0);
  expect(stdout).toMatch(/model\s+calls skills \{"action":"load","name":"release-notes"\}/);
  expect(stdout).toMatch(/skills\s+returns --- name: release-notes/);
  expect(stdout).toMatch(/model\s+calls files \{"v":1,"op":"read","path":"\/workspace\/skills\/release-notes\/template\.md"\}/);
  expect(stdout).toMatch(/files\s+returns \{"v":1,"ok":true,"data":"# \{product\} \{version\}/);
  expect(stdout).toMatch(/model\s+calls word_count \{"text":"acme-cli 2\.4\.0/);
  expect(stdout).toMatch(/word_count\s+returns \{"words":\d+,"lines":1,"characters":\d+\}/);
  expect(stdout).toMatch(/session\s+ses_\w+: environments sandbox \(workspace: write\) and laptop \(this process\), tools files, word_count, clock/);
  expect(stdout).toMatch(/model\s+calls clock \{\}/);
  expect(stdout).toMatch(/service\s+sends clock to laptop/);
  expect(stdout).toMatch(/laptop\s+accepts clock/);
  const [, date] = /clock\s+returns \{"date":"(\d{4}-\d{2}-\d{2})","timeZone":"[^"]+"\}/.exec(stdout) ?? [];
  expect(stdout).toContain(`# acme-cli 2.4.0\n\n_Released ${date}._\n`);
  expect(stdout).toContain("## Breaking changes\n- Node 18 is no longer supported: upgrade to Node 20 or later");
  expect(stdout).toMatch(/completed \(end_turn\): 5 rounds, 6 tool calls/);

  const [, url, dataDir] = /service\s+(\S+) \(data in (\S+)\)/.exec(stdout) ?? [];
  await expect(fs.stat(dataDir!)).rejects.toThrow(/ENOENT/);
  await expect(fetch(url!)).rejects.toThrow();
}, 300_000);
