import { measureUsage } from "../wasi/filesystem/index.ts";

/** What an invocation starts with, so that a small writer never has to ask. */
const INITIAL_LEASE = 1024 * 1024;

interface Ledger {
  /** Bytes the workspace holds, by the usage definition; undefined until measured (again). */
  used: number | undefined;
  /** Bytes leased to invocations in flight, not yet reported back. */
  leased: number;
  /** Invocations in flight on it (a ledger with none is dropped once its usage is unknown). */
  inFlight: number;
  measuring: Promise<void> | undefined;
}

/**
 * The disk quota of every binding's /workspace (SERVICE_ENV_WORKSPACE_QUOTA_MIB), over every
 * worker process: the usage of each workspace (measured when first needed, then kept up to date
 * by each invocation's reported growth) and the bytes leased to invocations in flight. A lease
 * is granted only from what the quota has left, so the invocations of one binding, in whatever
 * workers, never hold more than the quota between them. What changes a workspace outside
 * invocations (staging, a worker lost mid-call) makes its usage unknown, and it is measured again.
 */
export class WorkspaceQuotas {
  readonly #limit: number;
  readonly #ledgers = new Map<string, Ledger>();

  /** `limit` in bytes; 0 means no quota. */
  constructor(limit: number) {
    this.#limit = limit;
  }

  get limited(): boolean {
    return this.#limit > 0;
  }

  /** An invocation on `dir` starts: measures the workspace if need be; returns its initial lease. */
  async begin(dir: string): Promise<number> {
    const ledger = this.#ledger(dir);
    ledger.inFlight++;
    if (!this.limited) return 0;
    while (ledger.used === undefined) {
      ledger.measuring ??= measureUsage(dir).then(
        (used) => {
          ledger.used = used;
          ledger.measuring = undefined;
        },
        () => {
          // Unreadable (gone, say): counted as empty; the guest's own writes are counted from here.
          ledger.used = 0;
          ledger.measuring = undefined;
        },
      );
      await ledger.measuring;
    }
    return this.grant(dir, INITIAL_LEASE);
  }

  /** Leases up to `bytes` more to an invocation on `dir`: what the quota has left, at most. */
  grant(dir: string, bytes: number): number {
    const ledger = this.#ledgers.get(dir);
    if (!ledger || ledger.used === undefined || !this.limited) return 0;
    const granted = Math.max(0, Math.min(bytes, this.#limit - ledger.used - ledger.leased));
    ledger.leased += granted;
    return granted;
  }

  /**
   * An invocation on `dir` ended, having been leased `leased` bytes in all. With its growth
   * known, the usage moves by it; without (the worker was lost), the usage is measured again.
   */
  end(dir: string, leased: number, growth: number | undefined): void {
    const ledger = this.#ledgers.get(dir);
    if (!ledger) return;
    ledger.inFlight--;
    ledger.leased -= leased;
    if (ledger.used !== undefined) ledger.used = growth === undefined ? undefined : Math.max(0, ledger.used + growth);
    if (ledger.inFlight === 0 && ledger.used === undefined) this.#ledgers.delete(dir);
  }

  /** Something other than an invocation changed `dir` (staging, teardown): measure it again when next needed. */
  forget(dir: string): void {
    const ledger = this.#ledgers.get(dir);
    if (!ledger) return;
    if (ledger.inFlight === 0) this.#ledgers.delete(dir);
    else ledger.used = undefined;
  }

  #ledger(dir: string): Ledger {
    let ledger = this.#ledgers.get(dir);
    if (!ledger) {
      ledger = { used: undefined, leased: 0, inFlight: 0, measuring: undefined };
      this.#ledgers.set(dir, ledger);
    }
    return ledger;
  }
}
