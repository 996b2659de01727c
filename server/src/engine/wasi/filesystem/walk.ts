// Path resolution below a directory descriptor, one segment at a time, the capability way
// (wasmtime's cap-std): the descriptor a call is made on is a root.
//
// Invariants:
// - No host path is ever built from guest text beyond one segment: each directory on the way is
//   opened from the one before through `/proc/self/fd/<fd>/<name>` with O_NOFOLLOW|O_DIRECTORY,
//   and held open, so renaming or replacing anything meanwhile cannot redirect the walk.
// - ".." pops the stack of held directories; at the base it is `not-permitted`, so nothing above
//   the descriptor is reachable, whatever the directories are called or where they are now.
// - Symlinks are read, never followed by the kernel: their text is resolved here, on the same stack
//   (an absolute target is `not-permitted`), at most MAX_EXPANSIONS times per path (`loop`).
// - The last name is handed to the operation with the directory that holds it; the operation uses
//   only syscalls that do not follow a symlink there (lstat, lutimes, O_NOFOLLOW, rename, unlink,
//   readlink), and asks for a redirect when it wants the link followed.
import { closeSync, openSync, readlinkSync } from "node:fs";
import { errnoOf } from "./error-code.ts";
import { DESCEND_FLAGS, parsePath, parseTarget, under, type Segments } from "./path.ts";

/** Symlinks expanded while resolving one path (Linux's MAXSYMLINKS). */
const MAX_EXPANSIONS = 40;
/** Directories held open at once by one walk: deeper paths are `name-too-long`. */
const MAX_DEPTH = 256;

const utf8 = new TextDecoder("utf-8", { fatal: true });

/** What an operation answers when the last name is a symlink it wants followed. */
export class Redirect {
  /** The link's text; undefined when it turned out not to be a link after all (then the name is tried again). */
  readonly target: string | undefined;
  constructor(target: string | undefined) {
    this.target = target;
  }
}

/** The operation on the last name: `dir` holds it; `name` is undefined when the path names `dir` itself. */
export type Last<T> = (dir: number, name: string | undefined, walk: Walk) => T | Redirect;

/** Resolves `path` below the directory open as `base` and runs `last` on where it leads. */
export function resolveAt<T>(base: number, path: unknown, last: Last<T>): T {
  const walk = new Walk(base, parsePath(path));
  try {
    for (;;) {
      const { dir, name } = walk.toLast();
      const result = last(dir, name, walk);
      if (!(result instanceof Redirect)) return result;
      walk.redirect(name!, result.target);
    }
  } finally {
    walk.close();
  }
}

/** The text of the symlink `name` in `dir`; undefined when it is not a symlink (or is gone). */
export function readSymlink(dir: number, name: string): string | undefined {
  let bytes: Buffer;
  try {
    bytes = readlinkSync(under(dir, name), { encoding: "buffer" });
  } catch (error) {
    const errno = errnoOf(error);
    if (errno === "EINVAL" || errno === "ENOENT") return undefined;
    throw error;
  }
  return decodeName(bytes);
}

/** A host name as guest text: names that are not UTF-8 cannot cross the interface. */
export function decodeName(bytes: Uint8Array): string {
  try {
    return utf8.decode(bytes);
  } catch {
    throw "illegal-byte-sequence";
  }
}

export class Walk {
  /** Held directories: the base (not ours to close) and every one descended into since. */
  readonly #stack: number[];
  /** Segments still to resolve, last first (so the next one is popped). */
  readonly #pending: string[];
  #expansions = 0;
  /** The last name must be a directory (the path, or the target of a last symlink, ends in "/"). */
  mustBeDirectory: boolean;

  constructor(base: number, segments: Segments) {
    this.#stack = [base];
    this.#pending = segments.names.reverse();
    this.mustBeDirectory = segments.directory;
  }

  get #top(): number {
    return this.#stack[this.#stack.length - 1]!;
  }

  /** Resolves every segment but the last; the last is returned unresolved with its directory. */
  toLast(): { dir: number; name: string | undefined } {
    for (;;) {
      const segment = this.#pending.pop();
      if (segment === undefined) return { dir: this.#top, name: undefined };
      if (segment === "..") this.#up();
      else if (this.#pending.length === 0) return { dir: this.#top, name: segment };
      else this.#down(segment);
    }
  }

  /** The last name was a symlink to `target` (undefined: it changed; look again): resolution goes on from it. */
  redirect(name: string, target: string | undefined): void {
    this.#count();
    if (target === undefined) {
      this.#pending.push(name);
      return;
    }
    const segments = this.#expand(target);
    if (segments.directory) this.mustBeDirectory = true;
  }

  /** Closes every directory this walk opened. */
  close(): void {
    while (this.#stack.length > 1) closeSync(this.#stack.pop()!);
  }

  #up(): void {
    if (this.#stack.length === 1) throw "not-permitted";
    closeSync(this.#stack.pop()!);
  }

  #down(name: string): void {
    if (this.#stack.length > MAX_DEPTH) throw "name-too-long";
    let fd: number;
    try {
      fd = openSync(under(this.#top, name), DESCEND_FLAGS);
    } catch (error) {
      // O_NOFOLLOW refuses a symlink: ELOOP, or ENOTDIR with O_DIRECTORY (as for a file).
      const errno = errnoOf(error);
      if (errno !== "ELOOP" && errno !== "ENOTDIR") throw error;
      const target = readSymlink(this.#top, name);
      if (target === undefined) throw "not-directory";
      this.#count();
      this.#expand(target);
      return;
    }
    this.#stack.push(fd);
  }

  #expand(target: string): Segments {
    const segments = parseTarget(target);
    for (let i = segments.names.length - 1; i >= 0; i--) this.#pending.push(segments.names[i]!);
    return segments;
  }

  #count(): void {
    if (++this.#expansions > MAX_EXPANSIONS) throw "loop";
  }
}
