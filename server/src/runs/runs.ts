import type { Assets } from "../assets/index.ts";
import type { ProgressLimits } from "../config/index.ts";
import type { Sealer, StagedFile } from "../environments/index.ts";
import { serviceError } from "../errors/index.ts";
import { newId } from "../ids/index.ts";
import type { ModelProvider, ToolDefinition } from "../models/index.ts";
import type { SessionRecord, Sessions } from "../sessions/index.ts";
import type { SkillRegistry } from "../skills/index.ts";
import { KeyedLock, type Page, type PageRequest, type WriteOp } from "../storage/index.ts";
import type { RunRecord, RunRecords, RunStatusCounts } from "./records.ts";
import type { RunSnapshots } from "./run-assets.ts";
import { RunEvents } from "./run-events.ts";
import type { RunSkill } from "./skills-tool.ts";
import { checkSubmission, type Submission } from "./submission.ts";
import { textOf } from "./default-loop.ts";
import { Turn, TurnStopped, type TurnEnd, type TurnSetup } from "./turn.ts";
import { inTurnSpan } from "./turn-span.ts";
import { interruptedConversation, type LoggedTurn, type ResumableSubmission, type TurnLog } from "./turn-log.ts";
import type { RunInput } from "../../../gen/skillenv/sessions/v1/runs_pb.js";
import { DEFAULT_DENIAL_MESSAGE, RunApprovals, type ApprovalRecord, type ApprovalRecords, type Decision } from "./approvals.ts";
import { checkTextChars } from "../sessions/index.ts";

export interface RunSettings {
  /** SERVICE_RUN_MAX_ROUNDS: model calls per run, at most. */
  maxRounds: number;
  /** SERVICE_MAX_TURN_SECS: a whole turn, at most. */
  maxTurnSecs: number;
  /** Largest message (it is journaled). */
  maxMessageBytes: number;
  /** SERVICE_MAX_FIELD_BYTES: largest model name, model parameters, agent loop configuration. */
  maxFieldBytes: number;
  /** SERVICE_RUN_RETENTION_DAYS: finished runs older than this are removed. */
  retentionDays: number;
  /** SERVICE_JOURNAL_MAX_PROGRESS_EVENTS and _BYTES: a custom loop's `turn.progress` per run. */
  progress: ProgressLimits;
  /** SERVICE_LIST_MAX_BYTES: a page's byte budget. */
  listMaxBytes: number;
}

export interface RunsOptions {
  records: RunRecords;
  sessions: Sessions;
  skills: SkillRegistry;
  assets: Assets;
  runAssets: RunSnapshots;
  providers: ReadonlyMap<string, ModelProvider>;
  settings: RunSettings;
  /** Told of every run that ended, once its end is durable (the metrics). */
  onRunEnded?: ((record: RunRecord) => void) | undefined;
  /**
   * Seals the provider key of a run that may resume after a restart (SERVICE_RUN_RESUME, on by
   * default). Without it no key is kept at rest, and a run the process stopped in ends `interrupted`.
   */
  sealer?: Sealer | undefined;
  approvals: ApprovalRecords;
}

/** A run this process is driving. */
interface ActiveRun {
  record: RunRecord;
  controller: AbortController;
  done: Promise<void>;
  /** Its events: a decision on one of its approvals is written among them. */
  events: RunEvents;
  approvals: RunApprovals;
}

/** The longest label a decision may carry (who decided, as the caller says). */
const MAX_LABEL_CHARS = 256;
/** The longest denial message (the model reads it). */
const MAX_DENIAL_MESSAGE_CHARS = 4096;

const RETENTION_SWEEP_MS = 60 * 60 * 1000;
const RETENTION_BATCH = 100;

/**
 * Runs (SPEC 4, 4.1, 4.2, 3.7, 3.8): submission with a snapshot of every referenced skill,
 * idempotency, one running run per session, cancellation, deletion, retention, and recovery
 * after a restart. The turn itself is Turn's.
 */
export class Runs {
  readonly #options: RunsOptions;
  readonly #active = new Map<string, ActiveRun>();
  readonly #lock = new KeyedLock();
  #sweeper: NodeJS.Timeout | undefined;

  constructor(options: RunsOptions) {
    this.#options = options;
    options.sessions.onClosing((workspace, sessionId, reason) => this.#sessionClosing(workspace, sessionId, reason));
  }

  async create(workspace: string, sessionId: string, input: RunInput | undefined): Promise<{ run: RunRecord; created: boolean }> {
    const session = await this.#options.sessions.get(workspace, sessionId);
    if (session.lifecycle !== "active") throw serviceError("session_ended", `session ${sessionId} is ${session.lifecycle}; it takes no new runs`);
    const submission = checkSubmission(input, this.#rules());
    return this.#lock.run(sessionId, async () => {
      const existing = submission.idempotencyKey ? await this.#options.records.byIdempotencyKey(workspace, sessionId, submission.idempotencyKey) : undefined;
      if (existing) return { run: this.#sameSubmission(existing, submission), created: false };
      if (this.#runningIn(sessionId))
        throw serviceError("run_in_progress", `session ${sessionId} is running run ${this.#runningIn(sessionId)!.record.id}; wait for it or cancel it`);
      const record = await this.#submit(workspace, session, submission);
      return { run: record, created: true };
    });
  }

  async get(workspace: string, sessionId: string, runId: string): Promise<RunRecord> {
    await this.#options.sessions.get(workspace, sessionId);
    const record = this.#active.get(runId)?.record ?? (await this.#options.records.get(workspace, sessionId, runId));
    if (!record || record.workspace !== workspace || record.sessionId !== sessionId)
      throw serviceError("run_not_found", `session ${sessionId} has no run ${JSON.stringify(runId)}`);
    return record;
  }

  /** A page of the session's runs, newest first, a running one as this process holds it. */
  async list(workspace: string, sessionId: string, request: PageRequest): Promise<Page<RunRecord>> {
    await this.#options.sessions.get(workspace, sessionId);
    const page = await this.#options.records.page(workspace, sessionId, request, this.#options.settings.listMaxBytes);
    return { ...page, items: page.items.map((record) => this.#active.get(record.id)?.record ?? record) };
  }

  /** The workspace's runs started at `since` (epoch ms) or later, by status, counting at most `limit` (the newest). */
  startedSince(workspace: string, since: number, limit: number): Promise<RunStatusCounts> {
    return this.#options.records.startedSince(workspace, since, limit);
  }

  /** Stops a running run and waits until it has ended; a finished run is returned as it is. */
  async cancel(workspace: string, sessionId: string, runId: string): Promise<RunRecord> {
    const record = await this.get(workspace, sessionId, runId);
    const active = this.#active.get(runId);
    if (!active) return record;
    active.controller.abort(new TurnStopped("cancelled", "the run was cancelled"));
    await active.done;
    return active.record;
  }

  /** Removes a finished run: its record, its part of the conversation and its snapshots. */
  async delete(workspace: string, sessionId: string, runId: string): Promise<void> {
    const record = await this.get(workspace, sessionId, runId);
    if (this.#active.has(runId)) throw serviceError("run_in_progress", `run ${runId} is running; cancel it first`);
    await this.#remove(record);
  }

  /** The run's approvals, oldest first. */
  async approvals(workspace: string, sessionId: string, runId: string): Promise<ApprovalRecord[]> {
    await this.get(workspace, sessionId, runId);
    return this.#options.approvals.ofRun(workspace, sessionId, runId);
  }

  /**
   * Decides a pending approval, once (docs/runs.md, "Approvals"): the decision is written with its
   * event (`tool.approved`, `tool.denied`) among the run's events, and only once it is durable is
   * the turn told (an approved call is then sent) and the caller answered. A decision that finds
   * the approval decided or expired is refused, and changes nothing.
   */
  async decide(
    workspace: string,
    sessionId: string,
    runId: string,
    approvalId: string,
    decision: { approved: boolean; label: string; message: string },
  ): Promise<ApprovalRecord> {
    checkTextChars("label", decision.label, MAX_LABEL_CHARS);
    checkTextChars("message", decision.message, MAX_DENIAL_MESSAGE_CHARS);
    const run = await this.get(workspace, sessionId, runId);
    const active = this.#active.get(runId);
    // A run being stopped (cancelled, timed out) takes no decision: its approvals are expiring.
    const ending = active?.controller.signal.aborted === true;
    const taken = ending ? undefined : active?.approvals.take(approvalId, decision.approved ? "approved" : "denied");
    if (!active || taken === undefined || typeof taken === "string")
      throw await this.#undecidable(run, approvalId, typeof taken === "string" ? taken : undefined, ending);
    const decided: Decision = {
      approved: decision.approved,
      decidedBy: { workspace, label: decision.label },
      message: decision.approved ? "" : decision.message || DEFAULT_DENIAL_MESSAGE,
    };
    const record: ApprovalRecord = {
      ...taken.record,
      status: decision.approved ? "approved" : "denied",
      decidedAt: new Date().toISOString(),
      decidedBy: decided.decidedBy,
      ...(decision.approved ? {} : { message: decided.message }),
    };
    const { round, callId, tool } = record;
    const data = { round, callId, approvalId, tool, decidedBy: decided.decidedBy, ...(decision.approved ? {} : { message: decided.message }) };
    try {
      await active.events.commit(decision.approved ? "tool.approved" : "tool.denied", data, [this.#options.approvals.putOp(record)]);
    } catch (error) {
      // Whether it was written is not known: a later decision finds the approval as storage has it.
      active.approvals.putBack(taken.record, taken.decided);
      throw error;
    }
    taken.decided(decided);
    return record;
  }

  /** Why a decision cannot be taken: the approval is unknown, decided, expired, or not waited for by this process. */
  async #undecidable(run: RunRecord, approvalId: string, settled: string | undefined, ending: boolean): Promise<Error> {
    const stored = await this.#options.approvals.get(run.workspace, run.sessionId, run.id, approvalId);
    const status = settled ?? stored?.status;
    if (!stored && !settled) return serviceError("approval_not_found", `run ${run.id} has no approval ${JSON.stringify(approvalId)}`);
    if (status === "approved" || status === "denied") return serviceError("approval_decided", `approval ${approvalId} was ${status} already`);
    if (status === "expired" || ending || run.status !== "running")
      return serviceError("approval_expired", `run ${run.id} ended before approval ${approvalId} was decided; the tool was not called`);
    return serviceError("unavailable", `run ${run.id} is not driven by this server process; try again`);
  }

  /**
   * Runs that were running when the process stopped continue where their turn's log says they
   * were (docs/runs.md, "Stop, restart and resumption"): a reply that had ended the turn ends
   * the run; otherwise the turn resumes at its next model call. A run that cannot resume (a custom
   * agent loop, resumption off, its turn's time over, its key or snapshot gone) ends failed with
   * code `interrupted` and what its turn had done (its counters and conversation; a tool whose
   * result was not recorded is reported as of unknown outcome). Nothing a turn sent is sent again.
   * Snapshots of submissions that were never recorded are removed.
   */
  async recover(): Promise<void> {
    await this.#recoverRuns(await this.#options.records.interrupted());
    await this.sweepSnapshots();
  }

  /** This replica took the session over: its running runs resume here, or end, as after a restart. */
  async takeOver(sessionId: string): Promise<void> {
    const interrupted = await this.#options.records.interrupted();
    await this.#recoverRuns(interrupted.filter((record) => record.sessionId === sessionId && !this.#active.has(record.id)));
  }

  /** Another replica took the session over: its run stops here without writing anything more (its writes are fenced). */
  lose(sessionId: string): void {
    this.#runningIn(sessionId)?.controller.abort(new TurnStopped("cancelled", "another replica took the session over"));
  }

  /** Sessions with a run running, by the records: a replica's sweep takes those of dead replicas over. */
  async unfinishedSessions(): Promise<Set<string>> {
    return new Set((await this.#options.records.interrupted()).map((record) => record.sessionId));
  }

  /** Removes the snapshots of submissions that were never recorded; call it at start, before runs are taken. */
  async sweepSnapshots(): Promise<void> {
    const recorded = await this.#options.records.ids();
    await this.#options.runAssets.sweep((runId) => recorded.has(runId));
  }

  async #recoverRuns(interrupted: RunRecord[]): Promise<void> {
    for (const record of interrupted) {
      const { logged, clearOps } = await this.#options.records.readTurnLog(record);
      const approvals = await this.#options.approvals.ofRun(record.workspace, record.sessionId, record.id);
      Object.assign(record, logged.counters);
      const last = logged.messages.at(-1);
      if (last?.role === "assistant" && !last.content.some((part) => part.type === "tool_call")) {
        // The turn had ended; only its end was not written.
        const outputText = textOf(last.content);
        const end: TurnEnd = { status: "completed", added: logged.messages, stopReason: logged.stopReason ?? "end_turn", outputText, progressDropped: 0 };
        await this.#finish(record, end, undefined, clearOps);
        continue;
      }
      const resumption = await this.#resumption(record, logged, approvals).catch((error: unknown) => ({
        why: `it could not resume: ${error instanceof Error ? error.message : String(error)}`,
      }));
      if ("setup" in resumption) {
        const events = new RunEvents(this.#options.sessions, record.sessionId, record.id);
        this.#start(resumption.setup, events, Promise.resolve(), this.#options.records.turnLog(record, logged));
        continue;
      }
      const error = { code: "interrupted", message: `the server stopped during the run; ${resumption.why}` };
      const { messages, waiting } = interruptedConversation(logged, approvals);
      const expired = waiting.map((approval) => this.#options.approvals.putOp({ ...approval, status: "expired" }));
      await this.#finish(record, { status: "failed", added: messages, outputText: "", error, progressDropped: 0 }, undefined, [...clearOps, ...expired]);
    }
  }

  /** What an interrupted run needs to resume, read back from its log and snapshot, or why it cannot. */
  async #resumption(record: RunRecord, logged: LoggedTurn, approvals: readonly ApprovalRecord[]): Promise<{ setup: TurnSetup } | { why: string }> {
    const { sealer, settings, providers, sessions } = this.#options;
    const saved = logged.submission;
    if (!saved) return { why: "it was not resumed (a custom agent loop, or a run submitted with SERVICE_RUN_RESUME off)" };
    if (!sealer) return { why: "it was not resumed (SERVICE_RUN_RESUME is off)" };
    if (Date.parse(record.createdAt) + settings.maxTurnSecs * 1000 <= Date.now())
      return { why: `its turn's time (SERVICE_MAX_TURN_SECS, ${settings.maxTurnSecs} s) was over before it could resume` };
    if (!providers.has(record.model.provider)) return { why: `provider ${record.model.provider} is not configured any more` };
    let apiKey: string;
    try {
      apiKey = sealer.unseal(saved.sealedKey);
    } catch {
      return { why: "its provider key could not be unsealed (the sealing key is not the one it was sealed with)" };
    }
    const session = await sessions.get(record.workspace, record.sessionId);
    if (session.lifecycle !== "active") return { why: `its session is ${session.lifecycle}` };
    const skills = await this.#resumedSkills(record);
    // Its first model call was recorded after staging: a turn stopped before it stages again.
    const staged = logged.messages.length > 0;
    const files = staged ? [] : await this.#resolveFiles(record.workspace, saved.files);
    const { messages: added, unknown, denied, waiting } = interruptedConversation(logged, approvals);
    const submission: Submission = {
      model: record.model,
      agentloop: undefined,
      skills: record.skills.map((skill) => skill.name),
      pins: Object.fromEntries(record.skills.flatMap(({ name, version, pinned }) => (pinned && version ? [[name, version]] : []))),
      message: saved.message,
      agentsMd: saved.agentsMd,
      files: saved.files,
      maxRounds: saved.maxRounds,
      idempotencyKey: record.idempotencyKey,
      idempotencyHash: record.idempotencyHash,
      apiKey,
    };
    const history = await this.#options.records.conversation(record.sessionId);
    return { setup: { record, submission, ...toolsOf(session), skills, files, history, resumed: { added, unknown, denied, waiting, staged } } };
  }

  /** The run's skills from its snapshot (SPEC 3.8): what it was submitted with, whatever the registry holds now. */
  async #resumedSkills(record: RunRecord): Promise<RunSkill[]> {
    const skills: RunSkill[] = [];
    for (const { name, contentHash, description } of record.skills) {
      const bytes = await this.#options.runAssets.read(record.id, contentHash);
      if (!bytes) throw new Error(`the snapshot of skill ${name} is gone`);
      const files = await this.#options.skills.bundleFiles(bytes);
      skills.push({ name, description, contentHash, skillMd: new TextDecoder().decode(files.get("SKILL.md")), files });
    }
    return skills;
  }

  /** Removes finished runs older than the retention period now and every hour. */
  startRetention(): void {
    const sweep = () => void this.sweep().catch(() => undefined);
    sweep();
    this.#sweeper = setInterval(sweep, RETENTION_SWEEP_MS);
    this.#sweeper.unref();
  }

  async sweep(now = Date.now()): Promise<number> {
    const before = new Date(now - this.#options.settings.retentionDays * 24 * 60 * 60 * 1000).toISOString();
    let removed = 0;
    for (;;) {
      const expired = await this.#options.records.finishedBefore(before, RETENTION_BATCH);
      for (const record of expired) await this.#remove(record);
      removed += expired.length;
      if (expired.length < RETENTION_BATCH) return removed;
    }
  }

  /** Stops every run this process drives (server shutdown): they end cancelled. */
  async close(): Promise<void> {
    clearInterval(this.#sweeper);
    const active = [...this.#active.values()];
    for (const run of active) run.controller.abort(new TurnStopped("cancelled", "the server is shutting down"));
    await Promise.all(active.map((run) => run.done));
  }

  async #submit(workspace: string, session: SessionRecord, submission: Submission): Promise<RunRecord> {
    const loop = submission.agentloop;
    const agentLoop = loop
      ? await this.#options.sessions.checkAgentLoop(workspace, session.id, loop.environment, loop.implementation, loop.configuration)
      : undefined;
    const id = newId("run");
    const skills = await this.#resolveSkills(workspace, submission, id);
    const files = await this.#resolveFiles(workspace, submission.files).catch(async (error: unknown) => {
      await this.#forgetSkills(workspace, id, skills);
      throw error;
    });
    await this.#snapshot(id, skills).catch(async (error: unknown) => {
      await this.#forgetSkills(workspace, id, skills);
      throw error;
    });
    const record: RunRecord = {
      id,
      sessionId: session.id,
      workspace,
      status: "running",
      model: submission.model,
      skills: skills.map(({ name, contentHash, description, version }) => ({
        name,
        contentHash,
        description,
        version,
        ...(submission.pins[name] !== undefined ? { pinned: true as const } : {}),
      })),
      createdAt: new Date().toISOString(),
      usage: { inputTokens: 0, outputTokens: 0 },
      rounds: 0,
      toolCalls: 0,
      outputText: "",
      idempotencyHash: submission.idempotencyHash,
      ...(submission.idempotencyKey ? { idempotencyKey: submission.idempotencyKey } : {}),
    };
    const history = await this.#options.records.conversation(session.id);
    const events = new RunEvents(this.#options.sessions, session.id, id);
    const log = this.#options.records.turnLog(record);
    const startOps = this.#options.records.startOps(record);
    // A default-loop run may resume after a restart: what it needs beyond its record is logged with it.
    if (this.#options.sealer && !loop) startOps.push(log.submission(resumable(submission, this.#options.sealer)));
    const recorded = events.commit(
      "run.submitted",
      {
        model: { provider: submission.model.provider, name: submission.model.name },
        skills: record.skills.map(({ name, contentHash, version, pinned }) => ({ name, contentHash, version, ...(pinned ? { pinned } : {}) })),
        files: submission.files,
        message: submission.message,
        idempotencyHash: submission.idempotencyHash,
      },
      startOps,
    );
    // The turn starts while the run's record is synced (see Turn); the run is answered once it is durable.
    this.#start({ record, submission, ...toolsOf(session), skills, files, history, ...(agentLoop ? { agentLoop } : {}) }, events, recorded, log);
    await recorded;
    return record;
  }

  #start(setup: TurnSetup, events: RunEvents, recorded: Promise<void>, log: TurnLog): void {
    const { record, submission } = setup;
    const controller = new AbortController();
    recorded.catch(() => controller.abort(new TurnStopped("cancelled", "the run could not be recorded")));
    const deadlineMs = Date.parse(record.createdAt) + this.#options.settings.maxTurnSecs * 1000;
    const timer = setTimeout(
      () => controller.abort(new TurnStopped("timeout", `the turn passed SERVICE_MAX_TURN_SECS (${this.#options.settings.maxTurnSecs} s)`)),
      deadlineMs - Date.now(),
    );
    const provider = this.#options.providers.get(submission.model.provider)!;
    const approvals = new RunApprovals(this.#options.approvals);
    const done = (async () => {
      const end = await inTurnSpan(record, submission, () =>
        new Turn(
          setup,
          { sessions: this.#options.sessions, events, recorded, provider, deadlineMs, progress: this.#options.settings.progress, log, approvals },
          controller.signal,
        ).run(),
      );
      clearTimeout(timer);
      // Undecided approvals end with the run: no decision can reach them after this.
      const expired = approvals.expireAll().map((approval) => this.#options.approvals.putOp(approval));
      // A run whose record could not be written was never created: nothing more is written for
      // it, and its snapshot goes.
      if (
        !(await recorded.then(
          () => true,
          () => false,
        ))
      ) {
        await this.#options.runAssets.remove(record.id);
        await this.#forgetSkills(record.workspace, record.id, record.skills);
        return;
      }
      if (controller.signal.aborted) await this.#options.sessions.cancelRunOperations(record.workspace, record.sessionId, record.id).catch(() => undefined);
      await this.#finish(record, end, events, [...log.clearOps(), ...expired]);
    })()
      // A run whose end could not be written stays active in storage: the next start marks it interrupted.
      .catch(() => undefined)
      .finally(() => this.#active.delete(record.id));
    this.#active.set(record.id, { record, controller, done, events, approvals });
  }

  /**
   * Ends the run: its record, the conversation it added and its last event in one atomic batch,
   * committed after every event the turn recorded (which the turn did not wait for); a turn
   * event that could not be written fails this too. GetRun shows the end once it is durable.
   */
  async #finish(
    record: RunRecord,
    end: TurnEnd,
    events = new RunEvents(this.#options.sessions, record.sessionId, record.id),
    clearLog: WriteOp[] = [],
  ): Promise<void> {
    const finished: RunRecord = {
      ...record,
      status: end.status,
      finishedAt: new Date().toISOString(),
      outputText: end.outputText,
      ...(end.stopReason ? { stopReason: end.stopReason } : {}),
      ...(end.error ? { error: end.error } : {}),
    };
    const counts = { rounds: record.rounds, toolCalls: record.toolCalls, usage: record.usage, progressDropped: end.progressDropped };
    const [type, data] =
      end.status === "completed"
        ? (["turn.completed", { stopReason: end.stopReason, outputText: end.outputText, ...counts }] as const)
        : ([end.status === "cancelled" ? "run.cancelled" : "turn.failed", { ...end.error, ...counts }] as const);
    await this.#options.records.finish(finished, end.added, (records) => events.commit(type, data, records), clearLog);
    Object.assign(record, finished);
    this.#options.onRunEnded?.(finished);
  }

  /**
   * Each reference's pinned version, else the current one (SPEC 3.8), recorded as used by the run
   * (so retention keeps it while the run is retained); on a failure, the uses recorded are forgotten.
   */
  async #resolveSkills(workspace: string, submission: Submission, runId: string): Promise<Array<RunSkill & { version: number; bytes: Uint8Array }>> {
    const resolved: Array<RunSkill & { version: number; bytes: Uint8Array }> = [];
    const used: Array<{ name: string; version: number }> = [];
    try {
      for (const name of submission.skills) {
        const { version, files } = await this.#options.skills.resolve(workspace, name, submission.pins[name], runId);
        used.push({ name, version: version.version });
        const bytes = await this.#options.assets.read(workspace, version.contentHash);
        if (!bytes) throw serviceError("skill_not_found", `the bundle of skill ${name} is no longer available`);
        const skillMd = new TextDecoder().decode(files.get("SKILL.md"));
        resolved.push({ name, description: version.description, contentHash: version.contentHash, version: version.version, skillMd, files, bytes });
      }
    } catch (error) {
      await this.#forgetSkills(workspace, runId, used);
      throw error;
    }
    return resolved;
  }

  /** Forgets the run's uses of skill versions (a submission that failed, a run removed). */
  async #forgetSkills(workspace: string, runId: string, skills: ReadonlyArray<{ name: string; version?: number | undefined }>): Promise<void> {
    await this.#options.skills.forgetRun(
      workspace,
      runId,
      skills.map(({ name, version }) => ({ name, version: version ?? 0 })),
    );
  }

  async #resolveFiles(workspace: string, files: Submission["files"]): Promise<StagedFile[]> {
    const resolved: StagedFile[] = [];
    for (const { path, assetSha256 } of files) {
      const bytes = await this.#options.assets.read(workspace, assetSha256);
      if (!bytes) throw serviceError("asset_not_found", `files[] ${JSON.stringify(path)}: this workspace has no finalized asset ${assetSha256}`);
      resolved.push({ path, bytes });
    }
    return resolved;
  }

  /** Copies every skill's bundle into run asset storage; all or nothing. */
  async #snapshot(runId: string, skills: ReadonlyArray<{ contentHash: string; bytes: Uint8Array }>): Promise<void> {
    try {
      for (const skill of skills) await this.#options.runAssets.put(runId, skill.contentHash, skill.bytes);
    } catch (error) {
      await this.#options.runAssets.remove(runId);
      throw error;
    }
  }

  #sameSubmission(existing: RunRecord, submission: Submission): RunRecord {
    if (existing.idempotencyHash === submission.idempotencyHash) return this.#active.get(existing.id)?.record ?? existing;
    throw serviceError(
      "idempotency_key_reused",
      `idempotency key ${JSON.stringify(submission.idempotencyKey)} was used for run ${existing.id} with a different submission`,
    );
  }

  async #remove(record: RunRecord): Promise<void> {
    await this.#options.records.delete(record);
    await this.#options.approvals.remove(record.workspace, record.sessionId, record.id);
    await this.#options.runAssets.remove(record.id);
    await this.#forgetSkills(record.workspace, record.id, record.skills);
  }

  /** A session that ends stops its run; one that is deleted also loses its runs. */
  async #sessionClosing(workspace: string, sessionId: string, reason: "end" | "delete"): Promise<void> {
    const active = this.#runningIn(sessionId);
    if (active) {
      active.controller.abort(new TurnStopped("cancelled", reason === "end" ? "the session ended" : "the session was deleted"));
      await active.done;
    }
    if (reason === "delete") for (const record of await this.#options.records.all(workspace, sessionId)) await this.#remove(record);
  }

  #runningIn(sessionId: string): ActiveRun | undefined {
    for (const run of this.#active.values()) if (run.record.sessionId === sessionId) return run;
    return undefined;
  }

  #rules() {
    const { maxRounds, maxMessageBytes, maxFieldBytes } = this.#options.settings;
    return { providers: new Set(this.#options.providers.keys()), maxRounds, maxMessageBytes, maxFieldBytes };
  }
}

/** What a run needs to resume beyond its record, its provider key sealed. */
function resumable({ message, agentsMd, maxRounds, files, apiKey }: Submission, sealer: Sealer): ResumableSubmission {
  return { sealedKey: sealer.seal(apiKey), message, agentsMd, maxRounds, files };
}

/** The session's tools, as the model sees them, and those whose calls wait for a person's approval. */
function toolsOf(session: SessionRecord): { tools: ToolDefinition[]; approvalTools: ReadonlySet<string> } {
  const tools = session.tools.map((tool) => ({
    name: tool.name,
    description: tool.description,
    inputSchema: JSON.parse(tool.inputSchema) as Record<string, unknown>,
  }));
  return { tools, approvalTools: new Set(session.tools.filter((tool) => tool.approval === "always").map((tool) => tool.name)) };
}
