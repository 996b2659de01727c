import { constants } from "node:fs";
import * as fs from "node:fs/promises";
import { validateBundlePath } from "@skillenv/client/bundle";

/**
 * The service's own writes and removals inside a workspace that guests may be changing at the
 * same moment (a tool still running, a cancelled run's guest until its deadline). A guest can
 * plant symlinks and rename directories there, so checking a path and then using it would race:
 * every step here goes through the descriptor of a directory already opened, as
 * `/proc/self/fd/<fd>/<name>` (Linux), which the kernel resolves from that directory whatever has
 * been renamed or swapped around it since. Directories are opened with O_NOFOLLOW, so a symlink on
 * the way is refused, never followed.
 */

const DIRECTORY_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW;
const FILE_FLAGS = constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW;

/** Writes `bytes` at `relative` under `root`, making the directories on the way. */
export async function writeConfined(root: string, relative: string, bytes: Uint8Array): Promise<void> {
  const segments = checkedSegments(relative);
  await withParent(root, relative, segments, "make", async (parent) => {
    const file = await fs.open(under(parent, segments.at(-1)!), FILE_FLAGS, 0o600).catch((error: NodeJS.ErrnoException) => {
      if (error.code === "ELOOP") throw new ConfinementError(`${JSON.stringify(relative)} is a symlink`);
      // The directory held open was removed meanwhile (another one renamed over it).
      if (error.code === "ENOENT") throw new ConfinementError(`${JSON.stringify(relative)}: its directory was removed while it was being written`);
      throw error;
    });
    try {
      await file.writeFile(bytes);
    } finally {
      await file.close();
    }
  });
}

/**
 * Removes whatever is at `relative` under `root` (a directory with everything in it, a file, or a
 * symlink, which is removed itself and never followed), if anything is. The entry is renamed to
 * `trash`, a path outside the workspace that guests cannot reach, and removed from there; a
 * failure to remove the trash leaves it for the caller to collect (the workspace is already right).
 */
export async function removeConfined(root: string, relative: string, trash: string): Promise<void> {
  const segments = checkedSegments(relative);
  const moved = await withParent(root, relative, segments, "find", (parent) =>
    // rename() acts on the last component itself: a symlink there is moved, not its target.
    fs.rename(under(parent, segments.at(-1)!), trash).then(
      () => true,
      (error: NodeJS.ErrnoException) => {
        if (error.code === "ENOENT") return false;
        throw error;
      },
    ),
  );
  // fs.rm unlinks symlinks it meets (the moved entry included) and never descends into them.
  if (moved) await fs.rm(trash, { recursive: true, force: true, maxRetries: 3 }).catch(() => undefined);
}

/**
 * Opens the directories of `segments` (all but the last) one below the other, each through its
 * parent's descriptor, and calls `use` with the last one's. `make` creates missing directories;
 * `find` answers undefined without calling `use` when one is missing.
 */
async function withParent<T>(
  root: string,
  relative: string,
  segments: readonly string[],
  missing: Missing,
  use: (parent: number) => Promise<T>,
): Promise<T | undefined> {
  const opened: fs.FileHandle[] = [await fs.open(root, DIRECTORY_FLAGS)];
  try {
    for (const segment of segments.slice(0, -1)) {
      const next = await openBelow(opened.at(-1)!.fd, segment, relative, missing);
      if (next === undefined) return undefined;
      opened.push(next);
    }
    return await use(opened.at(-1)!.fd);
  } finally {
    await Promise.all(opened.map((handle) => handle.close()));
  }
}

type Missing = "make" | "find";

/** The directory `segment` inside the one open as `parent`, made first (`make`); undefined when missing (`find`). */
async function openBelow(parent: number, segment: string, relative: string, missing: Missing): Promise<fs.FileHandle | undefined> {
  const path = under(parent, segment);
  // ENOENT once the parent is open, or once this directory was made: something in the workspace
  // moved or replaced it meanwhile.
  const moved = () => new ConfinementError(`${JSON.stringify(relative)}: ${segment} was moved while it was being written`);
  if (missing === "make") {
    await fs.mkdir(path, { mode: 0o700 }).catch((error: NodeJS.ErrnoException) => {
      if (error.code === "ENOENT") throw moved();
      if (error.code !== "EEXIST") throw error;
    });
  }
  return fs.open(path, DIRECTORY_FLAGS).catch((error: NodeJS.ErrnoException) => {
    if (error.code === "ENOENT" && missing === "find") return undefined;
    if (error.code === "ELOOP" || error.code === "ENOTDIR") throw new ConfinementError(`${JSON.stringify(relative)}: ${segment} is not a directory`);
    if (error.code === "ENOENT") throw moved();
    throw error;
  });
}

/** `name` inside the directory open as `fd`, resolved from that directory whatever its path is now. */
function under(fd: number, name: string): string {
  return `/proc/self/fd/${fd}/${name}`;
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
