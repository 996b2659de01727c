import type { ServiceImpl } from "@connectrpc/connect";
import type { SessionService } from "../../../gen/skillenv/sessions/v1/sessions_pb.js";
import type { SessionSettings } from "../config/index.ts";
import type { EnvironmentKinds } from "../environments/index.ts";
import { Journal } from "../journal/index.ts";
import type { Store } from "../storage/store.ts";
import { SessionRecords } from "./records.ts";
import { createSessionService } from "./session-service.ts";
import { Sessions } from "./sessions.ts";

export { SessionService } from "../../../gen/skillenv/sessions/v1/sessions_pb.js";
export type { Sessions, CallToolOptions, ToolCallResult } from "./sessions.ts";
export { SKILLS_TOOL_NAME } from "./session-spec.ts";

export interface SessionsFeature {
  service: ServiceImpl<typeof SessionService>;
  /** Server-internal API (the run engine). */
  sessions: Sessions;
}

export interface SessionsFeatureOptions {
  store: Store;
  kinds: EnvironmentKinds;
  settings: SessionSettings;
  maxTurnSecs: number;
}

/** Opens the sessions and their journal, and recovers what a previous process left in flight. */
export async function createSessions(options: SessionsFeatureOptions): Promise<SessionsFeature> {
  const sessions = new Sessions({
    records: new SessionRecords(options.store),
    journal: new Journal(options.store),
    kinds: options.kinds,
    maxTurnSecs: options.maxTurnSecs,
    maxPayloadBytes: options.settings.maxPayloadBytes,
  });
  await sessions.recover();
  return { service: createSessionService(sessions, options.kinds), sessions };
}
