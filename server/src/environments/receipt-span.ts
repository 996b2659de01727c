import { isErrorCode } from "../errors/index.ts";
import { inSpan, markFailed, type Attributes, type SpanKind } from "../tracing/index.ts";
import type { TerminalReceipt } from "./port.ts";

/**
 * Runs an operation's `work` (the session's whole operation, or one adapter's dispatch) in a
 * span that ends with its receipt's outcome. A failure is an error of code `error.type`: the
 * catalogue's code, or `tool` for a code the tool or environment chose (its text is theirs, as
 * the metrics count it); an unknown outcome is `unknown`. Nothing of the receipt's
 * output or message is recorded.
 */
export function inReceiptSpan(name: string, attributes: Attributes, work: () => Promise<TerminalReceipt>, kind?: SpanKind): Promise<TerminalReceipt> {
  return inSpan(
    name,
    attributes,
    async (span) => {
      const receipt = await work();
      span.setAttribute("skillenv.operation.outcome", receipt.outcome);
      if (receipt.outcome === "failure") markFailed(span, isErrorCode(receipt.code) ? receipt.code : "tool");
      else if (receipt.outcome === "unknown") markFailed(span, "unknown");
      return receipt;
    },
    kind,
  );
}
