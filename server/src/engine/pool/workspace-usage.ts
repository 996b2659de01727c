import { constants } from "node:fs";
import { lstat, open, readdir, type FileHandle } from "node:fs/promises";

/** What one directory entry (file, directory, symlink, hard link) counts for, beyond file bytes. */
export const ENTRY_BYTES = 4096;
/**
 * Directories deeper than this are counted as entries but not entered: the walk holds one
 * descriptor per level. Invocations' own writes are counted as they happen whatever the depth;
 * only a re-measure (after staging, or a worker lost mid-call) stops here.
 */
const MAX_DEPTH = 512;

/**
 * The usage of a directory tree, as quotas count it: the apparent size of its regular files (a
 * hard-linked file once) plus ENTRY_BYTES per entry below the root. The tree belongs to guests,
 * so it is walked through directory descriptors, each opened with O_NOFOLLOW relative to its
 * parent's (as confined-write.ts does): a symlink is counted, never followed, and a directory
 * swapped for a symlink mid-walk is skipped, not entered.
 */
export async function measureUsage(root: string): Promise<number> {
  const counted = { total: 0, inodes: new Set<string>() };
  const handle = await open(root, constants.O_RDONLY | constants.O_DIRECTORY);
  try {
    await measureDirectory(handle, 1, counted);
  } finally {
    await handle.close();
  }
  return counted.total;
}

async function measureDirectory(directory: FileHandle, depth: number, counted: { total: number; inodes: Set<string> }): Promise<void> {
  const base = `/proc/self/fd/${directory.fd}`;
  for (const entry of await readdir(base, { withFileTypes: true })) {
    const path = `${base}/${entry.name}`;
    const stats = await lstat(path, { bigint: true }).catch(() => undefined);
    if (!stats) continue;
    counted.total += ENTRY_BYTES;
    if (stats.isFile()) {
      if (stats.nlink > 1n) {
        const inode = `${stats.dev}:${stats.ino}`;
        if (counted.inodes.has(inode)) continue;
        counted.inodes.add(inode);
      }
      counted.total += Number(stats.size);
    } else if (stats.isDirectory() && depth < MAX_DEPTH) {
      const child = await open(path, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW).catch(() => undefined);
      if (!child) continue;
      try {
        await measureDirectory(child, depth + 1, counted);
      } finally {
        await child.close();
      }
    }
  }
}
