import { createHash } from "node:crypto";
import { failure, unknown, type InterimReceipt, type TerminalReceipt } from "../environments/index.ts";
import type { ProgressLimits } from "../config/index.ts";
import type { Journal, SentOperation } from "../journal/index.ts";
import { ProgressBudget } from "./progress-budget.ts";

export interface JournaledOptions {
  journal: Journal;
  /** Outputs above this many bytes end the operation as output_too_large. */
  maxOutputBytes: number;
  /** Progress receipts journaled per operation; the rest are dropped (the terminal receipt never is). */
  progress: ProgressLimits;
}

/**
 * Runs one environment operation the only way operations run: journaled as sent before it is
 * dispatched, dispatched once, and ended with exactly one terminal receipt that is committed to
 * the journal before it is returned (SPEC 3.2, 4.5.6). A dispatch that throws (an adapter must
 * not, but a bug might) may have reached the environment, so it ends `unknown`.
 */
export async function runJournaled(
  options: JournaledOptions,
  sessionId: string,
  operation: SentOperation,
  dispatch: (report: (receipt: InterimReceipt) => void, seq: number) => Promise<TerminalReceipt>,
): Promise<TerminalReceipt> {
  const { journal } = options;
  const { seq } = await journal.send(sessionId, operation);
  const progress = new ProgressBudget(options.progress);
  // Interim receipts are not awaited: the journal keeps call order, so the terminal receipt commits
  // after them, and an `accepted` does not cost the operation a sequential fsync. A lost interim
  // write loses only progress the terminal receipt supersedes.
  const report = (receipt: InterimReceipt) => {
    if (receipt.outcome === "progress" && !progress.admit(receipt.data)) return;
    journal.interim(sessionId, operation, receipt).catch(() => undefined);
  };
  let receipt: TerminalReceipt;
  try {
    receipt = await dispatch(report, seq);
  } catch (error) {
    receipt = unknown(`the environment failed unexpectedly while handling the operation: ${error instanceof Error ? error.message : String(error)}`);
  }
  receipt = boundOutput(receipt, options.maxOutputBytes);
  await journal.settle(sessionId, operation, receipt);
  return receipt;
}

/** An output too large to journal is not kept: the receipt says how large it was and its digest. */
function boundOutput(receipt: TerminalReceipt, maxBytes: number): TerminalReceipt {
  if (receipt.outcome !== "returned") return receipt;
  const sizeBytes = Buffer.byteLength(receipt.output);
  if (sizeBytes <= maxBytes) return receipt;
  const sha256 = createHash("sha256").update(receipt.output).digest("hex");
  return failure("output_too_large", `the tool returned ${sizeBytes} bytes, more than the ${maxBytes} a journal entry keeps; the tool did run`, false, {
    sizeBytes: String(sizeBytes),
    sha256,
    maxBytes: String(maxBytes),
  });
}
