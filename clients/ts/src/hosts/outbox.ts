/**
 * The request side of a bidirectional stream: messages pushed at any time, read once, in order,
 * as an async iterable by the transport. Receipts are small and few per command, so it is not
 * bounded; the service closes a host that floods it.
 */
export class Outbox<T> implements AsyncIterable<T> {
  #items: T[] = [];
  #closed = false;
  #wake: (() => void) | undefined;

  push(item: T): void {
    if (this.#closed) return;
    this.#items.push(item);
    this.#wake?.();
  }

  /** Ends the stream once the queued messages are read; later pushes are dropped. */
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
