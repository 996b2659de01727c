import type { ProgressLimits } from "../config/index.ts";
import { fitsBytes } from "./field-limits.ts";

/**
 * What progress one operation (`operation.progress`) or one turn (`turn.progress`) may journal
 * (SERVICE_JOURNAL_MAX_PROGRESS_EVENTS, SERVICE_JOURNAL_MAX_PROGRESS_BYTES): the first
 * `maxEvents` events that are at most `maxBytes` each. Progress is best effort, so the rest is
 * dropped, never queued, and counted: however much a guest or a host reports, the journal holds
 * at most maxEvents x maxBytes of it per operation or turn.
 */
export class ProgressBudget {
  readonly #limits: ProgressLimits;
  #kept = 0;
  #dropped = 0;

  constructor(limits: ProgressLimits) {
    this.#limits = limits;
  }

  /** Whether to journal this progress text; one that is not is counted as dropped. */
  admit(text: string): boolean {
    const { maxEvents, maxBytes } = this.#limits;
    if (this.#kept >= maxEvents || !fitsBytes(text, maxBytes)) {
      this.#dropped++;
      return false;
    }
    this.#kept++;
    return true;
  }

  /** Events dropped before they reached the budget (an environment's own limits): they count as dropped. */
  droppedElsewhere(count: number): void {
    this.#dropped += count;
  }

  /** Progress events not journaled so far. */
  get dropped(): number {
    return this.#dropped;
  }
}
