import { readdir, readFile, rm } from "node:fs/promises";
import * as path from "node:path";

/** How long a server may drain after SIGTERM before it is killed. */
const DRAIN_MS = 15_000;

/**
 * Stops the servers the snippets of a run started (preamble.sh records each one's process group
 * in `<dir>/<name>.pid`): SIGTERM, then SIGKILL when one has not exited after DRAIN_MS. Safe to
 * call again, and after the run itself died.
 */
export async function stopServers(dir: string): Promise<void> {
  const entries = await readdir(dir).catch(() => [] as string[]);
  const pidFiles = entries.filter((entry) => entry.endsWith(".pid")).map((entry) => path.join(dir, entry));
  await Promise.all(
    pidFiles.map(async (pidFile) => {
      const group = Number(await readFile(pidFile, "utf8").catch(() => ""));
      if (Number.isInteger(group) && group > 1) await stopGroup(group);
      await rm(pidFile, { force: true });
    }),
  );
}

async function stopGroup(group: number): Promise<void> {
  if (!signal(group, "SIGTERM")) return;
  const deadline = Date.now() + DRAIN_MS;
  while (signal(group, 0)) {
    if (Date.now() > deadline) {
      signal(group, "SIGKILL");
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Signals a process group; false when it is gone. */
function signal(group: number, name: NodeJS.Signals | 0): boolean {
  try {
    process.kill(-group, name);
    return true;
  } catch {
    return false;
  }
}
