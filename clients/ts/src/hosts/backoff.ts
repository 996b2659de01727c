/** How a host waits between attempts to open its command stream again. */
export interface ReconnectOptions {
  /** The first wait after a drop; default 250 ms. Each failed attempt doubles it. */
  initialDelayMs?: number;
  /** The longest wait; default 30 s. */
  maxDelayMs?: number;
}

export const DEFAULT_RECONNECT: Required<ReconnectOptions> = { initialDelayMs: 250, maxDelayMs: 30_000 };

/**
 * The wait before attempt `attempt` (0 for the first after a drop): the initial delay doubled
 * per failed attempt, capped, and drawn at random from the upper half of that, so that hosts
 * dropped together (a server restart) do not all come back at the same instant.
 */
export function reconnectDelay(attempt: number, options: Required<ReconnectOptions>): number {
  const ceiling = Math.min(options.maxDelayMs, options.initialDelayMs * 2 ** attempt);
  return ceiling / 2 + Math.random() * (ceiling / 2);
}

/** Resolves after `ms`, or at once when `signal` aborts. */
export function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
  });
}
