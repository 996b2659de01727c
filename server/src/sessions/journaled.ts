import { createHash } from "node:crypto";
import { failure, unknown, type InterimReceipt, type TerminalReceipt } from "../environments/index.ts";
import type { Journal, SentOperation } from "../journal/index.ts";
import { isJsonText, jsonTextDepth } from "../json/index.ts";

/** Progress receipts journaled per operation; later ones are dropped (the terminal receipt never is). */
export const MAX_PROGRESS_EVENTS = 100;
/** Largest progress payload kept; larger ones are dropped. */
export const MAX_PROGRESS_BYTES = 16 * 1024;

export interface JournaledOptions {
  journal: Journal;
  /** Outputs above this many bytes end the operation as output_too_large. */
  maxOutputBytes: number;
  /** Outputs nested deeper than this end the operation as output_too_deep. */
  maxOutputDepth: number;
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
  let progressEvents = 0;
  // Interim receipts are not awaited: the journal keeps call order, so the terminal receipt commits
  // after them, and an `accepted` does not cost the operation a sequential fsync. A lost interim
  // write loses only progress the terminal receipt supersedes.
  const report = (receipt: InterimReceipt) => {
    if (receipt.outcome === "progress" && (++progressEvents > MAX_PROGRESS_EVENTS || Buffer.byteLength(receipt.data) > MAX_PROGRESS_BYTES)) return;
    journal.interim(sessionId, operation, receipt).catch(() => undefined);
  };
  let receipt: TerminalReceipt;
  try {
    receipt = await dispatch(report, seq);
  } catch (error) {
    receipt = unknown(`the environment failed unexpectedly while handling the operation: ${error instanceof Error ? error.message : String(error)}`);
  }
  receipt = boundOutput(receipt, options);
  await journal.settle(sessionId, operation, receipt);
  return receipt;
}

/**
 * An output too large or too deeply nested to journal is not kept: the receipt says how large or
 * how deep it was and its digest. Every environment's receipts pass here, whoever wrote them (a
 * guest, a host, an extension), before anything stores or answers them.
 */
function boundOutput(receipt: TerminalReceipt, { maxOutputBytes: maxBytes, maxOutputDepth: maxDepth }: JournaledOptions): TerminalReceipt {
  if (receipt.outcome !== "returned") return receipt;
  const sizeBytes = Buffer.byteLength(receipt.output);
  const sha256 = () => createHash("sha256").update(receipt.output).digest("hex");
  if (sizeBytes > maxBytes) {
    return failure("output_too_large", `the tool returned ${sizeBytes} bytes, more than the ${maxBytes} a journal entry keeps; the tool did run`, false, {
      sizeBytes: String(sizeBytes),
      sha256: sha256(),
      maxBytes: String(maxBytes),
    });
  }
  const depth = jsonTextDepth(receipt.output);
  // Output text that is not JSON is kept as a string, whatever brackets it holds.
  if (depth <= maxDepth || !isJsonText(receipt.output)) return receipt;
  return failure("output_too_deep", `the tool returned JSON nested ${depth} levels deep, more than the ${maxDepth} a journal entry keeps; the tool did run`, false, {
    depth: String(depth),
    sha256: sha256(),
    maxDepth: String(maxDepth),
  });
}
