import type { CreateSessionRequest } from "../../../gen/skillenv/sessions/v1/sessions_pb.js";
import { createHash } from "node:crypto";
import type { ProgressLimits } from "../config/index.ts";
import {
  inReceiptSpan,
  type AgentLoopHost,
  type EnvironmentBinding,
  type EnvironmentKindName,
  type EnvironmentKinds,
  type OperationKind,
  type Staging,
  type TerminalReceipt,
} from "../environments/index.ts";
import { describeError, serviceError } from "../errors/index.ts";
import { newId } from "../ids/index.ts";
import { jsonTextDepth } from "../json/index.ts";
import type { Journal, JournalEvent, NoteEvent, SentOperation } from "../journal/index.ts";
import type { SessionOwnership } from "../replicas/index.ts";
import { KeyedLock, type Page, type PageRequest, type WriteOp } from "../storage/index.ts";
import { runJournaled } from "./journaled.ts";
import { operationAttributes, operationSpanName } from "./operation-span.ts";
import type { EnvironmentRecord, SessionRecord, SessionRecords, ToolRecord } from "./records.ts";
import { checkSessionSpec, withDiscoveredTools, type SessionSizeLimits } from "./session-spec.ts";

export interface SessionsOptions {
  records: SessionRecords;
  journal: Journal;
  kinds: EnvironmentKinds;
  /** SERVICE_MAX_TURN_SECS: bounds every operation's deadline. */
  maxTurnSecs: number;
  /** SERVICE_JOURNAL_MAX_PAYLOAD_BYTES: largest input or output kept in the journal. */
  maxPayloadBytes: number;
  /** SERVICE_JOURNAL_MAX_JSON_DEPTH: deepest input or output kept in the journal. */
  maxJsonDepth: number;
  /** SERVICE_JOURNAL_MAX_PROGRESS_EVENTS and _BYTES: progress journaled per operation. */
  progress: ProgressLimits;
  /** SERVICE_LIST_MAX_BYTES: a page's byte budget. */
  listMaxBytes: number;
  /** SERVICE_MAX_FIELD_BYTES and SERVICE_SESSION_MAX_BYTES: what a session may store. */
  sizeLimits: SessionSizeLimits;
  /** Told of every operation once its terminal receipt is journaled (the metrics). */
  onOperation?: ((operation: SettledOperation) => void) | undefined;
  /** Which process serves each session: this one alone (embedded), or one replica at a time (shared store). */
  ownership: SessionOwnership;
  /**
   * SERVICE_SESSION_CACHE_MIB, in bytes: the records of sessions no request uses that stay in
   * memory, most recently used first (their records as JSON text); the others are read again
   * when next used.
   */
  idleBytes: number;
}

/** An operation that ended, as the metrics see it: nothing of its input, output or ids. */
export interface SettledOperation {
  kind: OperationKind;
  environmentKind: string;
  receipt: TerminalReceipt;
  seconds: number;
}

export interface CallToolOptions {
  /** JSON text. */
  input: string;
  /** Default and upper bound: SERVICE_MAX_TURN_SECS. */
  timeoutMs?: number;
  /** The run on whose behalf the tool runs. */
  runId?: string;
  /**
   * Told of each progress report of the call as it arrives (JSON text), for a caller that passes
   * them on live (the MCP endpoint); the journal keeps those within its progress budget.
   */
  onProgress?: (data: string) => void;
  /**
   * The caller withdrew (CallTool's client left or its RPC deadline passed; the MCP endpoint's
   * client sent notifications/cancelled or left):
   * once the call has been dispatched, a journaled cancel is sent to its environment, as a run's
   * cancellation sends one, and the call still ends by its own terminal receipt.
   */
  signal?: AbortSignal;
}

export interface ToolCallResult {
  operationId: string;
  receipt: TerminalReceipt;
}

/** What an execute operation runs, in which environment: a placed tool, or (with loopHost) a run's agent loop. */
interface ExecuteTarget {
  /** The placed tool's name; absent for an agent loop. */
  name?: string;
  environment: string;
  implementation: unknown;
  configuration: string;
  loopHost?: AgentLoopHost;
}

/** A run's agent loop placed in a service environment of the session. */
export interface AgentLoopPlacement {
  environment: string;
  /** As the environment kind's checkAgentLoop returned it. */
  implementation: unknown;
  /** JSON text. */
  configuration: string;
}

/** Told before a session ends or is deleted, so that work on its behalf (runs) can stop first. */
export type ClosingListener = (workspace: string, sessionId: string, reason: "end" | "delete") => Promise<void>;

/** A session this process is working with: its record, its bindings and what is in flight. */
interface LiveSession {
  record: SessionRecord;
  readonly bindings: Map<string, EnvironmentBinding>;
  readonly inFlight: Map<string, SentOperation>;
  /** Resolved whenever inFlight becomes empty. */
  drained: Array<() => void>;
  /** The requests and recoveries using it now: while any does, it stays in memory. */
  holders: number;
  /**
   * Its record's size as JSON text, counted against the idle budget while no one holds it;
   * measured as it becomes idle, once per change of the record (undefined: not measured since).
   */
  bytes: number | undefined;
}

/**
 * Sessions: the unit of execution (SPEC 3, 4.5, 4.6). A session binds named environments and
 * places tools in them; every operation on an environment goes through the session's journal
 * (runJournaled). Records and the journal are the truth; LiveSession is what this process holds.
 *
 * A session is held in memory while a request (or a recovery) uses it: each takes it with #load
 * (or #hold) and gives it back with #release, so there is one LiveSession per session while it
 * is in use, and every update builds on the last. Given back by all, it stays as long as the idle
 * ones fit in `idleBytes`, the least recently used leaving first: what a workspace can make the
 * server hold is its requests in flight and that budget, not every session it ever used.
 */
export class Sessions {
  readonly #options: SessionsOptions;
  /** Every session held: in use, or idle. */
  readonly #live = new Map<string, LiveSession>();
  /** The idle ones (no holder), least recently used first, and their bytes. */
  readonly #idle = new Set<LiveSession>();
  #idleBytes = 0;
  readonly #lock = new KeyedLock();
  readonly #closing: ClosingListener[] = [];

  constructor(options: SessionsOptions) {
    this.#options = options;
  }

  /**
   * After a restart: operations that were in flight get their one `unknown` receipt (never
   * replayed), environments whose setup was interrupted become `failed`, and endings and
   * deletions that were interrupted are finished without sending anything twice.
   */
  async recover(): Promise<void> {
    for (const { sessionId, event } of await this.#options.journal.recover()) {
      if (event.type !== "operation.receipt" || event.kind !== "setup") continue;
      const record = await this.#options.records.byId(sessionId);
      if (!record) continue;
      const live = this.#hold(record);
      try {
        await this.#setupFailed(live, event.environment);
      } finally {
        this.#release(live);
      }
    }
    for (const record of await this.#options.records.interrupted()) {
      const live = this.#hold(record);
      try {
        if (record.lifecycle === "ending") await this.#finishEnding(live);
        else await this.#finishDeletion(live);
      } finally {
        this.#release(live);
      }
    }
  }

  /**
   * This replica took the session over (its owner's lease expired, or it is an earlier start of
   * this replica): what `recover` does after a restart, for this one session, and a
   * `session.moved` event saying which replica serves it now and which environments' workspaces
   * stayed behind with the previous owner (SPEC 3.6: mutable workspaces are not restored).
   */
  async takeOver(sessionId: string, previousReplica: string | undefined): Promise<void> {
    const { journal, records } = this.#options;
    this.#forget(sessionId);
    journal.forget(sessionId);
    const record = await records.byId(sessionId);
    if (!record) return;
    const live = this.#hold(record);
    try {
      await this.#recoverTakenOver(live, previousReplica);
    } finally {
      this.#release(live);
    }
  }

  async #recoverTakenOver(live: LiveSession, previousReplica: string | undefined): Promise<void> {
    const { journal } = this.#options;
    const { record } = live;
    const sessionId = record.id;
    const settled = await journal.recover(sessionId);
    for (const { event } of settled) if (event.type === "operation.receipt" && event.kind === "setup") await this.#setupFailed(live, event.environment);
    if (record.lifecycle === "ending") return this.#finishEnding(live);
    if (record.lifecycle === "deleting") return this.#finishDeletion(live);
    if (record.lifecycle !== "active" || previousReplica === undefined) return;
    const workspaces = this.#stagingTargets(live).map((environment) => environment.name);
    await journal.append(sessionId, {
      type: "session.moved",
      data: { replica: this.#options.ownership.replica, previousReplica, operationsUnknown: settled.length, workspaces },
    });
    // Each retained workspace is set up again here: the same directory when SERVICE_ENV_WORKSPACE_ROOT
    // is shared storage, an empty one when it was the previous replica's own disk.
    for (const name of workspaces) {
      const receipt = await this.#operate(live, name, "setup", (binding, deadlineMs) => binding.setup(deadlineMs));
      if (receipt.outcome !== "returned") await this.#setupFailed(live, name);
    }
  }

  /** Whether the session exists (in any workspace, in any lifecycle but deleted). */
  async exists(sessionId: string): Promise<boolean> {
    return (await this.#options.records.byId(sessionId)) !== undefined;
  }

  /** Another replica took the session over: forget what this process held of it. */
  lose(sessionId: string): void {
    this.#forget(sessionId);
    this.#options.journal.forget(sessionId);
  }

  /** Sessions with work left that their owner would finish (operations without a receipt, an interrupted end or deletion). */
  async unfinished(): Promise<Set<string>> {
    const sessions = await this.#options.journal.sessionsWithOpenOperations();
    for (const record of await this.#options.records.interrupted()) sessions.add(record.id);
    return sessions;
  }

  async create(workspace: string, request: CreateSessionRequest): Promise<SessionRecord> {
    const id = newId("ses");
    const spec = await checkSessionSpec(request, { workspace, sessionId: id }, this.#options.kinds, this.#options.sizeLimits);
    const record: SessionRecord = { id, workspace, createdAt: new Date().toISOString(), lifecycle: "active", ...spec };
    await this.#options.ownership.claim(id);
    await this.#options.records.create(record);
    const environments = spec.environments.map(({ name, kind, setup, options }) => ({
      name,
      kind,
      setup,
      options: this.#options.kinds[kind].describe(options),
    }));
    await this.#options.journal.append(id, { type: "session.created", data: { environments, tools: spec.tools.map((tool) => tool.name) } });
    const live = this.#hold(record);
    try {
      const automatic = spec.environments.filter((environment) => environment.setup === "automatic");
      await Promise.all(automatic.map((environment) => this.#setup(live, environment.name)));
      return live.record;
    } finally {
      this.#release(live);
    }
  }

  async get(workspace: string, id: string): Promise<SessionRecord> {
    return this.#using(workspace, id, (live) => live.record);
  }

  /** A page of the workspace's sessions, newest first, each as this process holds it. */
  async list(workspace: string, request: PageRequest): Promise<Page<SessionRecord>> {
    const page = await this.#options.records.page(workspace, request, this.#options.listMaxBytes);
    return { ...page, items: page.items.map((record) => this.#live.get(record.id)?.record ?? record) };
  }

  /** Sets up a manual environment, or one whose setup failed. A ready one is left as it is. */
  async setup(workspace: string, id: string, environment: string): Promise<{ environment: EnvironmentRecord; receipt?: TerminalReceipt }> {
    return this.#using(workspace, id, async (live) => {
      this.#requireActive(live);
      environmentOf(live.record, environment); // an unknown environment is refused before anything waits
      // Ready or not is decided under the environment's lock: a concurrent request may set it up first.
      const receipt = await this.#setup(live, environment, true);
      return { environment: environmentOf(live.record, environment), ...(receipt ? { receipt } : {}) };
    });
  }

  /** Runs a placed tool through the journal; RPC errors mean nothing was journaled or sent. */
  async callTool(workspace: string, id: string, toolName: string, options: CallToolOptions): Promise<ToolCallResult> {
    return this.#using(workspace, id, async (live) => {
      this.#requireActive(live);
      const tool = live.record.tools.find((placed) => placed.name === toolName);
      if (!tool) throw serviceError("tool_not_found", `session ${id} has no tool named ${JSON.stringify(toolName)}`);
      const environment = environmentOf(live.record, tool.environment);
      if (environment.state !== "ready") {
        throw serviceError("environment_not_ready", `tool ${toolName} runs in environment ${environment.name}, which is ${environment.state}, not ready`);
      }
      const inputBytes = Buffer.byteLength(options.input);
      if (inputBytes > this.#options.maxPayloadBytes) {
        throw serviceError("input_too_large", `the input has ${inputBytes} bytes as JSON, the limit is ${this.#options.maxPayloadBytes}`, {
          maxBytes: String(this.#options.maxPayloadBytes),
        });
      }
      const inputDepth = jsonTextDepth(options.input);
      if (inputDepth > this.#options.maxJsonDepth) {
        throw serviceError("input_too_deep", `the input nests ${inputDepth} levels deep, the limit is ${this.#options.maxJsonDepth}`, {
          maxDepth: String(this.#options.maxJsonDepth),
        });
      }
      return this.#execute(live, tool, options);
    });
  }

  /**
   * Checks a run's agent-loop placement at submit: the environment must be bound and able to run
   * agent loops, and the implementation admitted. Returns the placement as it will run.
   */
  async checkAgentLoop(workspace: string, id: string, environment: string, implementation: unknown, configuration: string): Promise<AgentLoopPlacement> {
    return this.#using(workspace, id, async (live) => {
      const bound = environmentOf(live.record, environment);
      const check = this.#options.kinds[bound.kind].checkAgentLoop;
      if (!check)
        throw serviceError("invalid_argument", `environment ${environment} is a ${bound.kind} environment; agent loops run in the service environment`);
      const checked = await check.call(this.#options.kinds[bound.kind], { workspace, sessionId: id, environment }, implementation);
      return { environment, implementation: checked, configuration };
    });
  }

  /** Runs a run's agent loop as one execute operation, its host services answering its model and tool calls. */
  async runAgentLoop(workspace: string, id: string, loop: AgentLoopPlacement, host: AgentLoopHost, options: CallToolOptions): Promise<ToolCallResult> {
    return this.#using(workspace, id, async (live) => {
      this.#requireActive(live);
      const environment = environmentOf(live.record, loop.environment);
      if (environment.state !== "ready")
        throw serviceError("environment_not_ready", `the agent loop's environment ${environment.name} is ${environment.state}, not ready`);
      return this.#execute(live, { ...loop, loopHost: host }, options);
    });
  }

  /** Checks that an active session of the workspace binds `environment` as an environment of `kind` (for a host attaching). */
  async requireBinding(workspace: string, id: string, environment: string, kind: EnvironmentKindName): Promise<void> {
    return this.#using(workspace, id, async (live) => {
      this.#requireActive(live);
      const bound = environmentOf(live.record, environment);
      if (bound.kind !== kind)
        throw serviceError("invalid_argument", `environment ${environment} of session ${id} is a ${bound.kind} environment, not a ${kind} one`);
    });
  }

  /** Appends a note (a run's events) to the session's journal; `records` commit in the same atomic batch. */
  note(sessionId: string, note: NoteEvent, records: WriteOp[] = []): Promise<JournalEvent> {
    return this.#options.journal.append(sessionId, note, records);
  }

  /**
   * Stages into every ready environment of the session that has a workspace (none: an empty
   * answer), each as a journaled `stage` operation that removes the directories `staging.replace`
   * names and writes `staging.files` (the journal records paths and digests, not contents).
   */
  async stage(workspace: string, id: string, staging: Staging, runId: string): Promise<Array<{ environment: string; receipt: TerminalReceipt }>> {
    return this.#using(workspace, id, async (live) => {
      this.#requireActive(live);
      const files = staging.files.map((file) => ({
        path: file.path,
        sizeBytes: file.bytes.byteLength,
        sha256: createHash("sha256").update(file.bytes).digest("hex"),
      }));
      const manifest = JSON.stringify({ replace: staging.replace, files });
      const targets = this.#stagingTargets(live);
      return Promise.all(
        targets.map(async ({ name }) => ({
          environment: name,
          receipt: await this.#operate(live, name, "stage", (binding, deadlineMs, operationId) => binding.stage(staging, deadlineMs, operationId), {
            input: manifest,
            runId,
          }),
        })),
      );
    });
  }

  /** Whether `stage` would reach any environment of the session: one that is ready and has a workspace. */
  async stagesFiles(workspace: string, id: string): Promise<boolean> {
    return this.#using(workspace, id, (live) => this.#stagingTargets(live).length > 0);
  }

  /** Sends a cancel for every operation in flight on behalf of `runId`; their receipts are still recorded. */
  async cancelRunOperations(workspace: string, id: string, runId: string): Promise<void> {
    return this.#using(workspace, id, async (live) => {
      const targets = [...live.inFlight.values()].filter((operation) => operation.runId === runId);
      await Promise.all(targets.map((target) => this.#cancel(live, target)));
    });
  }

  onClosing(listener: ClosingListener): void {
    this.#closing.push(listener);
  }

  /**
   * Ends the session: it refuses new work at once, waits for operations in flight (each bounded
   * by its deadline), detaches every environment that was set up, and writes `session.ended`,
   * the journal's last event.
   */
  async end(workspace: string, id: string): Promise<SessionRecord> {
    return this.#using(workspace, id, async (live) => {
      await this.#lock.run(id, async () => {
        if (live.record.lifecycle !== "active") return;
        await this.#putRecord(live, { ...live.record, lifecycle: "ending" });
        await Promise.all(this.#closing.map((listener) => listener(workspace, id, "end")));
        await this.#drain(live);
        await this.#finishEnding(live);
      });
      return live.record;
    });
  }

  /**
   * Deletes the session: new work is refused, operations in flight are asked to stop (each
   * cancel is an operation of its own), every environment that was set up is torn down, and the
   * record and journal are removed. A restart finishes a deletion that was interrupted.
   */
  async delete(workspace: string, id: string): Promise<void> {
    return this.#using(workspace, id, async (live) => {
      await this.#lock.run(id, async () => {
        if (live.record.lifecycle === "deleting") return;
        await this.#putRecord(live, { ...live.record, lifecycle: "deleting" });
        await Promise.all(this.#closing.map((listener) => listener(workspace, id, "delete")));
        await Promise.all([...live.inFlight.values()].map((target) => this.#cancel(live, target)));
        await this.#drain(live);
        await this.#finishDeletion(live);
      });
    });
  }

  /** The session's events after `after`, then live ones, until `session.ended` or deletion. */
  async watch(workspace: string, id: string, after: number, signal?: AbortSignal): Promise<AsyncGenerator<JournalEvent>> {
    await this.#using(workspace, id, () => undefined);
    return this.#options.journal.watch(id, after, { signal, until: (event) => event.type === "session.ended" });
  }

  /** An execute operation: a placed tool, or a run's agent loop (with its host services). */
  async #execute(live: LiveSession, target: ExecuteTarget, options: CallToolOptions): Promise<ToolCallResult> {
    const deadlineMs = this.#deadline(options.timeoutMs);
    const operation: SentOperation = {
      operationId: newId("op"),
      environment: target.environment,
      kind: "execute",
      deadlineMs,
      ...(target.name === undefined ? { agentLoop: true } : { tool: target.name }),
      input: options.input,
      ...(options.runId ? { runId: options.runId } : {}),
    };
    const binding = this.#binding(live, target.environment);
    live.inFlight.set(operation.operationId, operation);
    try {
      const receipt = await this.#runJournaled(live, operation, (journal, seq) => {
        const { onProgress } = options;
        const report: typeof journal = onProgress
          ? (interim) => {
              journal(interim);
              if (interim.outcome === "progress") onProgress(interim.data);
            }
          : journal;
        const receipt = binding.execute({
          operationId: operation.operationId,
          seq,
          tool: target.name ?? "",
          implementation: target.implementation,
          configuration: target.configuration,
          input: options.input,
          deadlineMs,
          report,
          ...(target.loopHost ? { loopHost: target.loopHost } : {}),
        });
        if (options.signal) this.#cancelOnAbort(live, operation, options.signal, receipt);
        return receipt;
      });
      return { operationId: operation.operationId, receipt };
    } finally {
      live.inFlight.delete(operation.operationId);
      if (live.inFlight.size === 0) for (const resolve of live.drained.splice(0)) resolve();
    }
  }

  /** Sets the environment up; with `unlessReady`, only if it is not ready once its turn comes (no receipt then). */
  async #setup(live: LiveSession, name: string, unlessReady = false): Promise<TerminalReceipt | undefined> {
    return this.#lock.run(`${live.record.id}/${name}`, async () => {
      if (unlessReady && environmentOf(live.record, name).state === "ready") return undefined;
      const receipt = await this.#operate(live, name, "setup", (binding, deadlineMs) => binding.setup(deadlineMs));
      if (receipt.outcome !== "returned") {
        await this.#setState(live, name, "failed");
        await this.#options.journal.append(live.record.id, { type: "environment.failed", data: { environment: name } });
        return receipt;
      }
      const placed = this.#discoveredTools(live, name, receipt.output);
      if ("error" in placed) {
        await this.#setState(live, name, "failed");
        await this.#options.journal.append(live.record.id, { type: "environment.failed", data: { environment: name, error: placed.error } });
        return receipt;
      }
      await this.#setState(live, name, "ready", placed.tools);
      const tools = placed.tools && { tools: placed.tools.filter((tool) => tool.environment === name).map((tool) => tool.name) };
      await this.#options.journal.append(live.record.id, { type: "environment.ready", data: { environment: name, ...tools } });
      return receipt;
    });
  }

  /**
   * The session's tools with those the environment's setup offered (an MCP server's), or none
   * when its kind places nothing of itself; past the session's limits, the error that fails it.
   */
  #discoveredTools(live: LiveSession, name: string, output: string): { tools?: ToolRecord[] } | { error: { code: string; message: string } } {
    const environment = environmentOf(live.record, name);
    const kind = this.#options.kinds[environment.kind];
    if (!kind.discoveredTools) return {};
    try {
      return { tools: withDiscoveredTools(live.record, name, kind.discoveredTools(output, environment.options), this.#options.sizeLimits) };
    } catch (error) {
      const { body } = describeError(error);
      return { error: { code: body.code, message: body.message } };
    }
  }

  /**
   * Sends the operation's cancel when `signal` aborts before its receipt (at once when it had
   * aborted already): only once it was dispatched, so that the environment knows what to stop.
   */
  #cancelOnAbort(live: LiveSession, operation: SentOperation, signal: AbortSignal, receipt: Promise<TerminalReceipt>): void {
    const cancel = () => {
      // The cancel's own receipt is journaled; nobody waits for it here.
      if (live.inFlight.has(operation.operationId)) void this.#cancel(live, operation).catch(() => undefined);
    };
    if (signal.aborted) {
      cancel();
      return;
    }
    signal.addEventListener("abort", cancel, { once: true });
    void receipt.finally(() => signal.removeEventListener("abort", cancel)).catch(() => undefined);
  }

  #cancel(live: LiveSession, target: SentOperation): Promise<TerminalReceipt> {
    const fields = { targetOperationId: target.operationId, ...(target.runId ? { runId: target.runId } : {}) };
    return this.#operate(live, target.environment, "cancel", (binding, deadlineMs) => binding.cancel(target.operationId, deadlineMs), fields);
  }

  #stagingTargets(live: LiveSession): EnvironmentRecord[] {
    return live.record.environments.filter((environment) => environment.state === "ready" && this.#binding(live, environment.name).stagesFiles);
  }

  /** A journaled setup, stage, cancel, detach or teardown of one environment. */
  #operate(
    live: LiveSession,
    environment: string,
    kind: Exclude<OperationKind, "execute">,
    call: (binding: EnvironmentBinding, deadlineMs: number, operationId: string) => Promise<TerminalReceipt>,
    fields: Pick<SentOperation, "targetOperationId" | "input" | "runId"> = {},
  ): Promise<TerminalReceipt> {
    const deadlineMs = this.#deadline(undefined);
    const operation: SentOperation = { operationId: newId("op"), environment, kind, deadlineMs, ...fields };
    const binding = this.#binding(live, environment);
    return this.#runJournaled(live, operation, () => call(binding, deadlineMs, operation.operationId));
  }

  /** One journaled operation of the session (runJournaled), reported when it has ended. */
  async #runJournaled(live: LiveSession, operation: SentOperation, dispatch: Parameters<typeof runJournaled>[3]): Promise<TerminalReceipt> {
    const startedAt = performance.now();
    const environmentKind = live.record.environments.find((environment) => environment.name === operation.environment)?.kind ?? "unknown";
    const receipt = await inReceiptSpan(operationSpanName(operation), operationAttributes(live.record.id, environmentKind, operation), () =>
      runJournaled(this.#journaled(), live.record.id, operation, dispatch),
    );
    this.#options.onOperation?.({ kind: operation.kind, environmentKind, receipt, seconds: (performance.now() - startedAt) / 1000 });
    return receipt;
  }

  /** Detaches every ready environment not detached yet, writes `session.ended`, and records the end. */
  async #finishEnding(live: LiveSession): Promise<void> {
    const id = live.record.id;
    const sent = await this.#sentEnvironments(id, "detach");
    for (const environment of live.record.environments) {
      if (environment.state !== "ready" || sent.has(environment.name)) continue;
      await this.#operate(live, environment.name, "detach", (binding, deadlineMs) => binding.detach(deadlineMs));
      await this.#setState(live, environment.name, "detached");
    }
    const last = await this.#options.journal.last(id);
    if (last?.type !== "session.ended") await this.#options.journal.append(id, { type: "session.ended", data: {} });
    await this.#putRecord(live, { ...live.record, lifecycle: "ended", endedAt: new Date().toISOString() });
  }

  /** Tears down every environment that was set up and has no teardown sent yet, then removes everything. */
  async #finishDeletion(live: LiveSession): Promise<void> {
    const { journal, records } = this.#options;
    const sent = await this.#sentEnvironments(live.record.id, "teardown");
    for (const environment of live.record.environments) {
      if (environment.state === "pending" || sent.has(environment.name)) continue;
      await this.#operate(live, environment.name, "teardown", (binding, deadlineMs) => binding.teardown(deadlineMs));
    }
    await journal.remove(live.record.id);
    await records.delete(live.record);
    this.#forget(live.record.id);
    await this.#options.ownership.release(live.record.id);
  }

  /** Environments that already had an operation of `kind` sent: a restart never sends it again. */
  async #sentEnvironments(sessionId: string, kind: OperationKind): Promise<Set<string>> {
    const environments = new Set<string>();
    for (let after = 0; ; ) {
      const page = await this.#options.journal.read(sessionId, after);
      if (page.length === 0) return environments;
      for (const event of page) if (event.type === "operation.sent" && event.operation.kind === kind) environments.add(event.operation.environment);
      after = page.at(-1)!.seq;
    }
  }

  async #setupFailed(live: LiveSession, name: string): Promise<void> {
    await this.#setState(live, name, "failed");
    await this.#options.journal.append(live.record.id, { type: "environment.failed", data: { environment: name } });
  }

  /** With `tools`, the session's placements change in the same write. */
  #setState(live: LiveSession, name: string, state: EnvironmentRecord["state"], tools?: ToolRecord[]): Promise<void> {
    const environments = live.record.environments.map((environment) => (environment.name === name ? { ...environment, state } : environment));
    return this.#putRecord(live, { ...live.record, environments, ...(tools ? { tools } : {}) });
  }

  /** The live record changes first, synchronously, so that concurrent updates build on each other. */
  #putRecord(live: LiveSession, record: SessionRecord): Promise<void> {
    live.record = record;
    live.bytes = undefined;
    return this.#options.records.put(record);
  }

  #drain(live: LiveSession): Promise<void> {
    if (live.inFlight.size === 0) return Promise.resolve();
    return new Promise((resolve) => live.drained.push(resolve));
  }

  #requireActive(live: LiveSession): void {
    if (live.record.lifecycle !== "active") throw serviceError("session_ended", `session ${live.record.id} is ${live.record.lifecycle}; it takes no new work`);
  }

  #deadline(timeoutMs: number | undefined): number {
    const maxMs = this.#options.maxTurnSecs * 1000;
    return Date.now() + Math.min(timeoutMs ?? maxMs, maxMs);
  }

  #journaled() {
    const { journal, maxPayloadBytes, maxJsonDepth, progress, sizeLimits } = this.#options;
    return { journal, maxOutputBytes: maxPayloadBytes, maxOutputDepth: maxJsonDepth, progress, maxFieldBytes: sizeLimits.maxFieldBytes };
  }

  #binding(live: LiveSession, name: string): EnvironmentBinding {
    let binding = live.bindings.get(name);
    if (!binding) {
      const environment = environmentOf(live.record, name);
      binding = this.#options.kinds[environment.kind].bind(
        { workspace: live.record.workspace, sessionId: live.record.id, environment: name },
        environment.options,
      );
      live.bindings.set(name, binding);
    }
    return binding;
  }

  /** Runs `work` with the session held, and gives it back however `work` ends. */
  async #using<T>(workspace: string, id: string, work: (live: LiveSession) => T | Promise<T>): Promise<T> {
    const live = await this.#load(workspace, id);
    try {
      return await work(live);
    } finally {
      this.#release(live);
    }
  }

  /** The workspace's session, held (#release gives it back): from memory, or read from its record. */
  async #load(workspace: string, id: string): Promise<LiveSession> {
    const cached = this.#live.get(id);
    if (cached && cached.record.workspace === workspace) return this.#take(cached);
    const record = cached ? undefined : await this.#options.records.get(workspace, id);
    if (!record || record.lifecycle === "deleting") throw serviceError("session_not_found", `this workspace has no session ${JSON.stringify(id)}`);
    return this.#hold(record);
  }

  /** The session of `record`, held: the one in memory if there is one (read meanwhile), else from `record`. */
  #hold(record: SessionRecord): LiveSession {
    const held = this.#live.get(record.id);
    if (held) return this.#take(held);
    const live: LiveSession = { record, bindings: new Map(), inFlight: new Map(), drained: [], holders: 1, bytes: undefined };
    this.#live.set(record.id, live);
    return live;
  }

  #take(live: LiveSession): LiveSession {
    if (live.holders++ === 0) {
      this.#idle.delete(live);
      this.#idleBytes -= live.bytes!;
    }
    return live;
  }

  /**
   * Gives the session back. Its last holder leaves it idle, the most recently used, and the least
   * recently used idle ones leave memory while they pass the budget (one in flight, which a
   * holder would have to have started, keeps its place), their bindings released (an MCP
   * server's session is connected again when next used). A session forgotten meanwhile
   * (deleted, taken over by another replica) is not kept.
   */
  #release(live: LiveSession): void {
    if (--live.holders > 0 || this.#live.get(live.record.id) !== live) return;
    live.bytes ??= recordBytes(live.record);
    this.#idle.add(live);
    this.#idleBytes += live.bytes;
    for (const oldest of this.#idle) {
      if (this.#idleBytes <= this.#options.idleBytes) break;
      if (oldest.inFlight.size > 0) continue;
      this.#forget(oldest.record.id);
    }
  }

  /**
   * Drops what this process holds of the session, whoever still uses it (they finish with their
   * own). An idle one's bindings are released, as when it leaves for the budget.
   */
  #forget(id: string): void {
    const live = this.#live.get(id);
    if (!live) return;
    this.#live.delete(id);
    if (!this.#idle.delete(live)) return;
    this.#idleBytes -= live.bytes!;
    for (const binding of live.bindings.values()) binding.release?.();
  }

  /** The sessions this process holds (of `workspace` only, when given), by lifecycle, and their operations in flight (the metrics, the workspace status). */
  census(workspace?: string): { sessions: Map<string, number>; operationsInFlight: number } {
    const sessions = new Map<string, number>();
    let operationsInFlight = 0;
    for (const live of this.#live.values()) {
      if (workspace !== undefined && live.record.workspace !== workspace) continue;
      sessions.set(live.record.lifecycle, (sessions.get(live.record.lifecycle) ?? 0) + 1);
      operationsInFlight += live.inFlight.size;
    }
    return { sessions, operationsInFlight };
  }
}

function environmentOf(record: SessionRecord, name: string): EnvironmentRecord {
  const environment = record.environments.find((known) => known.name === name);
  if (!environment) throw serviceError("environment_not_found", `session ${record.id} has no environment named ${JSON.stringify(name)}`);
  return environment;
}

/** What a session's record weighs in memory, near enough: its length as JSON text. */
function recordBytes(record: SessionRecord): number {
  return JSON.stringify(record).length;
}
