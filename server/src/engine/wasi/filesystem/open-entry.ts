// open-at's last step: opening (or creating) one name in a directory already resolved, never
// following a symlink there unless asked, and charging a created entry to the account.
import { closeSync, constants, fstatSync, ftruncateSync, openSync } from "node:fs";
import { errnoOf } from "./error-code.ts";
import { itself, under } from "./path.ts";
import { chargedEntry, type QuotaAccount } from "./quota.ts";
import { readSymlink, Redirect } from "./walk.ts";

export interface OpenRequest {
  read: boolean;
  write: boolean;
  create: boolean;
  exclusive: boolean;
  truncate: boolean;
  /** Only a directory will do (O_DIRECTORY). */
  directory: boolean;
  /** A symlink as the last name is followed (else it is `loop`, as O_NOFOLLOW makes it). */
  follow: boolean;
}

/** Tries of "open, else create" when another process creates or removes the name in between. */
const CREATE_ATTEMPTS = 8;

/**
 * The fd of `name` in `dir` as `request` asks, or the redirect to follow when it is a symlink and
 * `request.follow`. O_NONBLOCK keeps a FIFO someone left in the tree from blocking the thread.
 */
export function openEntry(dir: number, name: string, request: OpenRequest, account: QuotaAccount): number | Redirect {
  const path = under(dir, name);
  const flags = accessMode(request) | constants.O_NOFOLLOW | constants.O_NONBLOCK | (request.directory ? constants.O_DIRECTORY : 0);
  const create = () => chargedEntry(account, path, () => openSync(path, flags | constants.O_CREAT | constants.O_EXCL, 0o666));
  if (request.create && request.exclusive) return create();
  for (let attempt = 0; attempt < CREATE_ATTEMPTS; attempt++) {
    const existing = openExisting(dir, name, flags, request);
    if (existing instanceof Redirect) return existing;
    if (existing !== undefined) return request.truncate ? truncated(existing, request.write, account) : existing;
    try {
      return create();
    } catch (error) {
      // Created by someone else in between: open that one.
      if (errnoOf(error) !== "EEXIST" && error !== "exist") throw error;
    }
  }
  throw "busy";
}

/** The fd of what exists at `name`, the redirect of a symlink there, or undefined when nothing is there and creating is asked. */
function openExisting(dir: number, name: string, flags: number, request: OpenRequest): number | Redirect | undefined {
  try {
    return openSync(under(dir, name), flags);
  } catch (error) {
    const errno = errnoOf(error);
    if (request.follow && (errno === "ELOOP" || errno === "ENOTDIR")) {
      const target = readSymlink(dir, name);
      if (target !== undefined) return new Redirect(target);
    }
    if (errno === "ENOENT" && request.create) return undefined;
    throw error;
  }
}

/** The directory open as `dir` opened again, for a descriptor of its own. */
export function reopenDirectory(dir: number): number {
  return openSync(itself(dir), constants.O_RDONLY | constants.O_DIRECTORY);
}

function accessMode({ read, write }: OpenRequest): number {
  if (!write) return constants.O_RDONLY;
  return read ? constants.O_RDWR : constants.O_WRONLY;
}

/**
 * `fd` emptied, its size released (O_TRUNC would not say how much it freed). A file not opened for
 * writing is truncated through a writable reopening of the same inode, as open(O_TRUNC) would.
 */
function truncated(fd: number, writable: boolean, account: QuotaAccount): number {
  try {
    const stats = fstatSync(fd);
    if (stats.isDirectory()) throw "is-directory";
    if (!stats.isFile() || stats.size === 0) return fd;
    if (writable) {
      ftruncateSync(fd, 0);
    } else {
      const writer = openSync(itself(fd), constants.O_WRONLY);
      try {
        ftruncateSync(writer, 0);
      } finally {
        closeSync(writer);
      }
    }
    account.release(stats.size);
    return fd;
  } catch (error) {
    closeSync(fd);
    throw error;
  }
}
