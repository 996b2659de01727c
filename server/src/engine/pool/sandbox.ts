// Invocation-local directories, created by the main thread before dispatch and removed by it
// after the receipt, whatever happened to the worker (crash, deadline kill).
import { randomBytes } from "node:crypto";
import { mkdir, mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { isEnvVarName } from "../../config/index.ts";
import type { ServiceGrants } from "../grants.ts";
import type { FailureBody } from "./protocol.ts";
import type { SecretSource } from "./types.ts";

export interface Sandbox {
  /** The invocation's directory, holding scratch/ and secrets/. */
  dir: string;
  scratch?: string;
  secrets?: string;
}

/**
 * The directory under which this pool creates invocation directories:
 * `<dataDir>/invocations/<pid>-<random>/`. Directories left by pools of processes that no longer
 * exist (a crash, kill -9) are removed first.
 */
export async function sandboxRoot(dataDir: string): Promise<string> {
  const parent = join(dataDir, "invocations");
  await mkdir(parent, { recursive: true, mode: 0o700 });
  for (const entry of await readdir(parent)) {
    const pid = Number(entry.split("-")[0]);
    if (Number.isInteger(pid) && pid > 0 && pid !== process.pid && !processAlive(pid)) {
      await rm(join(parent, entry), { recursive: true, force: true });
    }
  }
  const root = join(parent, `${process.pid}-${randomBytes(4).toString("hex")}`);
  await mkdir(root, { mode: 0o700 });
  return root;
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * The values of the granted secrets, read from `source` now, at dispatch. Each name becomes a
 * file name under secrets/, which the environment-variable-name rule keeps one plain segment.
 */
export function readSecrets(names: readonly string[], source: SecretSource | undefined): Map<string, string> | FailureBody {
  const values = new Map<string, string>();
  for (const name of names) {
    if (!isEnvVarName(name)) return { code: "invalid_argument", message: `secret ${JSON.stringify(name)} is not an environment variable name` };
    const value = source?.[name];
    if (value === undefined) return { code: "secret_unavailable", message: `granted secret ${name} is not set` };
    values.set(name, value);
  }
  return values;
}

export function needsSandbox(grants: ServiceGrants): boolean {
  return grants.filesystem.scratch !== undefined || grants.secrets.length > 0;
}

/**
 * `scratch/` (empty, 0700) when the grant has one, whatever its mode: the worker makes a "read"
 * scratch read-only. `secrets/` (0700) holding one 0400 file per secret value; the guest sees it
 * through a read-only preopen.
 */
export async function createSandbox(root: string, invocation: number, grants: ServiceGrants, secrets: ReadonlyMap<string, string>): Promise<Sandbox> {
  const sandbox: Sandbox = { dir: await mkdtemp(join(root, `${invocation}-`)) };
  try {
    if (grants.filesystem.scratch) {
      sandbox.scratch = join(sandbox.dir, "scratch");
      await mkdir(sandbox.scratch, { mode: 0o700 });
    }
    if (secrets.size > 0) sandbox.secrets = await writeSecrets(sandbox.dir, secrets);
  } catch (error) {
    await removeSandbox(sandbox);
    throw error;
  }
  return sandbox;
}

async function writeSecrets(parent: string, secrets: ReadonlyMap<string, string>): Promise<string> {
  const dir = join(parent, "secrets");
  await mkdir(dir, { mode: 0o700 });
  await Promise.all([...secrets].map(([name, value]) => writeFile(join(dir, name), value, { mode: 0o400, flag: "wx" })));
  return dir;
}

/**
 * Removes an invocation's directories. Never rejects: a worker being terminated may still be
 * writing for a few milliseconds (hence the retries); whatever is left is removed with the pool's
 * root at close, or by the next start after a crash.
 */
export async function removeSandbox(sandbox: Sandbox | undefined): Promise<void> {
  if (!sandbox) return;
  try {
    await rm(sandbox.dir, { recursive: true, force: true, maxRetries: 5, retryDelay: 50 });
  } catch {
    // left for close() / the next start
  }
}
