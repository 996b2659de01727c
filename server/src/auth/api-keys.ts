import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import * as fs from "node:fs/promises";
import * as path from "node:path";
import type { SecretSource } from "../storage/index.ts";

export const DEV_WORKSPACE = "dev";
export const DEV_KEY_FILE = "dev-api-key";

/**
 * Resolves bearer keys to workspaces. Keys are compared as SHA-256 digests with timingSafeEqual
 * against every known key, so neither the key's length nor the position of a first difference
 * leaks through timing.
 */
export class ApiKeys {
  readonly #entries: ReadonlyArray<{ digest: Buffer; workspace: string }>;

  constructor(keys: ReadonlyMap<string, string>) {
    this.#entries = [...keys].map(([key, workspace]) => ({ digest: digest(key), workspace }));
  }

  /** Every workspace that has a key. */
  workspaces(): string[] {
    return [...new Set(this.#entries.map((entry) => entry.workspace))];
  }

  workspaceOf(key: string): string | undefined {
    const candidate = digest(key);
    let found: string | undefined;
    for (const entry of this.#entries) {
      if (timingSafeEqual(entry.digest, candidate)) found = entry.workspace;
    }
    return found;
  }
}

function digest(key: string): Buffer {
  return createHash("sha256").update(key).digest();
}

/**
 * The development key: generated once into the secrets' source and reused after, so `npm start`
 * works with no configuration and the key survives restarts. It is also in the data directory's
 * `dev-api-key` file (mode 0600), where the operator reads it: the source itself when secrets are
 * kept there, a copy when they are kept in a shared database (so every replica accepts it).
 */
export async function loadOrCreateDevKey(secrets: SecretSource, dataDir: string): Promise<{ key: string; file: string }> {
  const key = await secrets(DEV_KEY_FILE, () => `dev_${randomBytes(24).toString("base64url")}`);
  const file = path.join(dataDir, DEV_KEY_FILE);
  const written = await fs.readFile(file, "utf8").catch(() => undefined);
  if (written?.trim() !== key) {
    await fs.mkdir(dataDir, { recursive: true });
    await fs.writeFile(file, `${key}\n`, { mode: 0o600 });
  }
  return { key, file };
}
