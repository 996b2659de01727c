/**
 * Files inside a binding's workspace, never outside it. Commands run in the same directory and
 * may plant symlinks, so no symlink is ever followed: every directory on the way is checked with
 * lstat and the file is opened with O_NOFOLLOW. A command racing these checks (swapping a checked
 * directory for a symlink) is caught after opening: the opened file's real path must still be in
 * the workspace before a byte is read or written, or an entry is removed.
 */
import { constants, type Stats } from "node:fs";
import * as fs from "node:fs/promises";
import * as path from "node:path";

export type PathErrorCode = "invalid_path" | "symlink_refused" | "not_a_directory" | "not_a_file" | "not_found" | "outside_workspace";

export class WorkspacePathError extends Error {
  readonly code: PathErrorCode;

  constructor(code: PathErrorCode, message: string) {
    super(message);
    this.code = code;
  }
}

const DIRECTORY_MODE = 0o755;
/** Bundles carry no executable bit (docs/bundle-format.md): scripts are run as `bash x.sh`, `python3 x.py`. */
const FILE_MODE = 0o644;

/**
 * The segments of a path as the protocol allows it: relative, "/"-separated, no empty, "." or
 * ".." segments. The service validates staged paths too; a tool's input comes from a model.
 */
export function pathSegments(relative: string): string[] {
  const segments = relative.split("/");
  const valid = relative !== "" && !relative.includes("\0") && segments.every((segment) => segment !== "" && segment !== "." && segment !== "..");
  if (!valid) throw new WorkspacePathError("invalid_path", `"${relative}" is not a relative path of non-empty segments without "." or ".."`);
  return segments;
}

/** Writes (or replaces) a file, making missing directories; returns the bytes written. */
export async function writeInWorkspace(workspace: string, relative: string, content: Uint8Array): Promise<number> {
  const file = await openInWorkspace(workspace, relative, constants.O_WRONLY | constants.O_CREAT);
  try {
    await file.truncate(0);
    await file.writeFile(content);
    return content.length;
  } finally {
    await file.close();
  }
}

/**
 * Removes what is at `relative`, if anything is: a directory with everything in it, a file, or a
 * symlink, which is removed itself and never followed. The directories on the way are checked as
 * for a write (a missing one: nothing to remove), then the parent is opened and its real path must
 * be in the workspace; the entry is renamed through that open directory (its /proc/self/fd path,
 * which no later swap of a directory on the way can redirect) to `trash`, a path beside the
 * workspace, in the binding's directory, and removed from there by path.
 *
 * Only while no command of the binding runs (the caller holds the binding alone, lock.ts): the
 * rename does not stop a command whose working directory, or an open directory, is inside the
 * moved tree from reaching it, and a command that swapped a directory being emptied for a symlink
 * would have fs.rm remove what the link points to, outside the workspace.
 *
 * Removing the trash is best-effort: the directory is already out of the workspace, and what is
 * left (say, a directory fs.rm could not empty) stays in the binding's directory, which Teardown
 * removes.
 */
export async function removeInWorkspace(workspace: string, relative: string, trash: string): Promise<void> {
  const segments = pathSegments(relative);
  let directory = workspace;
  await requireDirectory(directory, relative, false);
  for (const segment of segments.slice(0, -1)) {
    directory = path.join(directory, segment);
    const stat = await lstatOrUndefined(directory);
    if (stat === undefined) return;
    checkDirectory(stat, relative);
  }
  const parent = await open(directory, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW, relative);
  try {
    const real = await fs.readlink(`/proc/self/fd/${parent.fd}`);
    if (real !== workspace && !real.startsWith(workspace + path.sep))
      throw new WorkspacePathError("outside_workspace", `"${relative}" resolved outside the workspace`);
    try {
      // rename() acts on the last component itself: a symlink there is moved, not its target.
      await fs.rename(`/proc/self/fd/${parent.fd}/${segments.at(-1)!}`, trash);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return;
      throw error;
    }
  } finally {
    await parent.close();
  }
  await removeTree(trash).catch((error: unknown) => {
    console.error(`shell-extension: could not remove ${trash} (Teardown will try again):`, error instanceof Error ? error.message : error);
  });
}

/**
 * Removes a tree no command of the binding runs in any more (a Stage's trash, a binding's
 * directory at Teardown), unlinking the symlinks in it, never following them. A command may have
 * left a directory that cannot be read or emptied (chmod 000), which stops fs.rm unless the
 * extension runs as root: then every directory is made the owner's again (0700) and the removal
 * is tried once more. (Without bubblewrap a command that left its process group may still run;
 * it could change its user's files' modes itself.)
 */
export async function removeTree(target: string): Promise<void> {
  // fs.rm unlinks the symlinks it meets and never descends into them.
  const remove = () => fs.rm(target, { recursive: true, force: true, maxRetries: 3 });
  try {
    await remove();
    return;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code !== "EACCES" && code !== "EPERM") throw error;
  }
  await reopenDirectories(target);
  await remove();
}

/**
 * chmod 0700 on `directory` and every directory in it; lstat first, so no symlink is followed.
 * The failed fs.rm may still be removing other branches (it rejects at the first error): what
 * vanishes meanwhile is skipped.
 */
async function reopenDirectories(directory: string): Promise<void> {
  const stat = await lstatOrUndefined(directory);
  if (stat === undefined || !stat.isDirectory()) return;
  try {
    await fs.chmod(directory, 0o700);
    for (const entry of await fs.readdir(directory, { withFileTypes: true })) {
      if (entry.isDirectory()) await reopenDirectories(path.join(directory, entry.name));
    }
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
  }
}

export interface FileRead {
  content: Buffer;
  /** Whether the file is longer than the limit and only its start was read. */
  truncated: boolean;
}

/** Reads at most `limit` bytes from the start of a file. */
export async function readInWorkspace(workspace: string, relative: string, limit: number): Promise<FileRead> {
  const file = await openInWorkspace(workspace, relative, constants.O_RDONLY);
  try {
    const { size } = await file.stat();
    const content = Buffer.alloc(Math.min(size, limit));
    let filled = 0;
    while (filled < content.length) {
      const { bytesRead } = await file.read(content, filled, content.length - filled, filled);
      if (bytesRead === 0) break;
      filled += bytesRead;
    }
    return { content: content.subarray(0, filled), truncated: size > limit };
  } finally {
    await file.close();
  }
}

async function openInWorkspace(workspace: string, relative: string, flags: number): Promise<fs.FileHandle> {
  const segments = pathSegments(relative);
  const create = (flags & constants.O_CREAT) !== 0;
  let directory = workspace;
  await requireDirectory(directory, relative, false);
  for (const segment of segments.slice(0, -1)) {
    directory = path.join(directory, segment);
    await requireDirectory(directory, relative, create);
  }
  // O_NONBLOCK: opening a FIFO a command planted would otherwise wait for a peer forever.
  const file = await open(path.join(workspace, ...segments), flags | constants.O_NOFOLLOW | constants.O_NONBLOCK, relative);
  try {
    await requireRegularFileInside(file, workspace, relative);
    return file;
  } catch (error) {
    await file.close();
    throw error;
  }
}

async function requireDirectory(directory: string, relative: string, create: boolean): Promise<void> {
  let stat = await lstatOrUndefined(directory);
  if (stat === undefined && create) {
    await fs.mkdir(directory, { mode: DIRECTORY_MODE }).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== "EEXIST") throw error;
    });
    stat = await lstatOrUndefined(directory);
  }
  if (stat === undefined) throw new WorkspacePathError("not_found", `"${relative}": a directory on the way does not exist`);
  checkDirectory(stat, relative);
}

/** A directory on the way to `relative` must be a directory itself, not a symlink to one. */
function checkDirectory(stat: Stats, relative: string): void {
  if (stat.isSymbolicLink()) throw new WorkspacePathError("symlink_refused", `"${relative}": a directory on the way is a symlink`);
  if (!stat.isDirectory()) throw new WorkspacePathError("not_a_directory", `"${relative}": a component on the way is not a directory`);
}

async function lstatOrUndefined(target: string): Promise<Stats | undefined> {
  try {
    return await fs.lstat(target);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
}

async function open(target: string, flags: number, relative: string): Promise<fs.FileHandle> {
  try {
    return await fs.open(target, flags, FILE_MODE);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ELOOP") throw new WorkspacePathError("symlink_refused", `"${relative}" is a symlink`);
    if (code === "ENOENT") throw new WorkspacePathError("not_found", `"${relative}" does not exist`);
    if (code === "EISDIR") throw new WorkspacePathError("not_a_file", `"${relative}" is a directory`);
    if (code === "ENXIO") throw new WorkspacePathError("not_a_file", `"${relative}" is not a regular file`);
    throw error;
  }
}

/** Linux names an open file's real path in /proc/self/fd: the check no path race can fool. */
async function requireRegularFileInside(file: fs.FileHandle, workspace: string, relative: string): Promise<void> {
  if (!(await file.stat()).isFile()) throw new WorkspacePathError("not_a_file", `"${relative}" is not a regular file`);
  const real = await fs.readlink(`/proc/self/fd/${file.fd}`);
  if (!real.startsWith(workspace + path.sep)) throw new WorkspacePathError("outside_workspace", `"${relative}" resolved outside the workspace`);
}
