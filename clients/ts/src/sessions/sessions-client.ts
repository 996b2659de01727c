import type { Session as SessionMessage } from "../../../../gen/skillenv/sessions/v1/sessions_pb.js";
import { mapBounded } from "../map-bounded.ts";
import { prepareRunInput, runHandle, type Run, type RunOptions, type RunsDeps } from "../runs/index.ts";
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

/** A session and its first run, submitted in the same call once the session is ready. */
export interface SessionWithRunDefinition extends SessionDefinition {
  run: RunOptions;
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
   * With a `run`, its skills and files are uploaded alongside the admissions, and the session
   * is created with its first run: the answer holds both handles. That call is not retried
   * (a session has no idempotency key).
   */
  create(definition: SessionWithRunDefinition): Promise<{ session: Session; run: Run }>;
  create(definition: SessionDefinition): Promise<Session>;
  /** A session of this workspace; another workspace's id is refused as session_not_found. */
  get(id: string): Promise<Session>;
  list(options?: ListOptions): Promise<SessionPage>;
  /** Every session of the workspace, newest first, fetching a page at a time. */
  all(options?: { pageSize?: number }): AsyncIterable<Session>;
  delete(id: string): Promise<void>;
}

export function createSessionsClient(rpc: SessionRpc, resolveImplementation: ImplementationResolver, runs: RunsDeps): SessionsClient {
  const session = (message: SessionMessage | undefined) => new Session(rpc, recordFrom(required(message, "the session")), runs);

  /** Admits the tools' implementations and uploads the first run's skills and files, all at once (spec §4.1 rule 4). */
  function create(definition: SessionWithRunDefinition): Promise<{ session: Session; run: Run }>;
  function create(definition: SessionDefinition): Promise<Session>;
  async function create(definition: SessionDefinition | SessionWithRunDefinition): Promise<Session | { session: Session; run: Run }> {
    const placements = definition.tools ?? [];
    // Every placement is checked before anything is admitted.
    for (const placement of placements) checkPlacedIn(placement, definition.environments);
    const firstRun = "run" in definition ? definition.run : undefined;
    const [tools, run] = await Promise.all([
      mapBounded(placements, RESOLVE_CONCURRENCY, async (placement) => toolMessage(placement, await resolveImplementation(placement.implementation))),
      firstRun && prepareRunInput(firstRun, runs.uploads),
    ]);
    const response = await rpc.createSession({ environments: definition.environments.map(environmentMessage), tools, run });
    const created = session(response.session);
    return firstRun ? { session: created, run: runHandle(runs.rpc, created, response.run) } : created;
  }

  const client: SessionsClient = {
    create,
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
