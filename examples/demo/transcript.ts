import type { RunRecord, SessionEvent } from "@skillenv/client";

/** Inputs, outputs and messages longer than this are cut short in the transcript. */
const WIDTH = 96;

/**
 * A run's events as a transcript, one line per event: its place in the session's journal, who
 * acted, and what they did. It remembers what each operation was for and where it went, since
 * the operation's later events name only its id.
 */
export class Transcript {
  readonly #operations = new Map<string, { environment: string; purpose: string }>();

  line(event: SessionEvent): string {
    const data = event.data as Data;
    if (event.type === "operation.sent") this.#operations.set(data.operationId, { environment: data.environment, purpose: data.tool ?? data.kind });
    const operation = this.#operations.get(data.operationId) ?? { environment: "env", purpose: data.kind ?? data.operationId };
    const [who, what] = OPERATION_UPDATES.has(event.type) ? operationUpdate(event.type, data, operation) : describe(event.type, data);
    return `${String(event.seq).padStart(4)}  ${who.padEnd(10)} ${what}`;
  }
}

const OPERATION_UPDATES: ReadonlySet<string> = new Set(["operation.accepted", "operation.progress", "operation.receipt"]);

function operationUpdate(type: string, data: Data, operation: { environment: string; purpose: string }): [who: string, what: string] {
  if (type === "operation.accepted") return [operation.environment, `accepts ${operation.purpose}`];
  if (type === "operation.progress") return [operation.environment, `reports on ${operation.purpose}: ${quote(data.data)}`];
  return [operation.environment, `answers ${operation.purpose}: ${receiptOutcome(data.receipt)}`];
}

/** The run's outcome in one line, e.g. "completed (end_turn): 5 rounds, 5 tool calls, 2417 + 396 tokens". */
export function outcomeLine(run: RunRecord): string {
  const counts = `${run.rounds} rounds, ${run.toolCalls} tool calls, ${run.usage.inputTokens} + ${run.usage.outputTokens} tokens`;
  if (run.status === "completed") return `${run.status} (${run.stopReason}): ${counts}`;
  return `${run.status}: ${run.error?.code}: ${run.error?.message} (${counts})`;
}

/** An event's data, read as docs/events.md documents it: its shape depends on the type, and each case reads its own. */
// biome-ignore lint/suspicious/noExplicitAny: each event type's case reads the fields docs/events.md gives it
type Data = Record<string, any>;

function describe(type: string, data: Data): [who: string, what: string] {
  switch (type) {
    case "run.submitted":
      return ["user", `asks ${data.model.name}: ${quote(data.message)}${submittedWith(data)}`];
    case "turn.started":
      return ["service", "starts the turn"];
    case "model.request":
      return ["service", `calls the model, round ${data.round}: ${plural(data.messages, "message")}, tools ${data.tools.join(", ")}`];
    case "assistant.delta":
      return ["model", `streams ${quote(data.text)}`];
    case "assistant.message":
      return ["model", replied(data)];
    case "model.usage":
      return ["model", `read ${data.inputTokens} tokens, wrote ${data.outputTokens}`];
    case "tool.call":
      return ["model", `calls ${data.name} ${abbreviate(JSON.stringify(data.input))}`];
    case "tool.result":
      return [data.name, toolOutcome(data)];
    case "operation.sent":
      return ["service", sentOperation(data)];
    case "turn.completed":
      return ["service", `turn completed (${data.stopReason}) after ${plural(data.rounds, "round")} and ${plural(data.toolCalls, "tool call")}`];
    case "turn.failed":
    case "run.cancelled":
      return ["service", `${type === "turn.failed" ? "turn failed" : "run cancelled"}: ${data.code}: ${data.message}`];
    default:
      return ["", `${type} ${abbreviate(JSON.stringify(data))}`];
  }
}

function submittedWith(data: Data): string {
  const parts = [];
  if (data.skills.length > 0) parts.push(`skills ${data.skills.map((skill: Data) => skill.name).join(", ")}`);
  if (data.files.length > 0) parts.push(`files ${data.files.map((file: Data) => file.path).join(", ")}`);
  return parts.length > 0 ? ` (${parts.join("; ")})` : "";
}

function replied(data: Data): string {
  const calls = data.toolCalls.map((call: Data) => call.name).join(", ");
  if (calls === "") return `answers ${quote(data.text)}`;
  return data.text === "" ? `asks for ${calls}` : `says ${quote(data.text)} and asks for ${calls}`;
}

function toolOutcome(data: Data): string {
  if (data.outcome === "returned") return `returns ${abbreviate(typeof data.output === "string" ? data.output : JSON.stringify(data.output))}`;
  if (data.outcome === "failure") return `fails: ${data.error.code}: ${abbreviate(data.error.message)}`;
  return `may or may not have run: ${data.message}`;
}

function sentOperation(data: Data): string {
  if (data.kind === "execute") return `sends ${data.tool} to ${data.environment}`;
  if (data.kind === "stage") return `stages ${plural(data.input.files.length, "file")} into ${data.environment}'s /workspace`;
  return `sends ${data.kind} to ${data.environment}`;
}

function receiptOutcome(receipt: Data): string {
  if (receipt.returned) return "returned";
  if (receipt.failure) return `failed: ${receipt.failure.code}`;
  return `unknown outcome: ${receipt.unknown?.message}`;
}

function quote(text: string): string {
  return `"${abbreviate(text)}"`;
}

/** Whitespace runs become one space, and what passes the width ends in an ellipsis. */
function abbreviate(text: string): string {
  const flat = text.replace(/\s+/g, " ");
  return flat.length <= WIDTH ? flat : `${flat.slice(0, WIDTH - 1)}…`;
}

function plural(count: number, noun: string): string {
  return `${count} ${noun}${count === 1 ? "" : "s"}`;
}
