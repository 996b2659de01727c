// scripts/setup.sh, the set-up that npm test and CI run first, on the machines it meets: the
// commands it calls (dpkg-query, id, apt-get, bwrap) are stand-ins on a PATH of their own, which
// say what they were asked and answer as each machine would.
import { execFile } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const ROOT = path.resolve(import.meta.dirname, "../..");
const SETUP = path.join(ROOT, "scripts/setup.sh");

let bin: string;
let calls: string;

/** A stand-in command: a bash script that appends its name and arguments to the calls file, then runs `body`. */
function standIn(name: string, body: string): void {
  const file = path.join(bin, name);
  fs.writeFileSync(file, `#!/bin/bash\necho "${name} $*" >> "$CALLS"\n${body}\n`);
  fs.chmodSync(file, 0o755);
}

beforeAll(() => {
  bin = fs.mkdtempSync(path.join(os.tmpdir(), "setup-test-"));
  calls = path.join(bin, "calls");
  // dpkg-query -W -f=FORMAT PACKAGE...: answers "name=installed " for each package not in $MISSING.
  standIn("dpkg-query", 'shift 2; for p in "$@"; do case " $MISSING " in *" $p "*) ;; *) printf "%s=installed " "$p";; esac; done');
  standIn("id", 'echo "$UID_IS"');
  standIn("apt-get", "true");
  standIn("bwrap", 'if [ -n "$BWRAP_FAILS" ]; then echo "$BWRAP_FAILS" >&2; exit 1; fi');
});
afterAll(() => fs.rmSync(bin, { recursive: true, force: true }));

interface Machine {
  uid?: number;
  missing?: string[];
  bwrapFails?: string;
  /** Stand-ins to leave out, as a machine without them. */
  without?: string[];
}

async function setUp(machine: Machine): Promise<{ code: number; stderr: string; calls: string[] }> {
  fs.writeFileSync(calls, "");
  const path_ = fs.mkdtempSync(path.join(bin, "path-"));
  for (const name of fs.readdirSync(bin)) {
    if (name !== "calls" && !name.startsWith("path-") && !machine.without?.includes(name)) fs.symlinkSync(path.join(bin, name), path.join(path_, name));
  }
  const env = {
    PATH: path_,
    CALLS: calls,
    UID_IS: String(machine.uid ?? 0),
    MISSING: (machine.missing ?? []).join(" "),
    BWRAP_FAILS: machine.bwrapFails ?? "",
  };
  const { code, stderr } = await new Promise<{ code: number; stderr: string }>((resolve) => {
    execFile("/bin/bash", [SETUP], { env }, (error, _stdout, stderr) => resolve({ code: error ? Number(error.code) : 0, stderr }));
  });
  return {
    code,
    stderr,
    calls: fs
      .readFileSync(calls, "utf8")
      .split("\n")
      .filter((line) => line && !line.startsWith("dpkg-query") && !line.startsWith("id ")),
  };
}

describe("scripts/setup.sh", () => {
  it("on a machine that has every package, installs nothing and tries bubblewrap", async () => {
    const { code, calls } = await setUp({});
    expect(code).toBe(0);
    expect(calls).toEqual([expect.stringMatching(/^bwrap .* true$/)]);
  });

  it("as root, installs what is missing with apt-get before anything else", async () => {
    const { code, stderr, calls } = await setUp({ missing: ["chromium", "python3-yaml"] });
    expect(code).toBe(0);
    expect(stderr).toContain("installing chromium python3-yaml");
    expect(calls).toEqual(["apt-get update -qq", "apt-get install -y -qq chromium python3-yaml", expect.stringMatching(/^bwrap /)]);
  });

  it("not as root, stops at once naming the command to run", async () => {
    const { code, stderr, calls } = await setUp({ uid: 1000, missing: ["bubblewrap", "openssl"] });
    expect(code).toBe(1);
    expect(stderr).toContain("sudo apt-get update && sudo apt-get install -y bubblewrap openssl");
    expect(calls).toEqual([]);
  });

  it("without dpkg (another OS), stops at once naming every package", async () => {
    const { code, stderr, calls } = await setUp({ without: ["dpkg-query"] });
    expect(code).toBe(1);
    expect(stderr).toMatch(/apt-get install -y bubblewrap chromium openssl \S/);
    expect(calls).toEqual([]);
  });

  it("stops where bubblewrap is installed but cannot make its sandbox, saying why", async () => {
    const { code, stderr } = await setUp({ bwrapFails: "bwrap: No permissions to creating new namespace" });
    expect(code).toBe(1);
    expect(stderr).toContain("bubblewrap is installed but cannot make a sandbox here: bwrap: No permissions to creating new namespace");
  });

  it("is what npm test runs first and what CI runs, which installs no package of its own", () => {
    const scripts = (JSON.parse(fs.readFileSync(path.join(ROOT, "package.json"), "utf8")) as { scripts: Record<string, string> }).scripts;
    expect(scripts.pretest).toMatch(/^bash scripts\/setup\.sh && /);
    const ci = fs.readFileSync(path.join(ROOT, ".ci/run"), "utf8");
    expect(ci).toContain("step bash scripts/setup.sh");
    expect(ci).not.toMatch(/apt-get|dpkg/);
  });
});
