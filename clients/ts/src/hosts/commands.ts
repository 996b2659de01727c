import { toJson, type JsonValue, type MessageInitShape } from "@bufbuild/protobuf";
import { timestampDate, ValueSchema } from "@bufbuild/protobuf/wkt";
import type { Command, FailureSchema } from "../../gen/skillenv/env/v1/host_pb.js";
import { jsonValue, required } from "../sessions/wire.ts";
import type { ReceiptInit } from "./command-stream.ts";
import type { HostToolContext, HostToolHandler } from "./host-env.ts";

type FailureInit = MessageInitShape<typeof FailureSchema>;

/** Codes a handler's own failures may carry, like the service's. */
const SNAKE_CASE = /^[a-z][a-z0-9_]*$/;

/**
 * Answers one command: `accepted` at once, then runs the handler and answers `returned` with
 * its output or `failure`. Never throws: whatever the handler does ends in a receipt.
 */
export async function runCommand(
  command: Command,
  handler: HostToolHandler | undefined,
  served: readonly string[],
  signal: AbortSignal,
  send: (receipt: ReceiptInit) => void,
): Promise<void> {
  const answer = (receipt: ReceiptInit["receipt"]) => send({ operationId: command.operationId, receipt });
  if (!handler) {
    const serving = served.length > 0 ? `it serves ${served.join(", ")}` : "it serves no tools";
    answer({ case: "failure", value: { code: "tool_not_served", message: `this host does not serve tool ${command.tool}; ${serving}` } });
    return;
  }
  answer({ case: "accepted", value: {} });
  let finished = false;
  const progress = (message: string) => {
    // After the terminal receipt the service would refuse it.
    if (!finished) answer({ case: "progress", value: { message } });
  };
  let terminal: ReceiptInit["receipt"];
  try {
    const output = await handler(jsonOf(command.input), contextOf(command, signal, progress));
    terminal = { case: "returned", value: { output: outputValue(output) } };
  } catch (error) {
    terminal = { case: "failure", value: failureOf(error, signal) };
  }
  finished = true;
  answer(terminal);
}

function contextOf(command: Command, signal: AbortSignal, progress: (message: string) => void): HostToolContext {
  return {
    signal,
    progress,
    operationId: command.operationId,
    implementation: command.implementation && toJson(ValueSchema, command.implementation),
    configuration: jsonOf(command.configuration),
    deadline: timestampDate(required(command.deadline, "the command's deadline")),
    sessionId: command.sessionId,
    tool: command.tool,
  };
}

function jsonOf(value: Command["input"]): JsonValue {
  return value ? toJson(ValueSchema, value) : null;
}

/** The output as JSON, or an error naming why it is not JSON (a BigInt, a cycle, a function). */
function outputValue(output: unknown): ReturnType<typeof jsonValue> {
  try {
    return jsonValue(output === undefined ? null : output);
  } catch (error) {
    throw new Error(`the tool's output is not JSON: ${(error as Error).message}`, { cause: error });
  }
}

/**
 * A thrown `{ code, message }` keeps its code; a throw once the operation was cancelled is
 * `cancelled`; anything else is `tool_error` with the error's message.
 */
function failureOf(error: unknown, signal: AbortSignal): FailureInit {
  if (isToolFailure(error)) {
    return { code: error.code, message: error.message, retryable: error.retryable === true, details: stringEntries(error.details) };
  }
  const message = error instanceof Error ? error.message : String(error);
  return { code: signal.aborted ? "cancelled" : "tool_error", message };
}

interface ToolFailure {
  code: string;
  message: string;
  retryable?: unknown;
  details?: unknown;
}

function isToolFailure(error: unknown): error is ToolFailure {
  if (typeof error !== "object" || error === null) return false;
  const { code, message } = error as Partial<Record<"code" | "message", unknown>>;
  return typeof code === "string" && SNAKE_CASE.test(code) && typeof message === "string";
}

/** The string-valued entries of `details`: the receipt's details map strings to strings. */
function stringEntries(details: unknown): Record<string, string> {
  if (typeof details !== "object" || details === null) return {};
  return Object.fromEntries(Object.entries(details).filter((entry): entry is [string, string] => typeof entry[1] === "string"));
}
