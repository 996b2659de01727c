/** Where refused receipts are reported (one JSON line each): a host sending them is misbehaving. */
export type HostLog = (entry: Record<string, unknown>) => void;

/** What one refused receipt's log line says. */
export interface Refusal {
  workspace: string;
  sessionId: string;
  environment: string;
  /** As the host sent it; cut to the length of an operation id here. */
  operationId: string;
  reason: string;
}

/** Operation ids this service issues are `op_` and 26 characters (server/src/ids). */
const OPERATION_ID_CHARS = "op_".length + 26;

/** A host's operation id as the service repeats it (log lines, `refused`): one longer than any id of ours is cut. */
export function echoedOperationId(operationId: string): string {
  return operationId.length <= OPERATION_ID_CHARS ? operationId : `${operationId.slice(0, OPERATION_ID_CHARS)}…`;
}

/**
 * Logs refused host receipts (`host.receipt_refused`) without letting a host flood the log: a
 * workspace gets `perMinute` lines at once and `perMinute` more over each minute (a token
 * bucket); refusals beyond are counted, and the next line logged for that workspace carries how
 * many were left out (`suppressed`). One bucket per workspace, and workspaces are the
 * deployment's own (SERVICE_API_KEYS), so the buckets are bounded too.
 */
export class RefusalLog {
  readonly #write: HostLog;
  readonly #perMinute: number;
  readonly #now: () => number;
  readonly #buckets = new Map<string, { tokens: number; at: number; suppressed: number }>();

  /** `now`: the clock the buckets refill by (a test's seam). */
  constructor(write: HostLog, perMinute: number, now: () => number = Date.now) {
    this.#write = write;
    this.#perMinute = perMinute;
    this.#now = now;
  }

  refused({ operationId, ...refusal }: Refusal): void {
    const now = this.#now();
    let bucket = this.#buckets.get(refusal.workspace);
    if (!bucket) this.#buckets.set(refusal.workspace, (bucket = { tokens: this.#perMinute, at: now, suppressed: 0 }));
    bucket.tokens = Math.min(this.#perMinute, bucket.tokens + ((now - bucket.at) * this.#perMinute) / 60_000);
    bucket.at = now;
    if (bucket.tokens < 1) {
      bucket.suppressed++;
      return;
    }
    bucket.tokens--;
    const suppressed = bucket.suppressed;
    bucket.suppressed = 0;
    this.#write({ event: "host.receipt_refused", ...refusal, operationId: echoedOperationId(operationId), ...(suppressed > 0 ? { suppressed } : {}) });
  }
}
