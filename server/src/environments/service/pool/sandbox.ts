// Invocation-local directories, created by the main thread before dispatch and removed by it
// after the receipt, whatever happened to the worker (crash, deadline kill).
import { randomBytes } from "node:crypto";
import { mkdir, mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { RuntimeGrants } from "./types.ts";

/** Secret names are environment variable names: one plain path segment each. */
const SECRET_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;

export interface SandboxDirs {
  /** The invocation's directory (holds scratch/ and secrets/); undefined when none was needed. */
  dir?: string;
  scratchPath?: string;
  secretsPath?: string;
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

export function needsSandbox(grants: RuntimeGrants): boolean {
  return grants.scratch === true || Object.keys(grants.secrets ?? {}).length > 0;
}

/**
 * `scratch/` (empty, 0700) when granted; `secrets/` (0700) holding one 0400 file per granted
 * secret. The guest sees secrets through a read-only preopen.
 */
export async function createSandbox(root: string, invocation: number, grants: RuntimeGrants): Promise<SandboxDirs> {
  const secrets = Object.entries(grants.secrets ?? {});
  for (const [name] of secrets) {
    if (!SECRET_NAME.test(name)) throw new Error(`secret name ${JSON.stringify(name)} is not an environment variable name`);
  }
  const dir = await mkdtemp(join(root, `${invocation}-`));
  const dirs: SandboxDirs = { dir };
  try {
    if (grants.scratch) {
      dirs.scratchPath = join(dir, "scratch");
      await mkdir(dirs.scratchPath, { mode: 0o700 });
    }
    if (secrets.length > 0) {
      dirs.secretsPath = join(dir, "secrets");
      await mkdir(dirs.secretsPath, { mode: 0o700 });
      await Promise.all(secrets.map(([name, value]) => writeFile(join(dirs.secretsPath!, name), value, { mode: 0o400, flag: "wx" })));
    }
  } catch (error) {
    await removeSandbox(dirs);
    throw error;
  }
  return dirs;
}

/**
 * Removes an invocation's directories. Never rejects: a worker being terminated may still be
 * writing for a few milliseconds (hence the retries); whatever is left is removed with the pool's
 * root at close, or by the next start after a crash.
 */
export async function removeSandbox(dirs: SandboxDirs | undefined): Promise<void> {
  if (!dirs?.dir) return;
  try {
    await rm(dirs.dir, { recursive: true, force: true, maxRetries: 5, retryDelay: 50 });
  } catch {
    // left for close() / the next start
  }
}
