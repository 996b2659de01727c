import * as fs from "node:fs/promises";

/**
 * Resolves once `holds()` is true, checking it at once and again on every change inside `dir`
 * (inotify on Linux): a wait for what a server writes that depends on no clock. The test's own
 * timeout bounds it.
 */
export async function whenChangedIn(dir: string, holds: () => Promise<boolean>): Promise<void> {
  const stop = new AbortController();
  // Watching starts before the first check, so a change between the two is not missed.
  const changes = fs.watch(dir, { signal: stop.signal });
  try {
    if (await holds()) return;
    for await (const _ of changes) if (await holds()) return;
  } finally {
    stop.abort();
  }
}

/** The number of non-empty lines of `file`, 0 when it does not exist. */
export async function lineCount(file: string): Promise<number> {
  return (await fs.readFile(file, "utf8").catch(() => "")).split("\n").filter(Boolean).length;
}
