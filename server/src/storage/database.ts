import * as path from "node:path";
import { Level } from "level";
import type { AbstractSublevel } from "abstract-level";

/** The LevelDB holding all metadata. Feature modules take typed sublevels of it. */
export type Database = Level<string, unknown>;

/** A sublevel whose values are JSON records of type V. */
export type Table<V> = AbstractSublevel<Database, string | Buffer | Uint8Array, string, V>;

/** Opens the metadata store; a data directory another process holds is refused by name. */
export async function openDatabase(dataDir: string): Promise<Database> {
  const db = new Level<string, unknown>(path.join(dataDir, "metadata"), { valueEncoding: "json" });
  try {
    await db.open();
  } catch (error) {
    // LevelDB takes an exclusive lock on its directory; level reports it as a bare "failed to open".
    if ((error as { cause?: { code?: string } }).cause?.code === "LEVEL_LOCKED") {
      throw new Error(`the data directory ${dataDir} is locked by another process (is another server running on it?)`, { cause: error });
    }
    throw error;
  }
  return db;
}

export function table<V>(db: Database, name: string): Table<V> {
  return db.sublevel<string, V>(name, { valueEncoding: "json" });
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
