import { constants } from "node:fs";
import * as fs from "node:fs/promises";
import * as path from "node:path";
import { validateBundlePath } from "@skillenv/client/bundle";

/**
 * Writes `bytes` at `relative` under `root`, where guests of the environment may have written
 * before: no component of the path may be a symlink (each directory is checked with lstat after
 * it is made, and the file is opened with O_NOFOLLOW), so a link planted by a guest cannot send
 * the service's write outside the workspace. `relative` must pass the bundle path rules.
 */
export async function writeConfined(root: string, relative: string, bytes: Uint8Array): Promise<void> {
  const segments = checkedSegments(relative);
  let dir = root;
  for (const segment of segments.slice(0, -1)) {
    dir = path.join(dir, segment);
    await fs.mkdir(dir, { mode: 0o700 }).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== "EEXIST") throw error;
    });
    if (!(await fs.lstat(dir)).isDirectory()) throw new ConfinementError(`${JSON.stringify(relative)}: ${segment} is not a directory`);
  }
  const flags = constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW;
  const file = await fs.open(path.join(dir, segments.at(-1)!), flags, 0o600).catch((error: NodeJS.ErrnoException) => {
    throw error.code === "ELOOP" ? new ConfinementError(`${JSON.stringify(relative)} is a symlink`) : error;
  });
  try {
    await file.writeFile(bytes);
  } finally {
    await file.close();
  }
}

/**
 * Removes whatever is at `relative` under `root` (a directory with everything in it, a file, or a
 * symlink, which is removed itself and never followed), if anything is. Each directory on the way
 * must be a directory, not a symlink (checked with lstat); a missing one means there is nothing to
 * remove. The entry is first renamed to `trash`, a path outside the workspace on the same file
 * system that guests cannot reach, and removed from there: a guest acting meanwhile cannot swap a
 * directory being emptied for a symlink out of the workspace. For a top-level entry the rename's
 * only parent is `root` itself, so no race is left; a nested entry's directories on the way are
 * checked as writeConfined checks them. `relative` must pass the bundle path rules.
 */
export async function removeConfined(root: string, relative: string, trash: string): Promise<void> {
  const segments = checkedSegments(relative);
  let dir = root;
  for (const segment of segments.slice(0, -1)) {
    dir = path.join(dir, segment);
    const stat = await fs.lstat(dir).catch((error: NodeJS.ErrnoException) => {
      if (error.code === "ENOENT") return undefined;
      throw error;
    });
    if (stat === undefined) return;
    if (!stat.isDirectory()) throw new ConfinementError(`${JSON.stringify(relative)}: ${segment} is not a directory`);
  }
  // rename() acts on the last component itself: a symlink there is moved, not its target.
  const moved = await fs.rename(path.join(dir, segments.at(-1)!), trash).then(
    () => true,
    (error: NodeJS.ErrnoException) => {
      if (error.code === "ENOENT") return false;
      throw error;
    },
  );
  // fs.rm unlinks symlinks it meets (the moved entry included) and never descends into them.
  if (moved) await fs.rm(trash, { recursive: true, force: true, maxRetries: 3 });
}

/** The "/"-separated segments of `relative`, once it passes the bundle path rules. */
function checkedSegments(relative: string): string[] {
  const problem = validateBundlePath(relative);
  if (problem !== undefined) throw new ConfinementError(`${JSON.stringify(relative)}: ${problem}`);
  return relative.split("/");
}

/** A path that would leave the workspace. */
export class ConfinementError extends Error {
  override name = "ConfinementError";
}
