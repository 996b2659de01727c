import type { Dirent } from "node:fs";
import * as fs from "node:fs/promises";
import * as path from "node:path";
import { BundleFormatError } from "../bundle/index.ts";
import { SkillSourceError } from "./skill-source-error.ts";

/** Entries never bundled: version-control and desktop metadata, not skill content. */
const IGNORED = new Set([".git", ".DS_Store"]);
const SEPARATOR = Buffer.from(path.sep);
const utf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * Reads every regular file under rootDir, keyed by its "/"-separated relative path. Names are
 * read as bytes, so one that is not UTF-8 is refused rather than mangled; symbolic links and other
 * special files are refused rather than followed, so a skill never picks up content from outside
 * its folder. Every refusal carries a stable code.
 */
export async function readSkillDirectory(rootDir: string): Promise<{ files: Map<string, Uint8Array>; directoryBasename: string }> {
  const root = path.resolve(rootDir);
  const files = new Map<string, Uint8Array>();
  await readInto(files, Buffer.from(root), []);
  return { files, directoryBasename: path.basename(root) };
}

async function readInto(files: Map<string, Uint8Array>, dir: Buffer, segments: readonly string[]): Promise<void> {
  for (const entry of await readable(() => fs.readdir(dir, { withFileTypes: true, encoding: "buffer" }))) {
    const name = decodeName(entry.name, segments);
    if (IGNORED.has(name)) continue;
    const absolute = Buffer.concat([dir, SEPARATOR, entry.name]);
    const relative = [...segments, name];
    if (entry.isDirectory()) await readInto(files, absolute, relative);
    else if (entry.isFile()) files.set(relative.join("/"), await readable(() => fs.readFile(absolute)));
    else throw new BundleFormatError("bundle_special_entry", `${JSON.stringify(relative.join("/"))} is ${specialKind(entry)}; a skill holds regular files only`);
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
    throw new SkillSourceError(`cannot read the skill: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  }
}
