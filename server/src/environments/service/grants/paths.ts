import * as fs from "node:fs/promises";
import * as path from "node:path";

/**
 * The real location of a path: absolute, `..` resolved, and every symlink of its deepest
 * existing ancestor followed. The part that does not exist yet holds no symlinks, so it is
 * appended as it is; a root that is created later still resolves to where it will be.
 */
export async function realLocation(target: string): Promise<string> {
  const missing: string[] = [];
  let existing = path.resolve(target);
  for (;;) {
    try {
      return path.join(await fs.realpath(existing), ...missing.reverse());
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      const parent = path.dirname(existing);
      if ((code !== "ENOENT" && code !== "ENOTDIR") || parent === existing) throw error;
      missing.push(path.basename(existing));
      existing = parent;
    }
  }
}

/** Whether `inner` is `root` or lies beneath it; both must already be real locations. */
export function isWithin(root: string, inner: string): boolean {
  const relative = path.relative(root, inner);
  return relative === "" || (relative !== ".." && !relative.startsWith(`..${path.sep}`) && !path.isAbsolute(relative));
}
