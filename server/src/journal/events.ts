import type { OperationKind, TerminalReceipt } from "../environments/port.ts";

/**
 * One entry of a session's journal. `seq` starts at 1 and grows by one per event of the session;
 * `at` is an ISO timestamp. The vocabulary is the versioned contract of docs/events.md.
 */
export type JournalEvent = { seq: number; at: string } & EventBody;

/** What callers append; the journal adds seq and at. */
export type EventBody = OperationEvent | NoteEvent;

/** The operation records: written only by the journal's own operation methods. */
export type OperationEvent =
  | { type: "operation.sent"; operation: SentOperation }
  | ({ type: "operation.accepted"; operationId: string } & OnBehalf)
  | ({ type: "operation.progress"; operationId: string; data: string } & OnBehalf)
  | ({ type: "operation.receipt"; operationId: string; environment: string; kind: OperationKind; receipt: TerminalReceipt } & OnBehalf);

/** The run an operation serves, repeated on its receipts so that a run's events select by runId alone. */
interface OnBehalf {
  runId?: string;
}

/** Anything else a session or a run records: opaque to the journal beyond its type. */
export interface NoteEvent {
  type: `${"session" | "environment" | "run" | "turn" | "model" | "assistant" | "tool"}.${string}`;
  data: Record<string, unknown>;
}

/** What `operation.sent` records: references and digests, never secrets or program source. */
export interface SentOperation {
  operationId: string;
  environment: string;
  kind: OperationKind;
  /** The absolute deadline, Unix ms. */
  deadlineMs: number;
  /** execute: the placed tool. */
  tool?: string;
  /** execute: true when it is a run's agent loop rather than a placed tool. */
  agentLoop?: true;
  /** execute: the input JSON text. */
  input?: string;
  /** cancel: the operation asked to stop. */
  targetOperationId?: string;
  /** The run on whose behalf the operation runs, if any. */
  runId?: string;
}
