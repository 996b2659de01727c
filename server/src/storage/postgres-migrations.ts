import type pg from "pg";

/** One step of the PostgreSQL store's schema; applied once, in version order, never edited after release. */
export interface Migration {
  readonly version: number;
  readonly sql: string;
}

/**
 * The schema, oldest first. Keys are `COLLATE "C"`: in a UTF8 database, C compares the bytes, so
 * ranges come in UTF-8 byte order as the store port requires, whatever the database's locale.
 * Values are `text`, exactly the JSON `putOp` wrote (jsonb would reformat it, and conditions
 * compare the text).
 */
export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    sql: `CREATE TABLE skillenv_records (
      tbl text COLLATE "C" NOT NULL,
      key text COLLATE "C" NOT NULL,
      value text NOT NULL,
      PRIMARY KEY (tbl, key)
    )`,
  },
];

/** Held (session-level) while migrating, so replicas starting together migrate one after another. */
const MIGRATION_LOCK = "8318822839590873970";

/**
 * Brings the schema to the newest version this code knows, each migration in its own transaction
 * with its record in `skillenv_schema_migrations`. A database that recorded a version this code
 * does not know (written by a newer server) is refused: this code cannot tell what it changed.
 */
export async function migrate(client: pg.ClientBase): Promise<void> {
  await client.query("SELECT pg_advisory_lock($1)", [MIGRATION_LOCK]);
  try {
    await client.query("CREATE TABLE IF NOT EXISTS skillenv_schema_migrations (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())");
    const applied = new Set((await client.query<{ version: number }>("SELECT version FROM skillenv_schema_migrations")).rows.map((row) => row.version));
    const known = new Set(MIGRATIONS.map((migration) => migration.version));
    const unknown = [...applied].filter((version) => !known.has(version));
    if (unknown.length > 0) {
      throw new UnusableDatabase(
        `the metadata database has schema version ${Math.max(...unknown)}, newer than this server knows (${Math.max(...known)}): run a newer server, or another database`,
      );
    }
    for (const migration of MIGRATIONS) {
      if (applied.has(migration.version)) continue;
      await client.query("BEGIN");
      try {
        await client.query(migration.sql);
        await client.query("INSERT INTO skillenv_schema_migrations (version) VALUES ($1)", [migration.version]);
        await client.query("COMMIT");
      } catch (error) {
        await client.query("ROLLBACK").catch(() => undefined);
        throw error;
      }
    }
  } finally {
    await client.query("SELECT pg_advisory_unlock($1)", [MIGRATION_LOCK]).catch(() => undefined);
  }
}

/** A database this server must not use (a schema from a newer server, an encoding other than UTF8); the message says why. */
export class UnusableDatabase extends Error {
  override name = "UnusableDatabase";
}
