import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";
import { readOrCreateKey, type SecretSource } from "../../storage/index.ts";

const KEY_FILE = "sealing-key";
const VERSION = "v1";
const IV_BYTES = 12;
const TAG_BYTES = 16;

/**
 * Seals credentials at rest (SPEC 5.3): AES-256-GCM with a key generated into the data directory
 * (`sealing-key`, mode 0600). A sealed value is `v1.<base64url(iv | tag | ciphertext)>`; the
 * credential's plaintext exists only in memory, while an extension is being called. Anyone who
 * can read the data directory's key can unseal, so back the key up with, and protect it like,
 * the database (docs/operations.md).
 */
export class Sealer {
  readonly #key: Buffer;

  private constructor(key: Buffer) {
    this.#key = key;
  }

  static async open(secrets: SecretSource): Promise<Sealer> {
    return new Sealer(await readOrCreateKey(secrets, KEY_FILE));
  }

  seal(plaintext: string): string {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv("aes-256-gcm", this.#key, iv);
    const ciphertext = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final()]);
    return `${VERSION}.${Buffer.concat([iv, cipher.getAuthTag(), ciphertext]).toString("base64url")}`;
  }

  /** Throws when the value was not sealed with this key (or was altered). */
  unseal(sealed: string): string {
    const [version, payload] = sealed.split(".");
    if (version !== VERSION || payload === undefined) throw new Error("not a sealed value of this version");
    const bytes = Buffer.from(payload, "base64url");
    const decipher = createDecipheriv("aes-256-gcm", this.#key, bytes.subarray(0, IV_BYTES));
    decipher.setAuthTag(bytes.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
    return Buffer.concat([decipher.update(bytes.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]).toString("utf8");
  }
}

/** A sealed credential could not be opened: thrown before a request leaves, so nothing was sent. */
export class CredentialUnreadable extends Error {}

/** The credential, for one request; throws CredentialUnreadable when it cannot be opened. */
export function unsealCredential(sealer: Sealer, sealed: string): string {
  try {
    return sealer.unseal(sealed);
  } catch {
    throw new CredentialUnreadable(
      "the environment's sealed credential cannot be read (the data directory's sealing-key was lost or replaced, or the stored value altered); nothing was sent",
    );
  }
}

/** The credential as the secrets to cut out of what its environment answers: none when it cannot be opened (then nothing sent it). */
export function readableCredential(sealer: Sealer, sealed: string): string[] {
  try {
    return [sealer.unseal(sealed)];
  } catch {
    return [];
  }
}
