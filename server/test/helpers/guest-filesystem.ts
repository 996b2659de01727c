// Guest filesystems over temp directories, called as a guest calls them (jco's glue calls the
// Descriptor methods directly), for server/test/engine/wasi-filesystem*.test.ts.
import { mkdirSync, mkdtempSync, readdirSync, readlinkSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { GuestFilesystem, type Descriptor, type GuestFilesystemOptions, type PreopenDirectory } from "../../src/engine/wasi/filesystem/index.ts";

/** What the outside marker holds: no guest read may ever return it. */
export const OUTSIDE = "OUTSIDE-MARKER-must-never-be-read";

/**
 * A temp tree `<box>/a/b/c/root` (the preopen's host directory, four levels below the box, so that
 * "../../../.." from it reaches the box) with the marker `<box>/marker` outside it.
 */
export interface Box {
  box: string;
  root: string;
  marker: string;
  remove(): void;
}

export function makeBox(prefix = "skillenv-wasi-fs-"): Box {
  const box = mkdtempSync(join(tmpdir(), prefix));
  const root = join(box, "a", "b", "c", "root");
  mkdirSync(root, { recursive: true });
  const marker = join(box, "marker");
  writeFileSync(marker, OUTSIDE);
  return { box, root, marker, remove: () => rmSync(box, { recursive: true, force: true }) };
}

/** A filesystem whose first preopen is `preopen` (writable `/w` over `root` by default). */
export function mount(root: string, preopen: Partial<PreopenDirectory> = {}, options: Partial<GuestFilesystemOptions> = {}) {
  const filesystem = new GuestFilesystem({ preopens: [{ guestPath: "/w", hostDir: root, readOnly: false, ...preopen }], ...options });
  const [[descriptor]] = filesystem.preopens() as [[Descriptor, string]];
  return { filesystem, root: descriptor };
}

/** What `action` threw (undefined when it returned). */
export function thrown(action: () => unknown): unknown {
  try {
    action();
  } catch (error) {
    return error;
  }
  return undefined;
}

export const bytes = (text: string): Uint8Array => new TextEncoder().encode(text);
export const text = (data: Uint8Array): string => new TextDecoder().decode(data);

/** A file's whole contents through a descriptor's read. */
export function readAll(file: Descriptor): string {
  let result = "";
  for (let offset = 0n; ; ) {
    const [chunk, end] = file.read(65536n, offset);
    result += text(chunk);
    offset += BigInt(chunk.length);
    if (end || chunk.length === 0) return result;
  }
}

export function entries(directory: Descriptor): { name: string; type: string }[] {
  const stream = directory.readDirectory();
  const listed: { name: string; type: string }[] = [];
  for (let entry = stream.readDirectoryEntry(); entry; entry = stream.readDirectoryEntry()) listed.push(entry);
  stream[Symbol.dispose]();
  return listed.sort((a, b) => (a.name < b.name ? -1 : 1));
}

/**
 * The fds this process has open now on `box` or anything in it, or on a directory above it (to see
 * that everything a guest's calls opened was closed). Only those: the test's process also holds
 * vitest's pipes and files other code opens and closes meanwhile, and a count of every fd once
 * failed by one that was none of the filesystem's.
 */
export function openFds(box: Box): number {
  const above = new Set<string>();
  for (let dir = dirname(box.box); ; dir = dirname(dir)) {
    above.add(dir);
    if (dir === dirname(dir)) break;
  }
  let count = 0;
  for (const fd of readdirSync("/proc/self/fd")) {
    let target: string;
    try {
      target = readlinkSync(join("/proc/self/fd", fd));
    } catch {
      continue; // closed since it was listed (the listing's own fd among them)
    }
    if (target === box.box || target.startsWith(`${box.box}/`) || above.has(target)) count++;
  }
  return count;
}

export const READ = { read: true } as const;
export const WRITE = { read: true, write: true } as const;
export const NOFOLLOW: { symlinkFollow: boolean } = { symlinkFollow: false };
export const FOLLOW: { symlinkFollow: boolean } = { symlinkFollow: true };
