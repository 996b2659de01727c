/**
 * A bounded first-in first-out queue read as an async iterable by one consumer: what a stream
 * handler yields to its client. `push` never blocks: a full or closed channel refuses, so a
 * client that does not read cannot make the server buffer without bound.
 */
export class Channel<T> implements AsyncIterable<T> {
  readonly #capacity: number;
  #items: T[] = [];
  #closed = false;
  #wake: (() => void) | undefined;

  constructor(capacity: number) {
    this.#capacity = capacity;
  }

  /** Queues the item; false when the channel is closed or holds `capacity` items already. */
  push(item: T): boolean {
    if (this.#closed || this.#items.length >= this.#capacity) return false;
    this.#items.push(item);
    this.#wake?.();
    return true;
  }

  /** Ends the iteration once the queued items are read. */
  close(): void {
    this.#closed = true;
    this.#wake?.();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    for (;;) {
      while (this.#items.length > 0) yield this.#items.shift()!;
      if (this.#closed) return;
      await new Promise<void>((resolve) => (this.#wake = resolve));
      this.#wake = undefined;
    }
  }
}
