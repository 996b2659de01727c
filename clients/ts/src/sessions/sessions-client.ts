import type { Session as SessionMessage } from "../../../../gen/skillenv/sessions/v1/sessions_pb.js";
import { mapBounded } from "../map-bounded.ts";
import type { EnvironmentDefinition } from "./environments.ts";
import { checkPlacedIn, type ImplementationResolver } from "./resolve.ts";
import { Session, type SessionRpc } from "./session.ts";
import type { ToolPlacement } from "./tools.ts";
import { environmentMessage, recordFrom, required, toolMessage } from "./wire.ts";

/** Implementations admitted at once while creating a session, as for skill uploads. */
const RESOLVE_CONCURRENCY = 4;

export interface SessionDefinition {
  /** Each environment the tools use, named once. */
  environments: readonly EnvironmentDefinition[];
  tools?: readonly ToolPlacement[];
}

export interface ListOptions {
  /** Default 50, at most 1000. */
  pageSize?: number;
  /** The previous page's `nextPageToken`; empty for the first page. */
  pageToken?: string;
}

export interface SessionPage {
  /** Newest first. */
  sessions: Session[];
  /** Empty on the last page. */
  nextPageToken: string;
}

export interface SessionsClient {
  /**
   * Admits what the tools' implementations need, then creates the session; automatic
   * environments are set up before it answers. Nothing is created when the server refuses.
   */
  create(definition: SessionDefinition): Promise<Session>;
  /** A session of this workspace; another workspace's id is refused as session_not_found. */
  get(id: string): Promise<Session>;
  list(options?: ListOptions): Promise<SessionPage>;
  /** Every session of the workspace, newest first, fetching a page at a time. */
  all(options?: { pageSize?: number }): AsyncIterable<Session>;
  delete(id: string): Promise<void>;
}

export function createSessionsClient(rpc: SessionRpc, resolveImplementation: ImplementationResolver): SessionsClient {
  const session = (message: SessionMessage | undefined) => new Session(rpc, recordFrom(required(message, "the session")));

  const client: SessionsClient = {
    async create(definition) {
      const placements = definition.tools ?? [];
      // Every placement is checked before anything is admitted.
      for (const placement of placements) checkPlacedIn(placement, definition.environments);
      const tools = await mapBounded(placements, RESOLVE_CONCURRENCY, async (placement) => toolMessage(placement, await resolveImplementation(placement.implementation)));
      const response = await rpc.createSession({ environments: definition.environments.map(environmentMessage), tools });
      return session(response.session);
    },
    async get(id) {
      return session((await rpc.getSession({ sessionId: id })).session);
    },
    async list(options = {}) {
      const page = await rpc.listSessions({ pageSize: options.pageSize ?? 0, pageToken: options.pageToken ?? "" });
      return { sessions: page.sessions.map(session), nextPageToken: page.nextPageToken };
    },
    async *all(options = {}) {
      let pageToken = "";
      do {
        const page = await client.list({ pageSize: options.pageSize ?? 0, pageToken });
        yield* page.sessions;
        pageToken = page.nextPageToken;
      } while (pageToken !== "");
    },
    async delete(id) {
      await rpc.deleteSession({ sessionId: id });
    },
  };
  return client;
}
