import { createHash } from "node:crypto";
import { failure, unknown, type InterimReceipt, type TerminalReceipt } from "../environments/index.ts";
import type { ProgressLimits } from "../config/index.ts";
import type { Journal, SentOperation } from "../journal/index.ts";
import { isJsonText, jsonTextDepth } from "../json/index.ts";
import { fitsBytes } from "./field-limits.ts";
import { ProgressBudget } from "./progress-budget.ts";

export interface JournaledOptions {
  journal: Journal;
  /** Outputs above this many bytes end the operation as output_too_large. */
  maxOutputBytes: number;
  /** Outputs nested deeper than this end the operation as output_too_deep. */
  maxOutputDepth: number;
  /** Progress receipts journaled per operation; the rest are dropped (the terminal receipt never is). */
  progress: ProgressLimits;
  /** SERVICE_MAX_FIELD_BYTES: a failure's code, message and details, and an unknown's message, each at most this. */
  maxFieldBytes: number;
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
  receipt = boundFailure(boundOutput(receipt, options), options.maxFieldBytes);
  await journal.settle(sessionId, operation, receipt);
  return receipt;
}

/**
 * A failure's text is the environment's own (a guest's `err`, a host's or an extension's
 * receipt), kept in the journal and, for a custom agent loop, in the run's record: each of its
 * code, message and details is kept up to `maxBytes` (a longer message is cut and says so,
 * details that do not fit are replaced by their size), as is an unknown's message.
 */
function boundFailure(receipt: TerminalReceipt, maxBytes: number): TerminalReceipt {
  if (receipt.outcome === "returned") return receipt;
  const message = cutText(receipt.message, maxBytes);
  if (receipt.outcome === "unknown") return message === receipt.message ? receipt : unknown(message);
  const code = cutText(receipt.code, maxBytes, "");
  const detailsBytes = receipt.details ? Buffer.byteLength(JSON.stringify(receipt.details)) : 0;
  const details = detailsBytes > maxBytes ? { droppedDetailsBytes: String(detailsBytes) } : receipt.details;
  if (message === receipt.message && code === receipt.code && details === receipt.details) return receipt;
  return failure(code, message, receipt.retryable, details);
}

/** `text` within `maxBytes` of UTF-8, cut at a character and ended with `marker` when it was longer. */
function cutText(text: string, maxBytes: number, marker = ` [cut: ${Buffer.byteLength(text)} bytes in all]`): string {
  if (fitsBytes(text, maxBytes)) return text;
  const room = Math.max(0, maxBytes - Buffer.byteLength(marker));
  // Decoding a cut UTF-8 prefix ends in U+FFFD where a character was split: drop that one.
  const head = Buffer.from(text.slice(0, room), "utf8")
    .subarray(0, room)
    .toString("utf8")
    .replace(/\uFFFD$/, "");
  return `${head}${marker}`;
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
  return failure(
    "output_too_deep",
    `the tool returned JSON nested ${depth} levels deep, more than the ${maxDepth} a journal entry keeps; the tool did run`,
    false,
    {
      depth: String(depth),
      sha256: sha256(),
      maxDepth: String(maxDepth),
    },
  );
}
