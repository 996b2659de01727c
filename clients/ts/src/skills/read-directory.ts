import type { Dirent } from "node:fs";
import { BundleFormatError } from "../bundle/index.ts";
import { SkillSourceError } from "./skill-source-error.ts";

/** Entries never bundled: version-control and desktop metadata, not skill content. */
const IGNORED = new Set([".git", ".DS_Store"]);
const utf8 = new TextDecoder("utf-8", { fatal: true });

interface NodeProcess {
  getBuiltinModule(id: "node:fs/promises"): typeof import("node:fs/promises");
  getBuiltinModule(id: "node:path"): typeof import("node:path");
}

/**
 * Node's modules, looked up when a directory is read rather than imported: this file is part of
 * the client a browser bundle includes, and a bundler must not need `node:` modules for it.
 */
function node(): { fs: typeof import("node:fs/promises"); path: typeof import("node:path") } {
  const process = (globalThis as { process?: Partial<NodeProcess> }).process;
  if (!process?.getBuiltinModule) throw new Error("Skill.fromDir needs a filesystem runtime (Node 20.16+)");
  return { fs: process.getBuiltinModule("node:fs/promises"), path: process.getBuiltinModule("node:path") };
}

/**
 * Reads every regular file under rootDir, keyed by its "/"-separated relative path. Names are
 * read as bytes, so one that is not UTF-8 is refused rather than mangled; symbolic links and other
 * special files are refused rather than followed, so a skill never picks up content from outside
 * its folder. Every refusal carries a stable code.
 */
export async function readSkillDirectory(rootDir: string): Promise<{ files: Map<string, Uint8Array>; directoryBasename: string }> {
  const { path } = node();
  const root = path.resolve(rootDir);
  const files = new Map<string, Uint8Array>();
  await readInto(files, Buffer.from(root), []);
  return { files, directoryBasename: path.basename(root) };
}

async function readInto(files: Map<string, Uint8Array>, dir: Buffer, segments: readonly string[]): Promise<void> {
  const { fs, path } = node();
  for (const entry of await readable(() => fs.readdir(dir, { withFileTypes: true, encoding: "buffer" }))) {
    const name = decodeName(entry.name, segments);
    if (IGNORED.has(name)) continue;
    const absolute = Buffer.concat([dir, Buffer.from(path.sep), entry.name]);
    const relative = [...segments, name];
    if (entry.isDirectory()) await readInto(files, absolute, relative);
    else if (entry.isFile()) files.set(relative.join("/"), await readable(() => fs.readFile(absolute)));
    else
      throw new BundleFormatError("bundle_special_entry", `${JSON.stringify(relative.join("/"))} is ${specialKind(entry)}; a skill holds regular files only`);
  }
}

function decodeName(name: Buffer, segments: readonly string[]): string {
  try {
    return utf8.decode(name);
  } catch {
    const where = segments.length === 0 ? "the skill directory" : JSON.stringify(segments.join("/"));
    throw new BundleFormatError("bundle_path_invalid", `a name in ${where} is not UTF-8 (bytes ${name.toString("hex")})`);
  }
}

function specialKind(entry: Dirent<Buffer>): string {
  return entry.isSymbolicLink() ? "a symbolic link (links are not followed)" : "a device, FIFO or socket";
}

/** File system failures (permissions, a file removed meanwhile) become file_unreadable. */
async function readable<T>(read: () => Promise<T>): Promise<T> {
  try {
    return await read();
  } catch (error) {
    throw new SkillSourceError("file_unreadable", `cannot read the skill: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  }
}
