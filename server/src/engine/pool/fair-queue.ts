/**
 * The pool's share-out of one kind of slot between tenants (workspaces): each may hold at most
 * `limit` slots at once, and what cannot start waits in its tenant's queue (at most
 * `maxWaiting`, first come first served within a tenant). Freed slots go to the tenants with
 * waiting work in turn, round-robin, so a tenant that floods the pool delays only itself: every
 * other tenant's next invocation is at most one turn away.
 */
export class FairQueue<T> {
  readonly #limit: number;
  readonly #maxWaiting: number;
  readonly #running = new Map<string, number>();
  readonly #waiting = new Map<string, T[]>();
  /** Tenants with waiting work, in the order they get their next turn. */
  readonly #turns: string[] = [];

  constructor(limit: number, maxWaiting: number) {
    this.#limit = limit;
    this.#maxWaiting = maxWaiting;
  }

  /** Whether a new invocation of `tenant` may take a free slot now: under its limit, and nothing of its own waits before it. */
  mayStart(tenant: string): boolean {
    return this.running(tenant) < this.#limit && !this.#waiting.has(tenant);
  }

  running(tenant: string): number {
    return this.#running.get(tenant) ?? 0;
  }

  /** The tenant's items waiting. */
  waitingOf(tenant: string): number {
    return this.#waiting.get(tenant)?.length ?? 0;
  }

  /** Every item waiting, over all tenants. */
  get waiting(): number {
    let count = 0;
    for (const items of this.#waiting.values()) count += items.length;
    return count;
  }

  started(tenant: string): void {
    this.#running.set(tenant, this.running(tenant) + 1);
  }

  ended(tenant: string): void {
    const left = this.running(tenant) - 1;
    if (left > 0) this.#running.set(tenant, left);
    else this.#running.delete(tenant);
  }

  /** Adds `item` behind the tenant's other waiting work; false when its queue is full. */
  enqueue(tenant: string, item: T): boolean {
    const items = this.#waiting.get(tenant);
    if (items && items.length >= this.#maxWaiting) return false;
    if (this.#maxWaiting === 0) return false;
    if (items) items.push(item);
    else {
      this.#waiting.set(tenant, [item]);
      this.#turns.push(tenant);
    }
    return true;
  }

  /** Takes `item` out of its tenant's queue (it was cancelled, or its deadline passed). */
  remove(tenant: string, item: T): boolean {
    const items = this.#waiting.get(tenant);
    const at = items?.indexOf(item) ?? -1;
    if (at < 0) return false;
    items!.splice(at, 1);
    if (items!.length === 0) this.#forget(tenant);
    return true;
  }

  /**
   * The next waiting item to give a freed slot to: the first of the first tenant in turn that is
   * under its limit and for which `canRun` finds room, which then goes to the back of the turns.
   * Undefined when none may start.
   */
  next(canRun: (tenant: string) => boolean = () => true): { tenant: string; item: T } | undefined {
    for (let i = 0; i < this.#turns.length; i++) {
      const tenant = this.#turns[i]!;
      if (this.running(tenant) >= this.#limit || !canRun(tenant)) continue;
      const items = this.#waiting.get(tenant)!;
      const item = items.shift()!;
      this.#turns.splice(i, 1);
      if (items.length === 0) this.#waiting.delete(tenant);
      else this.#turns.push(tenant);
      return { tenant, item };
    }
    return undefined;
  }

  /** Every waiting item, emptied out (the pool is closing). */
  drain(): T[] {
    const items = [...this.#waiting.values()].flat();
    this.#waiting.clear();
    this.#turns.length = 0;
    return items;
  }

  #forget(tenant: string): void {
    this.#waiting.delete(tenant);
    const at = this.#turns.indexOf(tenant);
    if (at >= 0) this.#turns.splice(at, 1);
  }
}
