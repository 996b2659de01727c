import { randomBytes } from "node:crypto";
import * as fs from "node:fs/promises";
import * as path from "node:path";
import { readModifyWrite } from "./read-modify-write.ts";
import type { Store } from "./store.ts";

/**
 * Where the service's own secrets come from (the upload signing key, the credential sealing key,
 * the development API key), by name: `readSecret(name, generate)` answers the secret, generating
 * it with `generate` on first use. Every process that shares the source shares the secrets; of
 * two processes creating one at once, the first write wins and both answer it.
 */
export type SecretSource = (name: string, generate: () => string) => Promise<string>;

/** A fresh 32-byte key as base64url, the form binary keys are kept in. */
export function newKey(): string {
  return randomBytes(32).toString("base64url");
}

/** A binary key of the source, generated on first use. */
export async function readOrCreateKey(secrets: SecretSource, name: string): Promise<Buffer> {
  return Buffer.from((await secrets(name, newKey)).trim(), "base64url");
}

/**
 * The embedded source: one file per secret in the data directory (mode 0600), which only the
 * processes sharing that directory share.
 */
export function dataDirSecrets(dataDir: string): SecretSource {
  const read = async (name: string, generate: () => string): Promise<string> => {
    const file = path.join(dataDir, name);
    try {
      return (await fs.readFile(file, "utf8")).trim();
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
    }
    await fs.mkdir(dataDir, { recursive: true });
    await fs.writeFile(file, `${generate()}\n`, { mode: 0o600, flag: "wx" }).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== "EEXIST") throw error;
    });
    return read(name, generate);
  };
  return read;
}

/**
 * The shared source of several replicas: the store's `secrets` table, created with a conditional
 * write so that replicas starting together agree on one value. Whoever can read the database can
 * read these, so protect and back it up as the keys it holds (docs/operations.md).
 */
export function storeSecrets(store: Store): SecretSource {
  const table = store.table<string>("secrets");
  return (name, generate) =>
    readModifyWrite(store, async (reads) => {
      const existing = await reads.get(table, name);
      if (existing !== undefined) return { ops: [], result: existing };
      const created = generate();
      return { ops: [table.putOp(name, created)], result: created };
    });
}
