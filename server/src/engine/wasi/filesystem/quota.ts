// Quota accounts: where a preopen's disk use (usage.ts) is reserved before it grows and released
// when it shrinks.
import { lstatOrNothing } from "./path.ts";
import { ENTRY_BYTES } from "./usage.ts";

/**
 * A disk-use account a preopen may carry. Guarantees the filesystem relies on: `reserve` either
 * takes all `bytes` and answers true, or takes nothing and answers false; neither method throws.
 * The filesystem reserves before every operation that grows usage (and fails it with `quota`,
 * writing nothing, on false), and releases what an operation freed or did not use after it.
 */
export interface QuotaAccount {
  reserve(bytes: number): boolean;
  release(bytes: number): void;
}

/** An account of `limit` bytes kept in this process. */
export class LocalQuota implements QuotaAccount {
  readonly limit: number;
  #used: number;

  /** `used`: usage already there (measureUsage of the directory it covers). */
  constructor(limit: number, used = 0) {
    this.limit = limit;
    this.#used = used;
  }

  get used(): number {
    return this.#used;
  }

  reserve(bytes: number): boolean {
    if (!(bytes >= 0) || this.#used + bytes > this.limit) return false;
    this.#used += bytes;
    return true;
  }

  release(bytes: number): void {
    if (bytes > 0) this.#used = Math.max(0, this.#used - bytes);
  }
}

/** The account of preopens without a quota: one object, so that moves between them stay possible. */
export const UNLIMITED: QuotaAccount = {
  reserve: () => true,
  release: () => undefined,
};

/**
 * Runs `action` with `bytes` reserved in `account`, released if it fails. Refused, it is `quota`,
 * unless `refusal` names a better reason (a create of what exists is `exist`, quota or not).
 */
export function charged<T>(account: QuotaAccount, bytes: number, action: () => T, refusal: () => string = () => "quota"): T {
  if (bytes > 0 && !account.reserve(bytes)) throw refusal();
  try {
    return action();
  } catch (error) {
    if (bytes > 0) account.release(bytes);
    throw error;
  }
}

/**
 * Runs `create`, which makes one entry at `path` (a name in a held directory), with its entry
 * charged. Without room it is `exist` when the name is taken (what the create would have said:
 * `mkdir -p` over existing directories works with a full quota), else `quota`.
 */
export function chargedEntry<T>(account: QuotaAccount, path: string, create: () => T): T {
  return charged(account, ENTRY_BYTES, create, () => (lstatOrNothing(path) ? "exist" : "quota"));
}
