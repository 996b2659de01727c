import { execFile } from "node:child_process";
import * as fs from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { KEY_A, requestLogSince, startTestService, type TestService } from "../../../server/test/helpers/service.ts";

const BIN = path.resolve(import.meta.dirname, "../bin/skillenv.ts");

let service: TestService;
let skillDir: string;
beforeAll(async () => {
  service = await startTestService();
  skillDir = path.join(await fs.mkdtemp(path.join(os.tmpdir(), "skillenv-cli-")), "My Report Writer");
  await fs.mkdir(path.join(skillDir, "templates"), { recursive: true });
  await fs.writeFile(path.join(skillDir, "SKILL.md"), "---\ndescription: Writes weekly reports.\n---\n# Reports\n");
  await fs.writeFile(path.join(skillDir, "templates", "weekly.md"), "## Week {{n}}\n");
});
afterAll(() => service.close());

function cli(args: string[], env: Record<string, string> = { SERVICE_URL: service.url, SERVICE_API_KEY: KEY_A }) {
  return new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    execFile(process.execPath, [BIN, ...args], { env: { PATH: process.env.PATH ?? "", ...env } }, (error, stdout, stderr) => {
      resolve({ code: error ? (error.code as number) : 0, stdout, stderr });
    });
  });
}

describe("skillenv CLI", () => {
  it("uploads a directory under its slugified name, then lists, gets and deletes it", async () => {
    const upload = await cli(["upload", skillDir]);
    expect(upload.stderr).toBe("");
    expect(upload.code).toBe(0);
    const uploaded = JSON.parse(upload.stdout);
    expect(uploaded).toMatchObject({ name: "my-report-writer", description: "Writes weekly reports.", fileCount: 2, changed: true });
    expect(uploaded.bytesSent).toBeGreaterThan(0);

    const again = JSON.parse((await cli(["upload", skillDir])).stdout);
    expect(again).toMatchObject({ changed: false, bytesSent: 0, contentHash: uploaded.contentHash });

    const list = JSON.parse((await cli(["list"])).stdout);
    expect(list.skills.map((skill: { name: string }) => skill.name)).toEqual(["my-report-writer"]);
    expect(JSON.parse((await cli(["get", "my-report-writer"])).stdout).contentHash).toBe(uploaded.contentHash);

    expect((await cli(["delete", "my-report-writer"])).code).toBe(0);
    const missing = await cli(["get", "my-report-writer"]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/^error skill_not_found: /);
  });

  it("lists versions, gets one, and rolls back; refuses a bad version number as a usage error and an unknown one by code", async () => {
    const dir = path.join(await fs.mkdtemp(path.join(os.tmpdir(), "skillenv-cli-versions-")), "versioned");
    await fs.mkdir(dir);
    await fs.writeFile(path.join(dir, "SKILL.md"), "---\ndescription: First.\n---\n");
    const first = JSON.parse((await cli(["upload", dir])).stdout);
    await fs.writeFile(path.join(dir, "SKILL.md"), "---\ndescription: Second.\n---\n");
    expect(JSON.parse((await cli(["upload", dir])).stdout)).toMatchObject({ version: 2, description: "Second." });

    const versions = JSON.parse((await cli(["versions", "versioned"])).stdout);
    expect(versions.versions.map((v: { version: number; current?: boolean }) => [v.version, v.current ?? false])).toEqual([
      [2, true],
      [1, false],
    ]);
    expect(JSON.parse((await cli(["get", "versioned", "--version", "1"])).stdout)).toMatchObject({ version: 1, contentHash: first.contentHash });

    const rolled = await cli(["rollback", "versioned", "1"]);
    expect(rolled.code).toBe(0);
    expect(JSON.parse(rolled.stdout)).toMatchObject({ changed: true, skill: { version: 3, contentHash: first.contentHash }, version: { restoredFrom: 1 } });

    const unknown = await cli(["rollback", "versioned", "9"]);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/^error skill_version_not_found: /);
    const bad = await cli(["rollback", "versioned", "one"]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("must be a version number");
    expect((await cli(["rollback", "versioned"])).code).toBe(2);
  });

  it("honours --name", async () => {
    const upload = await cli(["upload", skillDir, "--name", "weekly"]);
    expect(JSON.parse(upload.stdout).name).toBe("weekly");
  });

  it("reports an invalid skill with its stable code before uploading anything", async () => {
    const bad = await fs.mkdtemp(path.join(os.tmpdir(), "skillenv-cli-bad-"));
    await fs.writeFile(path.join(bad, "SKILL.md"), "no frontmatter here\n");
    const before = service.logs.length;
    const result = await cli(["upload", bad, "--name", "bad"]);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/^error frontmatter_missing: /);
    expect(await requestLogSince(service, before)).toEqual([]);
  });

  it("explains a missing key, a wrong key and a bad command", async () => {
    const noKey = await cli(["list"], { SERVICE_URL: service.url });
    expect(noKey).toMatchObject({ code: 2 });
    expect(noKey.stderr).toContain("SERVICE_API_KEY");
    const wrongKey = await cli(["list"], { SERVICE_URL: service.url, SERVICE_API_KEY: "wrong-key-000000000" });
    expect(wrongKey.code).toBe(1);
    expect(wrongKey.stderr).toMatch(/^error unauthenticated: /);
    const unknown = await cli(["frobnicate"]);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain("unknown command");
  });

  it.each([
    ["an unknown option", ["upload", "dir", "--bogus"], /^Unknown option '--bogus'/],
    ["an option without its value", ["upload", "dir", "--name", "-x"], /^Option '--name.*' argument is ambiguous/],
  ])("refuses %s as a usage error (exit 2), with the usage", async (_label, args, problem) => {
    const result = await cli(args);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(problem);
    expect(result.stderr).toContain("usage: skillenv <command>");
    expect(result.stderr).not.toContain("error unknown");
  });
});

describe("skillenv CLI errors carry a stable code", () => {
  const MiB = 1024 * 1024;

  /** A fresh skill directory with a valid SKILL.md, changed by `prepare`. */
  async function skillDirWith(prepare: (dir: string) => Promise<void>): Promise<string> {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), "skillenv-cli-codes-"));
    await fs.writeFile(path.join(dir, "SKILL.md"), "---\ndescription: A skill.\n---\n");
    await prepare(dir);
    return dir;
  }

  it.each([
    [
      "a SKILL.md that is not UTF-8",
      "frontmatter_invalid",
      (dir: string) => fs.writeFile(path.join(dir, "SKILL.md"), Buffer.from("---\ndescription: caf\xe9\n---\n", "latin1")),
    ],
    [
      "a file name that is not UTF-8",
      "bundle_path_invalid",
      (dir: string) => fs.writeFile(Buffer.concat([Buffer.from(`${dir}/caf`), Buffer.from([0xe9])]), "x"),
    ],
    ["a symbolic link", "bundle_special_entry", (dir: string) => fs.symlink("/etc/passwd", path.join(dir, "passwd"))],
    ["a directory that does not exist", "file_unreadable", (dir: string) => fs.rm(dir, { recursive: true })],
    ["an 11 MiB file", "bundle_entry_too_large", (dir: string) => fs.writeFile(path.join(dir, "big.bin"), new Uint8Array(11 * MiB))],
    [
      "54 MiB of files",
      "bundle_too_large",
      async (dir: string) => {
        for (let i = 0; i < 6; i++) await fs.writeFile(path.join(dir, `part-${i}.bin`), new Uint8Array(9 * MiB));
      },
    ],
  ])("refuses %s with %s before sending anything", async (_label, code, prepare) => {
    const dir = await skillDirWith(prepare);
    const before = service.logs.length;
    const result = await cli(["upload", dir, "--name", "refused"]);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(new RegExp(`^error ${code}: `));
    expect(await requestLogSince(service, before)).toEqual([]);
  });

  it("names an unreachable server's failure by its Connect code, unavailable", async () => {
    const result = await cli(["list"], { SERVICE_URL: "http://127.0.0.1:1", SERVICE_API_KEY: KEY_A });
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/^error unavailable: .*ECONNREFUSED/);
  });
});
