// Measures a host directory tree by the definition of usage.ts, for an account's starting point
// or to check one.
import { closeSync, constants, lstatSync, openSync, readdirSync } from "node:fs";
import { errnoOf } from "./error-code.ts";
import { DESCEND_FLAGS, itself } from "./path.ts";
import { entryUsage } from "./usage.ts";

/** A directory being measured: its fd and the subdirectories of it still to visit. */
interface Level {
  fd: number;
  subdirectories: Buffer[];
}

/**
 * The usage of everything below `hostDir`. Safe on a tree a guest is changing: every entry is
 * reached from its directory's fd (names as raw bytes), never through a symlink, and an entry that
 * vanishes or turns into something else meanwhile is counted as what lstat saw, or not at all.
 * Holds one fd per level of depth.
 */
export function measureUsage(hostDir: string): number {
  const counted = new Set<string>();
  let total = 0;
  const levels: Level[] = [];
  // Held in `levels` before it is read, so that the finally below closes it whatever happens.
  const enter = (fd: number) => {
    const subdirectories: Buffer[] = [];
    levels.push({ fd, subdirectories });
    for (const name of readdirSync(itself(fd), { encoding: "buffer" })) {
      const stats = tolerant(() => lstatSync(entryPath(fd, name), { bigint: true }));
      if (!stats) continue;
      total += entryUsage(stats, counted);
      if (stats.isDirectory()) subdirectories.push(name);
    }
  };
  try {
    enter(openSync(hostDir, constants.O_RDONLY | constants.O_DIRECTORY));
    while (levels.length > 0) {
      const level = levels[levels.length - 1]!;
      const next = level.subdirectories.pop();
      if (next === undefined) {
        closeSync(levels.pop()!.fd);
        continue;
      }
      const fd = tolerant(() => openSync(entryPath(level.fd, next), DESCEND_FLAGS));
      if (fd !== undefined) enter(fd);
    }
  } finally {
    for (const level of levels) closeSync(level.fd);
  }
  return total;
}

function entryPath(dirFd: number, name: Buffer): Buffer {
  return Buffer.concat([Buffer.from(`${itself(dirFd)}/`), name]);
}

/** The result, or undefined when the entry was removed or replaced by a symlink meanwhile. */
function tolerant<T>(action: () => T): T | undefined {
  try {
    return action();
  } catch (error) {
    const errno = errnoOf(error);
    if (errno === "ENOENT" || errno === "ELOOP" || errno === "ENOTDIR") return undefined;
    throw error;
  }
}
