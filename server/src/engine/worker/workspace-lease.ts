import type { SyncChannel } from "./sync-channel.ts";

/** Growth asked for at a time beyond what a write needs: fewer round trips for a steady writer. */
const CHUNK = 1024 * 1024;

/**
 * An invocation's share of its binding's workspace quota, kept by the pool (one ledger per
 * binding, over every worker process): the invocation starts with what the pool leased it at
 * dispatch and asks for more, synchronously (the guest's filesystem call is synchronous), when a
 * write would pass it. The pool grants only what the binding's quota has left, so invocations of
 * one binding running at once, in any worker, never hold more than the quota between them.
 */
export class WorkspaceLease {
  readonly #invocation: number;
  readonly #channel: SyncChannel;
  #leased: number;
  /** Net bytes this invocation added to the workspace (negative when it freed more than it wrote). */
  growth = 0;

  constructor(invocation: number, lease: number, channel: SyncChannel) {
    this.#invocation = invocation;
    this.#leased = lease;
    this.#channel = channel;
  }

  reserve(bytes: number): boolean {
    const missing = this.growth + bytes - this.#leased;
    if (missing > 0) {
      this.#leased += this.#channel.lease({ invocation: this.#invocation, bytes: Math.max(missing, CHUNK) });
      if (this.growth + bytes > this.#leased) return false;
    }
    this.growth += bytes;
    return true;
  }

  release(bytes: number): void {
    this.growth -= bytes;
  }
}
