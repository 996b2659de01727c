// Guest paths taken apart, and the one way a name is reached on the host: through the descriptor
// of the directory that holds it.
import { constants, lstatSync, type BigIntStats } from "node:fs";
import { errnoOf } from "./error-code.ts";

/** How a directory is opened below another: never through a symlink, only if it is a directory. */
export const DESCEND_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW;

/** Longest guest path accepted, in UTF-8 bytes (Linux's PATH_MAX). */
const MAX_PATH_BYTES = 4096;

/** A relative path as segments: no "" and no "." (they change nothing), ".." kept. */
export interface Segments {
  names: string[];
  /** The path ends in "/", "/." or "/..": its last name must be a directory (a symlink there is followed). */
  directory: boolean;
}

/**
 * A guest path, checked: not a string, a NUL byte or ill-formed text is `invalid`; an empty path
 * names nothing (`no-entry`); an absolute path is `not-permitted` (every path is relative to a
 * descriptor). Backslashes are ordinary name characters, as on any Unix.
 */
export function parsePath(path: unknown): Segments {
  if (typeof path !== "string" || path.includes("\0") || !path.isWellFormed()) throw "invalid";
  if (path === "") throw "no-entry";
  if (Buffer.byteLength(path) > MAX_PATH_BYTES) throw "name-too-long";
  if (path.startsWith("/")) throw "not-permitted";
  return split(path);
}

/**
 * A symlink's target, to be resolved from the directory that holds the link: an absolute target
 * is `not-permitted` (it would leave the descriptor's tree), an empty one names nothing.
 */
export function parseTarget(target: string): Segments {
  if (target === "") throw "no-entry";
  if (target.startsWith("/")) throw "not-permitted";
  return split(target);
}

function split(path: string): Segments {
  const parts = path.split("/");
  const last = parts[parts.length - 1];
  return { names: parts.filter((part) => part !== "" && part !== "."), directory: last === "" || last === "." || last === ".." };
}

/**
 * `name` in the directory open as `dirFd`: Linux resolves `/proc/self/fd/N` to that directory
 * itself, wherever it has been moved since and even once removed, so this is openat(dirFd, name)
 * for Node, which has no openat. `name` is always a single segment, never "." or "..".
 */
export function under(dirFd: number, name: string): string {
  return `/proc/self/fd/${dirFd}/${name}`;
}

/** What is at `path` (an `under` path) now, as lstat sees it; undefined when nothing is. */
export function lstatOrNothing(path: string): BigIntStats | undefined {
  try {
    return lstatSync(path, { bigint: true });
  } catch (error) {
    if (errnoOf(error) === "ENOENT") return undefined;
    throw error;
  }
}

/** The object open as `fd` itself (reopening it, or listing a directory). */
export function itself(fd: number): string {
  return `/proc/self/fd/${fd}`;
}
