import { randomBytes } from "node:crypto";
import * as fs from "node:fs/promises";
import * as path from "node:path";

/**
 * A 32-byte secret kept in the data directory (mode 0600), generated on first use. Every
 * process sharing the data directory uses the same key; of two processes creating it at once,
 * the first write wins and both read it.
 */
export async function readOrCreateKey(dataDir: string, fileName: string): Promise<Buffer> {
  const file = path.join(dataDir, fileName);
  try {
    return Buffer.from((await fs.readFile(file, "utf8")).trim(), "base64url");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
  }
  await fs.mkdir(dataDir, { recursive: true });
  await fs.writeFile(file, randomBytes(32).toString("base64url"), { mode: 0o600, flag: "wx" }).catch((error: NodeJS.ErrnoException) => {
    if (error.code !== "EEXIST") throw error;
  });
  return readOrCreateKey(dataDir, fileName);
}
