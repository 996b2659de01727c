import * as fs from "node:fs/promises";
import * as path from "node:path";
import { newId } from "../ids/index.ts";

/**
 * This replica's stable name: SERVICE_REPLICA_ID, or one made at first start and kept in the data
 * directory (`replica-id`), so that a replica restarted on the same data directory knows its own
 * sessions and takes them over at once instead of waiting for its old lease to expire. Two
 * replicas running at once must never share one (nor a data directory).
 */
export async function replicaId(configured: string | undefined, dataDir: string): Promise<string> {
  if (configured) return configured;
  const file = path.join(dataDir, "replica-id");
  const known = await fs.readFile(file, "utf8").catch((error: NodeJS.ErrnoException) => {
    if (error.code === "ENOENT") return undefined;
    throw error;
  });
  if (known?.trim()) return known.trim();
  await fs.mkdir(dataDir, { recursive: true });
  const id = newId("rep");
  await fs.writeFile(file, `${id}\n`, { mode: 0o600 });
  return id;
}
