import { redactText } from "../redaction/index.ts";
import type { EnvironmentBinding, ExecuteOperation, InterimReceipt, Staging, TerminalReceipt } from "./port.ts";

/**
 * A binding whose every receipt, interim ones included, has the binding's secrets cut out of all
 * the text its environment wrote: a returned output, a failure's code, message and details, an
 * unknown's message, a progress message. What an environment that holds a credential of ours (an
 * extension) echoes of it is then never journaled, shown or stored, wherever the receipt goes
 * (events, CallTool's answer, a run's record). `secrets` is asked once per operation, so that an
 * unsealed credential lives only as long as the operation.
 */
export function redactingBinding(binding: EnvironmentBinding, secrets: () => readonly string[]): EnvironmentBinding {
  const redacted = async (operation: (secrets: readonly string[]) => Promise<TerminalReceipt>) => {
    const known = secrets();
    const receipt = await operation(known);
    return known.length === 0 ? receipt : redactReceipt(receipt, known);
  };
  return {
    stagesFiles: binding.stagesFiles,
    setup: (deadlineMs: number) => redacted(() => binding.setup(deadlineMs)),
    stage: (staging: Staging, deadlineMs: number, operationId: string) => redacted(() => binding.stage(staging, deadlineMs, operationId)),
    execute: (operation: ExecuteOperation) =>
      redacted((known) =>
        binding.execute({ ...operation, report: (receipt) => operation.report(known.length === 0 ? receipt : redactInterim(receipt, known)) }),
      ),
    cancel: (operationId: string, deadlineMs: number) => redacted(() => binding.cancel(operationId, deadlineMs)),
    detach: (deadlineMs: number) => redacted(() => binding.detach(deadlineMs)),
    teardown: (deadlineMs: number) => redacted(() => binding.teardown(deadlineMs)),
    release: () => binding.release?.(),
  };
}

function redactReceipt(receipt: TerminalReceipt, secrets: readonly string[]): TerminalReceipt {
  const redact = (text: string) => redactText(text, secrets);
  switch (receipt.outcome) {
    case "returned":
      return { ...receipt, output: redact(receipt.output) };
    case "failure":
      return {
        ...receipt,
        code: redact(receipt.code),
        message: redact(receipt.message),
        ...(receipt.details ? { details: Object.fromEntries(Object.entries(receipt.details).map(([key, value]) => [redact(key), redact(value)])) } : {}),
      };
    case "unknown":
      return { ...receipt, message: redact(receipt.message) };
  }
}

function redactInterim(receipt: InterimReceipt, secrets: readonly string[]): InterimReceipt {
  return receipt.outcome === "progress" ? { ...receipt, data: redactText(receipt.data, secrets) } : receipt;
}
