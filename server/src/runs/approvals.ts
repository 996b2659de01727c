import { prefixEnd, type Store, type Table, type WriteOp } from "../storage/index.ts";

/**
 * Approvals (docs/runs.md, "Approvals"): a run's call of a tool placed with approval "always"
 * waits for a person's decision before anything is sent to its environment.
 *
 * Guarantees: an approval is decided at most once (the first decision wins; every later one is
 * refused, approval_decided, also across a restart: the decision is durable before it is
 * answered or acted on); a pending approval outlives the process that asked for it (its record
 * is written with its `tool.approval_requested` event, and a resumed run waits for it again);
 * an approval whose run ends undecided is `expired`, in the batch of the run's last event.
 */

export type ApprovalStatus = "pending" | "approved" | "denied" | "expired";

/** Who decided: the deciding key's workspace and what the caller called itself (not verified). */
export interface ApprovalDecider {
  workspace: string;
  label: string;
}

/** An approval as stored, keyed `<workspace>/<sessionId>/<runId>/<approvalId>`. */
export interface ApprovalRecord {
  id: string;
  workspace: string;
  sessionId: string;
  runId: string;
  round: number;
  /** The call's place among its reply's tool calls: approvals list in the order the model asked. */
  index: number;
  callId: string;
  tool: string;
  /** The model's input for the tool, as JSON. */
  input: unknown;
  status: ApprovalStatus;
  requestedAt: string;
  decidedAt?: string;
  decidedBy?: ApprovalDecider;
  /** A denial's message, as the model received it. */
  message?: string;
}

/** A person's decision on one approval. */
export interface Decision {
  approved: boolean;
  decidedBy: ApprovalDecider;
  /** A denial's message for the model (the default when the caller gave none). */
  message: string;
}

/** What the model is told of a denial without a message of its own. */
export const DEFAULT_DENIAL_MESSAGE = "a person denied this tool call";
/** What the model is told of a call whose approval its run never got (the conversation of a run that ended undecided). */
export const APPROVAL_EXPIRED_MESSAGE = "the run ended before a person decided; the tool was not called";
/** The code of a denied call's error result. */
export const DENIED_CODE = "tool_call_denied";

/** The approvals of every run, durable. */
export class ApprovalRecords {
  readonly #store: Store;
  readonly #table: Table<ApprovalRecord>;

  constructor(store: Store) {
    this.#store = store;
    this.#table = store.table<ApprovalRecord>("run-approvals");
  }

  putOp(record: ApprovalRecord): WriteOp {
    return this.#table.putOp(approvalKey(record), record);
  }

  get(workspace: string, sessionId: string, runId: string, approvalId: string): Promise<ApprovalRecord | undefined> {
    return this.#table.get(`${runPrefix(workspace, sessionId, runId)}${approvalId}`);
  }

  /** The run's approvals in the order the model asked for them: by round, then by place in the reply (ids sort by time only to the millisecond). */
  async ofRun(workspace: string, sessionId: string, runId: string): Promise<ApprovalRecord[]> {
    const prefix = runPrefix(workspace, sessionId, runId);
    const approvals = await this.#table.values({ gt: prefix, lt: prefixEnd(prefix) });
    return approvals.sort((a, b) => a.round - b.round || a.index - b.index);
  }

  /** Removes the run's approvals (with the run). */
  async remove(workspace: string, sessionId: string, runId: string): Promise<void> {
    const approvals = await this.ofRun(workspace, sessionId, runId);
    if (approvals.length > 0) await this.#store.write(approvals.map((record) => this.#table.deleteOp(approvalKey(record))));
  }
}

/**
 * The approvals a running turn waits for in this process. A decision takes its approval out
 * synchronously, so that of two decisions racing in, exactly one finds it; what was decided (or
 * expired) here is remembered for the run's lifetime, so the loser is told why.
 */
export class RunApprovals {
  readonly records: ApprovalRecords;
  readonly #waiting = new Map<string, { record: ApprovalRecord; decided: (decision: Decision) => void }>();
  readonly #settled = new Map<string, ApprovalStatus>();

  constructor(records: ApprovalRecords) {
    this.records = records;
  }

  /** Resolves with the approval's decision; the turn's stop is raced by its caller. */
  wait(record: ApprovalRecord): Promise<Decision> {
    return new Promise((decided) => this.#waiting.set(record.id, { record, decided }));
  }

  /**
   * Takes the approval for a decision: its record and how to hand the turn the decision, or why
   * not (decided or expired here already; undefined: not waited for in this process).
   */
  take(approvalId: string, status: "approved" | "denied"): { record: ApprovalRecord; decided: (decision: Decision) => void } | ApprovalStatus | undefined {
    const settled = this.#settled.get(approvalId);
    if (settled) return settled;
    const waiting = this.#waiting.get(approvalId);
    if (!waiting) return undefined;
    this.#waiting.delete(approvalId);
    this.#settled.set(approvalId, status);
    return waiting;
  }

  /** Puts back an approval whose decision could not be written. */
  putBack(record: ApprovalRecord, decided: (decision: Decision) => void): void {
    this.#settled.delete(record.id);
    this.#waiting.set(record.id, { record, decided });
  }

  /** Every approval still waiting, as expired: the run is ending. Nothing can decide them after. */
  expireAll(): ApprovalRecord[] {
    const expired = [...this.#waiting.values()].map(({ record }): ApprovalRecord => ({ ...record, status: "expired" }));
    for (const record of expired) this.#settled.set(record.id, "expired");
    this.#waiting.clear();
    return expired;
  }
}

function runPrefix(workspace: string, sessionId: string, runId: string): string {
  return `${workspace}/${sessionId}/${runId}/`;
}

function approvalKey(record: ApprovalRecord): string {
  return `${runPrefix(record.workspace, record.sessionId, record.runId)}${record.id}`;
}
