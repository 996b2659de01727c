import type { SessionSettings } from "../config/index.ts";
import type { EnvironmentKinds } from "../environments/index.ts";
import { Journal } from "../journal/index.ts";
import type { SessionOwnership } from "../replicas/index.ts";
import type { Store } from "../storage/index.ts";
import { SessionRecords } from "./records.ts";
import { Sessions, type SessionsOptions } from "./sessions.ts";

export { SessionService } from "../../../gen/skillenv/sessions/v1/sessions_pb.js";
export type { AgentLoopPlacement, Sessions, CallToolOptions, ClosingListener, ToolCallResult } from "./sessions.ts";
export type { EnvironmentRecord, Lifecycle, SessionRecord, ToolRecord } from "./records.ts";
export { SKILLS_TOOL_NAME } from "./session-spec.ts";
export { ProgressBudget } from "./progress-budget.ts";
export { checkJsonSize, checkTextChars, checkTextSize, FIELD_SETTING } from "./field-limits.ts";
export { createSessionService, type FirstRun } from "./session-service.ts";

export interface SessionsFeatureOptions {
  store: Store;
  kinds: EnvironmentKinds;
  settings: SessionSettings;
  maxTurnSecs: number;
  /** SERVICE_LIST_MAX_BYTES. */
  listMaxBytes: number;
  /** Told of every operation that ended (the metrics). */
  onOperation?: SessionsOptions["onOperation"];
  ownership: SessionOwnership;
}

/**
 * Opens the sessions and their journal, and recovers what a previous process left in flight. On
 * a shared store every journal write is fenced by the session's owner row, and a replica recovers
 * a session when it takes it over instead (server/src/replicas).
 */
export async function createSessions(options: SessionsFeatureOptions): Promise<Sessions> {
  const { ownership } = options;
  const fence = ownership.shared ? { conditions: (id: string) => ownership.fence(id), lost: (id: string) => ownership.lost(id) } : undefined;
  const sessions = new Sessions({
    ownership,
    records: new SessionRecords(options.store),
    journal: new Journal(options.store, fence),
    kinds: options.kinds,
    maxTurnSecs: options.maxTurnSecs,
    maxPayloadBytes: options.settings.maxPayloadBytes,
    maxJsonDepth: options.settings.maxJsonDepth,
    progress: options.settings.progress,
    listMaxBytes: options.listMaxBytes,
    sizeLimits: { maxFieldBytes: options.settings.maxFieldBytes, sessionMaxBytes: options.settings.sessionMaxBytes },
    onOperation: options.onOperation,
    idleBytes: options.settings.sessionCacheBytes,
  });
  if (!ownership.shared) await sessions.recover();
  return sessions;
}
