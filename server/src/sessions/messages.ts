import { create, fromJson, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import { timestampFromMs, ValueSchema, type Value } from "@bufbuild/protobuf/wkt";
import { ImplementationSchema, ReceiptSchema, type Receipt } from "../../../gen/skillenv/sessions/v1/common_pb.js";
import {
  EnvironmentSchema,
  SessionEventSchema,
  SessionSchema,
  ToolPlacementSchema,
  type Environment,
  type Session,
  type SessionEvent,
  type ToolPlacement,
} from "../../../gen/skillenv/sessions/v1/sessions_pb.js";
import type { EnvironmentKinds, TerminalReceipt } from "../environments/index.ts";
import type { JournalEvent } from "../journal/index.ts";
import { capDepth, exceedsDepth } from "../json/index.ts";
import type { EnvironmentRecord, SessionRecord, ToolRecord } from "./records.ts";
import { KIND_SCHEMAS } from "./session-spec.ts";

/** The state a session reports: `ready` once every automatic environment is set up (SPEC 3). */
export function sessionState(record: SessionRecord): string {
  if (record.lifecycle !== "active") return "ended";
  const automatic = record.environments.filter((environment) => environment.setup === "automatic");
  if (automatic.some((environment) => environment.state === "failed")) return "failed";
  return automatic.every((environment) => environment.state === "ready") ? "ready" : "setting_up";
}

export function sessionMessage(record: SessionRecord, kinds: EnvironmentKinds): Session {
  return create(SessionSchema, {
    id: record.id,
    state: sessionState(record),
    environments: record.environments.map((environment) => environmentMessage({ workspace: record.workspace, sessionId: record.id }, environment, kinds)),
    tools: record.tools.map(toolMessage),
    createdAt: timestampFromMs(Date.parse(record.createdAt)),
    ...(record.endedAt ? { endedAt: timestampFromMs(Date.parse(record.endedAt)) } : {}),
  });
}

/** One binding of session `sessionId` as the API shows it. */
export function environmentMessage(session: { workspace: string; sessionId: string }, record: EnvironmentRecord, kinds: EnvironmentKinds): Environment {
  const kind = kinds[record.kind];
  const described = { ...(kind.describe(record.options) as object), ...kind.describeLive?.({ ...session, environment: record.name }) };
  const value = fromJson(KIND_SCHEMAS[record.kind], described as JsonValue);
  return create(EnvironmentSchema, { name: record.name, setup: record.setup, state: record.state, kind: { case: record.kind, value } as Environment["kind"] });
}

function toolMessage(record: ToolRecord): ToolPlacement {
  return create(ToolPlacementSchema, {
    name: record.name,
    description: record.description,
    inputSchema: JSON.parse(record.inputSchema) as JsonObject,
    environment: record.environment,
    implementation: record.implementation === undefined ? undefined : fromJson(ImplementationSchema, record.implementation as JsonValue),
    configuration: jsonValue(record.configuration),
    approval: record.approval ?? "",
  });
}

export function receiptMessage(receipt: TerminalReceipt): Receipt {
  return fromJson(ReceiptSchema, receiptJson(receipt));
}

/** The receipt in its proto JSON form: what CallTool answers and what `operation.receipt` events carry. */
function receiptJson(receipt: TerminalReceipt): JsonObject {
  switch (receipt.outcome) {
    case "returned":
      return { returned: { output: payload(receipt.output) } };
    case "failure":
      return { failure: { code: receipt.code, message: receipt.message, retryable: receipt.retryable, details: receipt.details ?? {} } };
    case "unknown":
      return { unknown: { message: receipt.message } };
  }
}

/**
 * How deep JSON may nest where the API carries it, for protobuf decoders to read it
 * (server/src/json): an event's data is a Struct two messages down (WatchSessionResponse,
 * SessionEvent) and each level costs two messages of the 100 they read; a payload (a tool's input
 * or output) lies up to three levels inside the data (`receipt.returned.output`).
 */
const EVENT_DATA_MAX_DEPTH = 49;
const PAYLOAD_MAX_DEPTH = EVENT_DATA_MAX_DEPTH - 3;

/**
 * Every stored event can be delivered: what the journal holds is bounded where it enters
 * (SERVICE_JOURNAL_MAX_JSON_DEPTH), and anything deeper (an event written before that bound, a
 * custom agent loop's own notes) arrives with its too deep parts as their JSON text.
 */
export function eventMessage(sessionId: string, event: JournalEvent): SessionEvent {
  const data = capDepth(eventData(event), EVENT_DATA_MAX_DEPTH) as JsonObject;
  return create(SessionEventSchema, { seq: BigInt(event.seq), at: timestampFromMs(Date.parse(event.at)), sessionId, type: event.type, data });
}

/** Each event type's fields (docs/events.md): JSON payloads appear as JSON, not as text. */
function eventData(event: JournalEvent): JsonObject {
  switch (event.type) {
    case "operation.sent": {
      const { input, deadlineMs, ...rest } = event.operation;
      return { ...rest, deadline: new Date(deadlineMs).toISOString(), ...(input === undefined ? {} : { input: payload(input) }) };
    }
    case "operation.accepted":
      return { operationId: event.operationId, ...runIdOf(event) };
    case "operation.progress":
      return { operationId: event.operationId, data: event.data, ...runIdOf(event) };
    case "operation.receipt":
      return { operationId: event.operationId, environment: event.environment, kind: event.kind, receipt: receiptJson(event.receipt), ...runIdOf(event) };
    default:
      return event.data as JsonObject;
  }
}

function runIdOf(event: { runId?: string }): JsonObject {
  return event.runId ? { runId: event.runId } : {};
}

/** Tools speak JSON text; text that is not JSON is carried as a JSON string. */
function parseOutput(text: string): JsonValue {
  try {
    return JSON.parse(text) as JsonValue;
  } catch {
    return text;
  }
}

/** A tool's input or output in an event or a receipt; as its text, a string, where it nests too deeply to be carried there. */
function payload(text: string): JsonValue {
  const value = parseOutput(text);
  return exceedsDepth(value, PAYLOAD_MAX_DEPTH) ? text : value;
}

function jsonValue(text: string): Value {
  return fromJson(ValueSchema, parseOutput(text));
}
