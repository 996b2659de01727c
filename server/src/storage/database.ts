import * as path from "node:path";
import { Level } from "level";
import { LevelStore } from "./level-store.ts";
import { openPostgresStore } from "./postgres-store.ts";
import type { Store } from "./store.ts";

/** Where the metadata lives: a shared PostgreSQL database when `databaseUrl` is set, else LevelDB in the data directory. */
export interface StoreLocation {
  dataDir: string;
  databaseUrl?: string | undefined;
}

/** Opens the metadata store (see StoreLocation). */
export function openStore({ dataDir, databaseUrl }: StoreLocation): Promise<Store> {
  return databaseUrl === undefined ? openLevelStore(dataDir) : openPostgresStore(databaseUrl);
}

/** A data directory another process holds is refused by name. */
async function openLevelStore(dataDir: string): Promise<LevelStore> {
  const db = new Level<string, string>(path.join(dataDir, "metadata"), { valueEncoding: "utf8" });
  try {
    await db.open();
  } catch (error) {
    // LevelDB takes an exclusive lock on its directory; level reports it as a bare "failed to open".
    if ((error as { cause?: { code?: string } }).cause?.code === "LEVEL_LOCKED") {
      throw new Error(`the data directory ${dataDir} is locked by another process (is another server running on it?)`, { cause: error });
    }
    throw error;
  }
  return new LevelStore(db);
}

/**
 * Keys of per-workspace tables. Workspace names cannot contain "/", so the prefix is
 * unambiguous and a range scan over one workspace never reaches another.
 */
export function workspaceKey(workspace: string, id: string): string {
  return `${workspace}/${id}`;
}

export function workspaceRange(workspace: string): { gt: string; lt: string } {
  return { gt: `${workspace}/`, lt: `${workspace}/\uffff` };
}
