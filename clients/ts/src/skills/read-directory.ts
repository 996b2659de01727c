import * as fs from "node:fs/promises";
import * as path from "node:path";

/** Entries never bundled: version-control and desktop metadata, not skill content. */
const IGNORED = new Set([".git", ".DS_Store"]);

/**
 * Reads every regular file under rootDir, keyed by its "/"-separated relative path. Symbolic
 * links and other special files are refused rather than followed, so a skill never picks up
 * content from outside its folder.
 */
export async function readSkillDirectory(rootDir: string): Promise<{ files: Map<string, Uint8Array>; directoryBasename: string }> {
  const root = path.resolve(rootDir);
  const files = new Map<string, Uint8Array>();
  for (const entry of await fs.readdir(root, { recursive: true, withFileTypes: true })) {
    const absolute = path.join(entry.parentPath, entry.name);
    const relative = path.relative(root, absolute).split(path.sep);
    if (relative.some((segment) => IGNORED.has(segment)) || entry.isDirectory()) continue;
    if (!entry.isFile()) throw new Error(`${absolute} is not a regular file (symbolic links are not bundled)`);
    files.set(relative.join("/"), await fs.readFile(absolute));
  }
  return { files, directoryBasename: path.basename(root) };
}
