import { fromJson, toJson, type JsonObject, type JsonValue, type MessageInitShape } from "@bufbuild/protobuf";
import { timestampDate, ValueSchema, type Timestamp, type Value } from "@bufbuild/protobuf/wkt";
import type { ImplementationSchema } from "../../gen/skillenv/sessions/v1/common_pb.js";
import type {
  CallToolResponse,
  EnvironmentSchema,
  Environment as EnvironmentMessage,
  Session as SessionMessage,
  SessionEvent as SessionEventMessage,
  ToolPlacementSchema,
} from "../../gen/skillenv/sessions/v1/sessions_pb.js";
import type { EnvironmentDefinition, SetupMode } from "./environments.ts";
import { credentialOf } from "./credentials.ts";
import { jsonSnapshot } from "./json.ts";
import type { PlacedImplementation } from "./resolve.ts";
import { environmentName, isOpaque, type ToolPlacement } from "./tools.ts";

// The client's own shapes of what the server answers, and their conversion from the messages.

/** "ready" once every automatic environment is set up (spec §3). */
export type SessionState = "setting_up" | "ready" | "failed" | "ended";
export type EnvironmentState = "pending" | "ready" | "failed" | "detached";

export interface EnvironmentStatus {
  name: string;
  kind: "service" | "host" | "extension" | "mcp";
  setup: SetupMode;
  state: EnvironmentState;
  /** Host environments only: whether a host's command stream is open for it on the server that answered. */
  hostAttached?: boolean;
}

export interface PlacedTool {
  name: string;
  description: string;
  /** The name of the environment it runs in. */
  environment: string;
  /** "always": each call of a run waits for a person's decision (docs/runs.md, "Approvals"). */
  approval: "always" | "never";
}

/** A session as the server last reported it. */
export interface SessionRecord {
  id: string;
  state: SessionState;
  /** In the order they were given. */
  environments: EnvironmentStatus[];
  tools: PlacedTool[];
  createdAt: Date;
  /** Unset while the session has not ended. */
  endedAt: Date | undefined;
}

/** How an environment operation ended: its terminal receipt (spec §3 rule 2). */
export type Receipt =
  | { outcome: "returned"; output: JsonValue }
  | { outcome: "failure"; code: string; message: string; retryable: boolean; details: Record<string, string> }
  /** It may or may not have taken effect; the service never replays it. */
  | { outcome: "unknown"; message: string };

/** One entry of a session's journal. */
export interface SessionEvent {
  /** Position in the journal: 1, 2, 3, ... */
  seq: number;
  at: Date;
  /** e.g. "operation.sent", "operation.receipt", "session.ended". */
  type: string;
  data: Record<string, unknown>;
}

type ReceiptMessage = NonNullable<CallToolResponse["receipt"]>;

export function environmentMessage(environment: EnvironmentDefinition): MessageInitShape<typeof EnvironmentSchema> {
  return { name: environment.name, setup: environment.setup, kind: kindMessage(environment) };
}

/** Each kind of definition becomes its case of the message's `kind` oneof. */
function kindMessage(environment: EnvironmentDefinition): MessageInitShape<typeof EnvironmentSchema>["kind"] {
  switch (environment.kind) {
    case "service": {
      const { filesystem, network, secrets } = environment;
      return { case: "service", value: { grants: { filesystem: { ...filesystem }, network: [...network], secrets: [...secrets] } } };
    }
    case "host":
      return { case: "host", value: {} };
    case "extension":
      return {
        case: "extension",
        value: { url: environment.url, credential: credentialOf(environment) ?? "", configuration: jsonValue(environment.configuration) },
      };
    case "mcp":
      return {
        case: "mcp",
        value: {
          url: environment.url,
          credential: credentialOf(environment) ?? "",
          tools: [...environment.tools],
          approval: environment.approval === "always" ? "always" : "",
        },
      };
  }
}

export function toolMessage(placement: ToolPlacement, implementation: PlacedImplementation): MessageInitShape<typeof ToolPlacementSchema> {
  return {
    name: placement.name,
    description: placement.description,
    inputSchema: placement.inputSchema as JsonObject | undefined,
    environment: environmentName(placement),
    // None: a host tool served by its name alone.
    implementation: implementation === undefined ? undefined : { kind: implementationKind(implementation) },
    configuration: jsonValue(placement.configuration),
    // The wire says "never" by leaving the field empty.
    approval: placement.approval === "always" ? "always" : "",
  };
}

function implementationKind(implementation: NonNullable<PlacedImplementation>): MessageInitShape<typeof ImplementationSchema>["kind"] {
  if (typeof implementation === "string") return { case: "tool", value: implementation };
  if (isOpaque(implementation)) return { case: "opaque", value: fromJson(ValueSchema, jsonSnapshot(implementation.opaque)) };
  return { case: "program", value: { id: implementation.id, runtime: implementation.runtime } };
}

/** Any value as JSON.stringify sees it (toJSON, dropped undefined fields); undefined stays unset. */
export function jsonValue(value: unknown): Value | undefined {
  return value === undefined ? undefined : fromJson(ValueSchema, jsonSnapshot(value));
}

export function recordFrom(message: SessionMessage): SessionRecord {
  return {
    id: message.id,
    state: message.state as SessionState,
    environments: message.environments.map(environmentStatusFrom),
    tools: message.tools.map(({ name, description, environment, approval }) => ({
      name,
      description,
      environment,
      approval: approval === "always" ? "always" : "never",
    })),
    createdAt: dateFrom(message.createdAt, "createdAt"),
    endedAt: message.endedAt && timestampDate(message.endedAt),
  };
}

export function environmentStatusFrom(message: EnvironmentMessage): EnvironmentStatus {
  return {
    name: message.name,
    kind: required(message.kind.case, `environment ${message.name}'s kind`),
    setup: message.setup as SetupMode,
    state: message.state as EnvironmentState,
    ...(message.kind.case === "host" ? { hostAttached: message.kind.value.attached } : {}),
  };
}

export function receiptFrom(message: ReceiptMessage | undefined): Receipt {
  const { outcome } = required(message, "the receipt");
  switch (outcome.case) {
    case "returned":
      return { outcome: "returned", output: outcome.value.output ? toJson(ValueSchema, outcome.value.output) : null };
    case "failure": {
      const { code, message, retryable, details } = outcome.value;
      return { outcome: "failure", code, message, retryable, details };
    }
    case "unknown":
      return { outcome: "unknown", message: outcome.value.message };
    case undefined:
      throw new Error("the server answered a receipt without an outcome");
  }
}

export function eventFrom(message: SessionEventMessage): SessionEvent {
  return { seq: Number(message.seq), at: dateFrom(message.at, "the event's time"), type: message.type, data: message.data ?? {} };
}

/** A field proto3 cannot mark required, which the server always sets. */
export function required<T>(value: T | undefined, what: string): T {
  if (value === undefined) throw new Error(`the server's answer lacks ${what}`);
  return value;
}

function dateFrom(timestamp: Timestamp | undefined, what: string): Date {
  return timestampDate(required(timestamp, what));
}
