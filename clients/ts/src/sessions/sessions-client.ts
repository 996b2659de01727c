import type { MessageInitShape } from "@bufbuild/protobuf";
import type { CreateSessionRequestSchema, Session as SessionMessage } from "../../gen/skillenv/sessions/v1/sessions_pb.js";
import type { HostDeps } from "../hosts/host-connection.ts";
import type { HostEnvironmentDefinition } from "../hosts/host-env.ts";
import { closeAll, startToolServers, type RunningToolServer } from "../hosts/tool-server.ts";
import { mapBounded } from "../map-bounded.ts";
import { prepareRunInput, runHandle, submitRun, type Run, type RunOptions, type RunsDeps, type RunSubmission } from "../runs/index.ts";
import type { EnvironmentDefinition } from "./environments.ts";
import { checkAgentLoopPlacedIn, checkPlacedIn, placedImplementation, type ImplementationResolver } from "./resolve.ts";
import { Session, type SessionRpc } from "./session.ts";
import type { ToolPlacement } from "./tools.ts";
import { environmentMessage, recordFrom, required, toolMessage } from "./wire.ts";

type EnvironmentMessages = MessageInitShape<typeof CreateSessionRequestSchema>["environments"];
type ToolMessages = MessageInitShape<typeof CreateSessionRequestSchema>["tools"];

/** Implementations admitted at once while creating a session, as for skill uploads. */
const RESOLVE_CONCURRENCY = 4;

export interface SessionDefinition {
  /** Each environment the tools use, named once. */
  environments: readonly EnvironmentDefinition[];
  tools?: readonly ToolPlacement[];
  /**
   * Default true: this process serves every host environment of `environments` (`hostEnv`) as
   * soon as the session exists, and `create` answers once they are connected (see
   * `session.hosts`). False: serve them later with `session.serve`, or from another process.
   */
  serveHosts?: boolean;
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
   * With a `run`, its skills and files are uploaded (and its agent loop's component or program
   * admitted) alongside the admissions, and the session
   * is created with its first run: the answer holds both handles. That call is not retried
   * (a session has no idempotency key). With host environments to serve, the session is
   * created first, the run submitted once the hosts are connected (so that it cannot call a host
   * tool before its host is there), and a failure on the way deletes the session again.
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

export function createSessionsClient(rpc: SessionRpc, resolveImplementation: ImplementationResolver, runs: RunsDeps, hosts: HostDeps): SessionsClient {
  const session = (message: SessionMessage | undefined, started?: Map<string, RunningToolServer>) =>
    new Session(rpc, recordFrom(required(message, "the session")), runs, hosts, started);

  /** Admits the tools' implementations and uploads the first run's skills and files, all at once (spec §4.1 rule 4). */
  function create(definition: SessionWithRunDefinition): Promise<{ session: Session; run: Run }>;
  function create(definition: SessionDefinition): Promise<Session>;
  async function create(definition: SessionDefinition | SessionWithRunDefinition): Promise<Session | { session: Session; run: Run }> {
    const placements = definition.tools ?? [];
    // Every placement is checked before anything is admitted.
    for (const placement of placements) checkPlacedIn(placement, definition.environments);
    const firstRun = "run" in definition ? definition.run : undefined;
    if (firstRun?.agentLoop) checkAgentLoopPlacedIn(firstRun.agentLoop, definition.environments);
    // Host environments serving a tool server (an MCP server over stdio) start it now: what it lists is placed.
    const starting = startToolServers(
      definition.environments.flatMap((environment) =>
        environment.kind === "host" && environment.server ? [{ name: environment.name, server: environment.server }] : [],
      ),
    );
    let started: Map<string, RunningToolServer>;
    let tools: ToolMessages;
    let run: RunSubmission | undefined;
    try {
      [tools, run, started] = await Promise.all([
        mapBounded(placements, RESOLVE_CONCURRENCY, async (placement) => toolMessage(placement, await placedImplementation(placement, resolveImplementation))),
        firstRun && prepareRunInput(firstRun, runs.uploads),
        starting,
      ]);
    } catch (error) {
      await closeAll((await starting.catch(() => undefined))?.values() ?? []);
      throw error;
    }
    tools = [...(tools ?? []), ...listedPlacements(started)];
    const served = definition.serveHosts === false ? [] : definition.environments.filter((environment) => environment.kind === "host");
    const environments = definition.environments.map(environmentMessage);
    if (served.length > 0) return createServed(environments, tools, served, run, started);
    try {
      const response = await rpc.createSession({ environments, tools, run });
      const created = session(response.session);
      return run ? { session: created, run: runHandle(runs.rpc, created, response.run) } : created;
    } finally {
      // Listed for the placements only: a host serving them later starts its own.
      await closeAll(started.values());
    }
  }

  /** The session, then its hosts, then its first run: nothing is left behind when a step fails. */
  async function createServed(
    environments: EnvironmentMessages,
    tools: ToolMessages,
    served: HostEnvironmentDefinition[],
    run: RunSubmission | undefined,
    started: Map<string, RunningToolServer>,
  ): Promise<Session | { session: Session; run: Run }> {
    let created: Session;
    try {
      created = session((await rpc.createSession({ environments, tools })).session, started);
    } catch (error) {
      await closeAll(started.values());
      throw error;
    }
    try {
      await Promise.all(served.map((host) => created.serve(host).connected()));
      if (!run) return created;
      return { session: created, run: runHandle(runs.rpc, created, await submitRun(runs.rpc, created.id, run)) };
    } catch (error) {
      await created.delete().catch(() => undefined);
      throw error;
    }
  }

  const client: SessionsClient = {
    create,
    async get(id) {
      return session((await rpc.getSession({ sessionId: id })).session);
    },
    async list(options = {}) {
      const page = await rpc.listSessions({ pageSize: options.pageSize ?? 0, pageToken: options.pageToken ?? "" });
      return { sessions: page.sessions.map((message) => session(message)), nextPageToken: page.nextPageToken };
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

/** The placements of what each started tool server lists, in its host environment. */
function listedPlacements(started: ReadonlyMap<string, RunningToolServer>): NonNullable<ToolMessages> {
  return [...started].flatMap(([environment, server]) =>
    server.tools.map((listed) => {
      const { name, description, inputSchema, implementation } = listed;
      const placement = { name, description, inputSchema, environment, implementation: undefined, configuration: undefined, approval: "never" as const };
      return toolMessage(placement, { opaque: implementation });
    }),
  );
}
