import type { WorkspaceRateSettings } from "../config/index.ts";
import { retryableRefusal } from "../errors/index.ts";

/**
 * Response bytes that cost one request more: a full List page of 4 MiB costs 65 requests. Measured
 * (bench, November 2026): a 2.8 MiB ListSessions page took the server's CPU of 20-24 CallTools of
 * a WAT echo, so a large response is charged about twice its cost; an error toward the others.
 */
export const RESPONSE_BYTES_PER_REQUEST = 64 * 1024;
/** The most a workspace can owe for past responses, in seconds of its rate. */
const MAX_DEBT_SECS = 60;

/**
 * Each workspace's share of the server's event loop, where every request of every workspace is
 * decoded, journaled and answered: a token bucket per workspace, refilled at `requestsPerSec` up
 * to `burst`. A request takes one token when it is admitted (at the request gate, before its body
 * is read); a response takes one more per RESPONSE_BYTES_PER_REQUEST it sent, once it is over, so
 * that large pages and long event streams count for what they cost. A workspace with no token left
 * is refused `workspace_rate_limited`, told when to retry, and nothing of its request runs: another
 * workspace's requests are never refused for it. Workspaces are the configured keys' (a bounded
 * set), so the buckets are too.
 *
 * A refusal is cheap, but not free (the request's HTTP/2 stream, its routing, the error's
 * encoding: about 0.4 ms of the event loop each under a flood), and a client that retries at
 * once with many requests in flight turns refusals into a flood of their own: 1,300 a second
 * from one fan-out in the noisy-neighbour bench, in bursts of 200 that other workspaces' requests
 * waited behind. So `admitOrHold` keeps a refusal for up to `holdMs` (a random time between half
 * of it and all of it, so that held refusals do not come back as a burst) before answering it: a
 * workspace past its share gets at most as many refusals a second as it has requests in flight,
 * and is told no sooner than its Retry-After would have it ask again. At most `maxHeld` refusals
 * of a workspace are held at once; past them it is answered at once.
 */
export class WorkspaceRateLimiter {
  readonly #settings: WorkspaceRateSettings;
  readonly #buckets = new Map<string, Bucket>();
  /** Refusals being held, per workspace. */
  readonly #held = new Map<string, number>();

  constructor(settings: WorkspaceRateSettings) {
    this.#settings = settings;
  }

  get enabled(): boolean {
    return this.#settings.requestsPerSec > 0;
  }

  /** Takes one request's token for `workspace`, or throws `workspace_rate_limited` and takes nothing. */
  admit(workspace: string): void {
    if (!this.enabled) return;
    const bucket = this.#refilled(workspace);
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return;
    }
    const retryAfterSecs = Math.max(1, Math.ceil((1 - bucket.tokens) / this.#settings.requestsPerSec));
    throw retryableRefusal(
      "workspace_rate_limited",
      `this workspace has used its share of the server (${this.#settings.requestsPerSec} requests per second, bursts of ${this.#settings.burst}, a request more per ${RESPONSE_BYTES_PER_REQUEST / 1024} KiB answered); retry in ${retryAfterSecs} s`,
      retryAfterSecs,
    );
  }

  /**
   * Takes one request's token for `workspace` (undefined), or refuses it: a promise that rejects
   * with `workspace_rate_limited` once the refusal has been held (at once if `signal` aborts: the
   * client left), or a throw when it is not held (holdMs 0, or maxHeld reached).
   */
  admitOrHold(workspace: string, signal: AbortSignal): Promise<never> | undefined {
    try {
      this.admit(workspace);
      return undefined;
    } catch (refusal) {
      const held = this.#held.get(workspace) ?? 0;
      if (this.#settings.holdMs === 0 || held >= this.#settings.maxHeld || signal.aborted) throw refusal;
      this.#held.set(workspace, held + 1);
      return new Promise<never>((_, reject) => {
        const answer = () => {
          clearTimeout(timer);
          signal.removeEventListener("abort", answer);
          const left = (this.#held.get(workspace) ?? 1) - 1;
          if (left > 0) this.#held.set(workspace, left);
          else this.#held.delete(workspace);
          reject(refusal);
        };
        const timer = setTimeout(answer, this.#settings.holdMs * (0.5 + Math.random() / 2));
        signal.addEventListener("abort", answer);
      });
    }
  }

  /** Refusals being held now, over every workspace. */
  heldInAll(): number {
    let held = 0;
    for (const count of this.#held.values()) held += count;
    return held;
  }

  /** Charges a finished response's bytes to `workspace`: a token per RESPONSE_BYTES_PER_REQUEST, owed if need be. */
  charge(workspace: string, responseBytes: number): void {
    const cost = Math.floor(responseBytes / RESPONSE_BYTES_PER_REQUEST);
    if (!this.enabled || cost === 0) return;
    const bucket = this.#refilled(workspace);
    bucket.tokens = Math.max(bucket.tokens - cost, -MAX_DEBT_SECS * this.#settings.requestsPerSec);
  }

  #refilled(workspace: string): Bucket {
    const now = performance.now();
    let bucket = this.#buckets.get(workspace);
    if (!bucket) {
      bucket = { tokens: this.#settings.burst, at: now };
      this.#buckets.set(workspace, bucket);
      return bucket;
    }
    bucket.tokens = Math.min(this.#settings.burst, bucket.tokens + ((now - bucket.at) / 1000) * this.#settings.requestsPerSec);
    bucket.at = now;
    return bucket;
  }
}

interface Bucket {
  tokens: number;
  /** When `tokens` was last brought up to date (performance.now()). */
  at: number;
}
