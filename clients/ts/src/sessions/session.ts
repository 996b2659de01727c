import { durationFromMs } from "@bufbuild/protobuf/wkt";
import type { Client } from "@connectrpc/connect";
import type { Session as SessionMessage, SessionService } from "../../gen/skillenv/sessions/v1/sessions_pb.js";
import { HostConnection, type HostDeps } from "../hosts/host-connection.ts";
import type { HostEnvironmentDefinition } from "../hosts/host-env.ts";
import type { RunningToolServer } from "../hosts/tool-server.ts";
import { agentLoopEnvironmentName, checkAgentLoop, checkAgentLoopBinding } from "../runs/agent-loop.ts";
import { createSessionRuns, prepareRunInput, runHandle, submitRun, type Run, type RunOptions, type RunsDeps, type SessionRuns } from "../runs/index.ts";
import { PlacementError } from "./placement-error.ts";
import {
  environmentStatusFrom,
  eventFrom,
  jsonValue,
  receiptFrom,
  recordFrom,
  required,
  type EnvironmentStatus,
  type Receipt,
  type SessionEvent,
  type SessionRecord,
  type SessionState,
} from "./wire.ts";

export type SessionRpc = Client<typeof SessionService>;

/** A tool call's terminal receipt and the operation's id in the session's journal. */
export type ToolCallResult = Receipt & { operationId: string };

export interface CallToolOptions {
  /** How long the call may take; the server's default and upper bound is SERVICE_MAX_TURN_SECS. */
  timeoutMs?: number;
  /**
   * Withdraws the call: the promise rejects (Canceled) and, once the call was dispatched, the
   * service sends its environment a journaled cancel; its receipt is in the session's events.
   */
  signal?: AbortSignal;
}

export interface EventsOptions {
  /** Deliver events with seq > after; default 0, which replays the journal from the start. */
  after?: number;
  /** Stops the stream; iteration then ends without an error. */
  signal?: AbortSignal;
}

export interface SetupResult {
  environment: EnvironmentStatus;
  /** The setup operation's receipt; undefined when the environment was ready already. */
  receipt: Receipt | undefined;
}

/**
 * A handle on one session. `record` is what the server last answered (on creation, `refresh`,
 * `setupEnvironment` or `end`); it does not follow changes made elsewhere until refreshed.
 * `run` submits a run, `runs` finds them; `serve` serves a host environment's tools from this
 * process.
 * Refusals (an ended session, an unknown tool, another workspace's id) throw ConnectErrors
 * carrying the service's stable code; a tool's own failure is a receipt, not an exception.
 */
export class Session {
  readonly id: string;
  /** The session's runs: `list` and `get`. */
  readonly runs: SessionRuns;
  readonly #rpc: SessionRpc;
  readonly #runDeps: RunsDeps;
  readonly #hostDeps: HostDeps;
  readonly #hosts = new Map<string, HostConnection>();
  /** Tool servers the client started to list their tools when it created the session, each for its host's first `serve`. */
  readonly #started: Map<string, RunningToolServer>;
  #record: SessionRecord;

  constructor(rpc: SessionRpc, record: SessionRecord, runDeps: RunsDeps, hostDeps: HostDeps, started = new Map<string, RunningToolServer>()) {
    this.id = record.id;
    this.#rpc = rpc;
    this.#runDeps = runDeps;
    this.#hostDeps = hostDeps;
    this.#started = started;
    this.#record = record;
    this.runs = createSessionRuns(runDeps.rpc, this);
  }

  get record(): SessionRecord {
    return this.#record;
  }

  get state(): SessionState {
    return this.#record.state;
  }

  get environments(): readonly EnvironmentStatus[] {
    return this.#record.environments;
  }

  /** Runs a placed tool once through the session's journal; the server never retries it. */
  async callTool(name: string, input?: unknown, options: CallToolOptions = {}): Promise<ToolCallResult> {
    const response = await this.#rpc.callTool(
      {
        sessionId: this.id,
        tool: name,
        input: jsonValue(input),
        timeout: options.timeoutMs === undefined ? undefined : durationFromMs(options.timeoutMs),
      },
      { signal: options.signal },
    );
    return { ...receiptFrom(response.receipt), operationId: response.operationId };
  }

  /**
   * Submits a run (spec §4.1): draft skills are upserted and file bytes uploaded first, then the
   * run is submitted with skills by name. A run whose answer is lost in transport is submitted
   * once more under the same idempotency key, which cannot start it twice. The session runs one
   * run at a time: another while one is running is refused as run_in_progress.
   *
   * With an `agentLoop`, the loop is checked first (PlacementError: its form, and that its
   * environment is a service environment of this session), then its component or program is
   * admitted alongside the uploads when the workspace lacks it.
   */
  async run(options: RunOptions): Promise<Run> {
    const loop = options.agentLoop;
    if (loop) {
      checkAgentLoop(loop);
      const name = agentLoopEnvironmentName(loop);
      checkAgentLoopBinding(loop, this.#record.environments.find((environment) => environment.name === name)?.kind, `session ${this.id}`);
    }
    const submission = await prepareRunInput(options, this.#runDeps.uploads);
    return runHandle(this.#runDeps.rpc, this, await submitRun(this.#runDeps.rpc, this.id, submission));
  }

  /**
   * The journal as events: those after `after`, then live ones as they are written. Ends after
   * `session.ended`, when the session is deleted, or when `signal` aborts.
   */
  async *events(options: EventsOptions = {}): AsyncIterable<SessionEvent> {
    const stream = this.#rpc.watchSession({ sessionId: this.id, after: BigInt(options.after ?? 0) }, { signal: options.signal });
    try {
      for await (const { event } of stream) yield eventFrom(required(event, "the event"));
    } catch (error) {
      // The caller stopped watching: that is how a live stream ends, not a failure.
      if (options.signal?.aborted) return;
      throw error;
    }
  }

  /** Sets up a manual environment, or one whose setup failed; a ready one is left as it is. */
  async setupEnvironment(name: string): Promise<SetupResult> {
    const response = await this.#rpc.setupEnvironment({ sessionId: this.id, environment: name });
    // The session's own state may change with the environment's, so take the whole record again.
    await this.refresh();
    return {
      environment: environmentStatusFrom(required(response.environment, "the environment")),
      receipt: response.receipt && receiptFrom(response.receipt),
    };
  }

  /**
   * Serves the tools of one of the session's host environments from this process: holds its
   * command stream open (reconnecting when it drops) until `stop()` on the answer, the end or
   * deletion of the session, or a refusal. Serving an environment this handle serves already
   * answers the same connection. The session must bind `definition.name` as a host environment.
   * A definition serving an MCP server over stdio starts it (unless this handle's creation did
   * already) and stops it when the host closes.
   */
  serve(definition: HostEnvironmentDefinition): HostConnection {
    const serving = this.#hosts.get(definition.name);
    if (serving && serving.state !== "closed") {
      if (serving.definition === definition) return serving;
      throw new PlacementError(`environment ${definition.name} of session ${this.id} is served already, by another definition; stop that one first`);
    }
    const bound = this.#record.environments.find((environment) => environment.name === definition.name);
    if (bound?.kind !== "host") throw new PlacementError(`session ${this.id} has no host environment named ${definition.name}`);
    const started = this.#started.get(definition.name);
    this.#started.delete(definition.name);
    const host = new HostConnection(this.#hostDeps, this.id, definition, started);
    this.#hosts.set(definition.name, host);
    return host;
  }

  /** The host environments this handle serves (or served), by environment name. */
  get hosts(): ReadonlyMap<string, HostConnection> {
    return this.#hosts;
  }

  /** Detaches every environment; the session then refuses new work. Its journal is kept. This handle's hosts stop. */
  async end(): Promise<SessionRecord> {
    const response = await this.#rpc.endSession({ sessionId: this.id });
    await this.#stopHosts();
    return this.#remember(response.session);
  }

  /** Tears every environment down and removes the session and its journal; the id is then unknown. This handle's hosts stop. */
  async delete(): Promise<void> {
    await this.#rpc.deleteSession({ sessionId: this.id });
    await this.#stopHosts();
  }

  async refresh(): Promise<SessionRecord> {
    const response = await this.#rpc.getSession({ sessionId: this.id });
    return this.#remember(response.session);
  }

  /** After the service has cancelled their commands: stopping first would end them unknown instead. */
  async #stopHosts(): Promise<void> {
    await Promise.all([...this.#hosts.values()].map((host) => host.stop()));
  }

  #remember(message: SessionMessage | undefined): SessionRecord {
    this.#record = recordFrom(required(message, "the session"));
    return this.#record;
  }
}
