// Measures a host directory tree by the definition of usage.ts: the starting point of a quota
// account (the pool's ledger of a binding's /workspace), or a check of one. Asynchronous, so that
// a large tree never holds the server's event loop.
import { constants } from "node:fs";
import { lstat, open, readdir, type FileHandle } from "node:fs/promises";
import { errnoOf } from "./error-code.ts";
import { DESCEND_FLAGS, itself } from "./path.ts";
import { entryUsage } from "./usage.ts";

/** A directory being measured: its handle and the subdirectories of it still to visit. */
interface Level {
  handle: FileHandle;
  subdirectories: Buffer[];
}

/**
 * The usage of everything below `hostDir`. Safe on a tree a guest is changing: every entry is
 * reached from its directory's fd (names as raw bytes), never through a symlink, and an entry that
 * vanishes or turns into something else meanwhile is counted as what lstat saw, or not at all.
 * Holds one fd per level of depth.
 */
export async function measureUsage(hostDir: string): Promise<number> {
  const counted = new Set<string>();
  let total = 0;
  const levels: Level[] = [];
  // Held in `levels` before it is read, so that the finally below closes it whatever happens.
  const enter = async (handle: FileHandle) => {
    const subdirectories: Buffer[] = [];
    levels.push({ handle, subdirectories });
    for (const name of await readdir(itself(handle.fd), { encoding: "buffer" })) {
      const stats = await tolerant(() => lstat(entryPath(handle.fd, name), { bigint: true }));
      if (!stats) continue;
      total += entryUsage(stats, counted);
      if (stats.isDirectory()) subdirectories.push(name);
    }
  };
  try {
    await enter(await open(hostDir, constants.O_RDONLY | constants.O_DIRECTORY));
    while (levels.length > 0) {
      const level = levels[levels.length - 1]!;
      const next = level.subdirectories.pop();
      if (next === undefined) {
        await levels.pop()!.handle.close();
        continue;
      }
      const handle = await tolerant(() => open(entryPath(level.handle.fd, next), DESCEND_FLAGS));
      if (handle !== undefined) await enter(handle);
    }
  } finally {
    await Promise.all(levels.map((level) => level.handle.close()));
  }
  return total;
}

function entryPath(dirFd: number, name: Buffer): Buffer {
  return Buffer.concat([Buffer.from(`${itself(dirFd)}/`), name]);
}

/** The result, or undefined when the entry was removed or replaced by a symlink meanwhile. */
async function tolerant<T>(action: () => Promise<T>): Promise<T | undefined> {
  try {
    return await action();
  } catch (error) {
    const errno = errnoOf(error);
    if (errno === "ENOENT" || errno === "ELOOP" || errno === "ENOTDIR") return undefined;
    throw error;
  }
}
