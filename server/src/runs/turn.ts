import { ConnectError } from "@connectrpc/connect";
import type { StagedFile } from "../environments/index.ts";
import { describeError } from "../errors/index.ts";
import {
  addUsage,
  ModelError,
  thinkingOf,
  type ConversationMessage,
  type ModelProvider,
  type ModelResponse,
  type ToolDefinition,
  type Usage,
} from "../models/index.ts";
import type { ProgressLimits } from "../config/index.ts";
import { ProgressBudget, SKILLS_TOOL_NAME, type AgentLoopPlacement, type Sessions, type ToolCallResult } from "../sessions/index.ts";
import {
  consistentPrefix,
  defaultAgentLoop,
  MaxRoundsExceeded,
  textOf,
  type LoopHost,
  type LoopOutcome,
  type ToolCall,
  type ToolResult,
} from "./default-loop.ts";
import type { RunFailure, RunRecord } from "./records.ts";
import type { RunEvents } from "./run-events.ts";
import { UNKNOWN_OUTCOME_MESSAGE, type TurnLog } from "./turn-log.ts";
import { DEFAULT_DENIAL_MESSAGE, DENIED_CODE, type ApprovalRecord, type Decision, type RunApprovals } from "./approvals.ts";
import { newId } from "../ids/index.ts";
import { callSkillsTool, SKILLS_DIRECTORY, skillsTool, STAGED_SKILL_FILES, type RunSkill } from "./skills-tool.ts";
import type { Submission } from "./submission.ts";
import { withImages } from "./tool-images.ts";
import { callsFromWit, conversationFromWit, parseHostRequest, parseJson, replyToWit, resultsToWit } from "./wit-loop.ts";

/** Everything a turn needs, resolved at submit. */
export interface TurnSetup {
  record: RunRecord;
  submission: Submission;
  /** The session's tools, as the model sees them. */
  tools: ToolDefinition[];
  /** The tools placed with approval "always": each call waits for a person's decision before it is sent. */
  approvalTools: ReadonlySet<string>;
  skills: RunSkill[];
  /** Run files to stage, paths relative to /workspace. */
  files: StagedFile[];
  history: readonly ConversationMessage[];
  /** A custom agent loop; the default loop when absent. */
  agentLoop?: AgentLoopPlacement;
  /** A run resumed after a restart (Runs.recover): what its stopped process had done. */
  resumed?: ResumedTurn;
}

/** Where a resumed turn picks up (docs/runs.md, "Stop, restart and resumption"). */
export interface ResumedTurn {
  /** What the turn had added to the conversation, with an unknown-outcome result for each call whose result was not recorded. */
  added: ConversationMessage[];
  /** The calls given that result: each is reported as a `tool.result` of unknown outcome. */
  unknown: ToolCall[];
  /** Calls a person denied whose result was not recorded: each is reported as its denial. */
  denied: ApprovalRecord[];
  /** Calls still waiting for a person's decision: the turn waits again, then runs or refuses them. */
  waiting: ApprovalRecord[];
  /** Whether the run's files were staged before the stop (its first model call was recorded); if not, they are staged again. */
  staged: boolean;
}

export interface TurnDeps {
  sessions: Sessions;
  /** The run's events; its end is committed through the same writer (Runs). */
  events: RunEvents;
  /** Resolves once the run's record and first event are durable; rejects if they could not be written. */
  recorded: Promise<void>;
  provider: ModelProvider;
  /** When the whole turn must be over (SERVICE_MAX_TURN_SECS after submit). */
  deadlineMs: number;
  /** What a custom loop's `emit` may journal as `turn.progress` (the operations' limits, per turn). */
  progress: ProgressLimits;
  /** Where the turn keeps what it has done, with its events, for a restart to rebuild the run. */
  log: TurnLog;
  /** The run's approvals waiting in this process, which ApproveToolCall and DenyToolCall decide (Runs). */
  approvals: RunApprovals;
}

/** How a turn ended, for the run record. */
export interface TurnEnd {
  status: "completed" | "failed" | "cancelled";
  added: ConversationMessage[];
  stopReason?: string;
  outputText: string;
  error?: RunFailure;
  /** `emit`s of a custom loop that were not journaled (beyond the progress limits). */
  progressDropped: number;
}

/** Why a turn was stopped from outside: the signal's reason. */
export class TurnStopped extends Error {
  override name = "TurnStopped";
  readonly code: "cancelled" | "timeout";
  constructor(code: "cancelled" | "timeout", message: string) {
    super(message);
    this.code = code;
  }
}

/**
 * One turn of a run: stage the skills' and the run's files, then drive the default agent loop,
 * recording every step as the session's events. It never throws: every way a turn ends is a
 * TurnEnd. The record's counters (rounds, tool calls, usage) are updated as it goes. It does
 * not wait for its last events to be durable: the run's end is committed after them, in the
 * same batch as a rule (Runs).
 *
 * It starts while the run's record is being synced, so that its first events (turn.started,
 * model.request) share that batch instead of taking one of their own, which the turn's end
 * would often wait behind. Nothing reaches the model or an environment (staging, tools, a
 * custom loop) before the record is durable; if it cannot be written, the turn is stopped (Runs).
 */
export class Turn implements LoopHost {
  readonly #setup: TurnSetup;
  readonly #deps: TurnDeps;
  readonly #signal: AbortSignal;
  readonly #events: RunEvents;
  readonly #added: ConversationMessage[] = [];
  /** Whether the run's skills' files were staged into a workspace: the prompts say where only then. */
  #skillsStaged = false;
  /** The run's record until it is durable (or could not be written): model calls send nothing before. */
  #unrecorded: Promise<void> | undefined;
  readonly #progress: ProgressBudget;
  /** Set once the turn has ended: a loop's guest may still run (until its deadline), but its emits are not the run's any more. */
  #ended = false;

  constructor(setup: TurnSetup, deps: TurnDeps, signal: AbortSignal) {
    this.#setup = setup;
    this.#deps = deps;
    this.#signal = signal;
    this.#events = deps.events;
    this.#unrecorded = deps.recorded;
    deps.recorded.then(
      () => (this.#unrecorded = undefined),
      () => undefined,
    );
    this.#progress = new ProgressBudget(deps.progress);
  }

  async run(): Promise<TurnEnd> {
    let end: Omit<TurnEnd, "progressDropped">;
    try {
      const { resumed } = this.#setup;
      const waited = resumed ? this.#resume(resumed) : undefined;
      if (!resumed) this.#events.record("turn.started", {});
      if (resumed?.staged) {
        const { workspace, sessionId } = this.#setup.record;
        this.#skillsStaged = await this.#deps.sessions.stagesFiles(workspace, sessionId);
      } else await this.#stage();
      if (waited) await raceStop(waited, this.#signal);
      const { submission, history, agentLoop } = this.#setup;
      const input = { history, message: submission.message, maxRounds: submission.maxRounds, added: this.#added };
      const outcome = agentLoop ? await this.#customLoop(agentLoop) : await defaultAgentLoop(this, input);
      end = { status: "completed", added: this.#added, stopReason: outcome.stopReason, outputText: outcome.outputText };
    } catch (error) {
      end = this.#failed(error);
    }
    this.#ended = true;
    return { ...end, progressDropped: this.#progress.dropped };
  }

  async callModel(messages: ConversationMessage[], round: number): Promise<ModelResponse> {
    this.#throwIfStopped();
    const { record, submission, skills } = this.#setup;
    record.rounds = round;
    const tools = skills.length > 0 ? [...this.#setup.tools, skillsTool(this.#skillsStaged)] : this.#setup.tools;
    const { log } = this.#deps;
    this.#events.record("model.request", { round, messages: messages.length, tools: tools.map((tool) => tool.name) }, [
      log.counters(record),
      ...log.messagesOf(this.#added),
    ]);
    const deltas = this.#events.deltas(round);
    /** What the provider has said this call used, counted even when the call does not finish. */
    let used: Usage = { inputTokens: 0, outputTokens: 0 };
    let reply: ModelResponse;
    try {
      reply = await this.#deps.provider.complete(
        {
          model: submission.model.name,
          system: this.#system(),
          messages,
          tools,
          maxTokens: submission.model.maxTokens,
          parameters: submission.model.parameters,
          promptCache: !submission.model.disablePromptCache,
        },
        // In the first round model.request shares the batch of the run's record: the request is
        // prepared while that batch syncs, and sent once it is durable.
        {
          apiKey: submission.apiKey,
          signal: this.#signal,
          deadlineMs: this.#deps.deadlineMs,
          onTextDelta: (text) => deltas.push(text),
          onUsage: (usage) => (used = usage),
          ...(this.#unrecorded ? { sendAfter: this.#unrecorded } : {}),
        },
      );
    } catch (error) {
      // A cancelled or broken-off call still cost what the provider reported.
      addUsage(record.usage, used);
      throw error;
    } finally {
      // Text that streamed in is journaled before anything the turn records next, its end included.
      deltas.end();
    }
    addUsage(record.usage, reply.usage);
    for (const part of reply.content) {
      // The model's reasoning, as its provider shows it: thinking text, or only that it was redacted.
      const thinking = part.type === "provider_block" ? thinkingOf(part) : undefined;
      if (thinking !== undefined) this.#events.record("assistant.thinking", { round, ...thinking });
    }
    const toolCalls = reply.content.filter((part) => part.type === "tool_call");
    // Logged as the message the loop adds next (both loops add the reply as it is, at once).
    this.#events.record("assistant.message", { round, text: textOf(reply.content), toolCalls, stopReason: reply.stopReason }, [
      log.counters(record),
      log.reply(this.#added.length, { role: "assistant", content: reply.content }, reply.stopReason),
    ]);
    this.#events.record("model.usage", { round, ...reply.usage });
    return reply;
  }

  async dispatchTools(calls: ToolCall[], round: number): Promise<ToolResult[]> {
    this.#throwIfStopped();
    const dispatches = Promise.all(calls.map((call, index) => this.#dispatch(call, round, index)));
    // A stopped turn does not wait for its tools: their cancels are sent and their receipts
    // are recorded whenever they come.
    return raceStop(dispatches, this.#signal);
  }

  /**
   * Continues what a stopped process's turn did: its conversation so far, each tool call whose
   * result it never recorded reported as of unknown outcome (its operation has its own `unknown`
   * receipt; nothing is sent again) or, when a person had denied it, as its denial; then
   * `run.resumed` saying where the turn picks up. Calls still waiting for a decision wait again
   * (the promise returned, undefined when there are none): their results replace, in the round's
   * results, the placeholders the conversation was rebuilt with.
   */
  #resume(resumed: ResumedTurn): Promise<void> | undefined {
    this.#added.push(...resumed.added);
    const round = resumed.added.filter((message) => message.role === "assistant").length;
    for (const call of resumed.unknown)
      this.#events.record("tool.result", { round, callId: call.id, name: call.name, outcome: "unknown", message: UNKNOWN_OUTCOME_MESSAGE });
    const results = this.#added.at(-1)?.content as ToolResult[] | undefined;
    for (const approval of resumed.denied) {
      const result = results?.find((part) => part.toolCallId === approval.callId);
      const { event } = failedResult(DENIED_CODE, approval.message ?? DEFAULT_DENIAL_MESSAGE);
      if (result) this.#events.record("tool.result", { round, callId: approval.callId, name: approval.tool, ...event }, [this.#deps.log.result(result)]);
    }
    this.#events.record("run.resumed", {
      round: round + 1,
      messages: resumed.added.length,
      unknownToolCalls: resumed.unknown.map((call) => call.id),
      restaged: !resumed.staged,
      // Only when calls wait for a decision again: the event is as it was for runs without approvals.
      ...(resumed.waiting.length > 0 ? { awaitingApproval: resumed.waiting.map((approval) => approval.callId) } : {}),
    });
    if (resumed.waiting.length === 0 || !results) return undefined;
    return Promise.all(
      resumed.waiting.map(async (approval) => {
        const call: ToolCall = { type: "tool_call", id: approval.callId, name: approval.tool, input: approval.input };
        const settled = await this.#settle(call, round, approval.index, approval);
        const index = results.findIndex((part) => part.toolCallId === approval.callId);
        results[index] = settled;
      }),
    ).then(() => undefined);
  }

  /**
   * A custom agent loop: one execute operation in the service environment whose host services
   * are this turn's own callModel and dispatchTools (the same code path as the default loop),
   * behind the JSON contract of wit/env.wit.
   */
  async #customLoop(loop: AgentLoopPlacement): Promise<LoopOutcome> {
    const { record, submission, history } = this.#setup;
    this.#added.push({ role: "user", content: [{ type: "text", text: submission.message }] });
    let round = 0;
    const host = {
      callModel: async (request: string) => {
        const messages = conversationFromWit(parseHostRequest(request).messages);
        if (round >= submission.maxRounds) throw { code: "max_rounds_exceeded", message: `the run allows ${submission.maxRounds} model calls` };
        const reply = await this.callModel([...history, ...messages], ++round).catch(asGuestFailure);
        this.#added.push({ role: "assistant", content: reply.content });
        return JSON.stringify(replyToWit(reply));
      },
      dispatchTools: async (request: string) => {
        const results = await this.dispatchTools(callsFromWit(parseHostRequest(request).calls), round).catch(asGuestFailure);
        this.#added.push({ role: "user", content: results });
        return JSON.stringify(resultsToWit(results));
      },
      // What the environment dropped already, past its own limits, counts as dropped here too.
      dropped: (count: number) => this.#progress.droppedElsewhere(count),
      // Bounded before it is parsed: a loop may emit far more, and far larger, than is kept.
      emit: (event: string) => {
        if (!this.#ended && this.#progress.admit(event)) this.#events.record("turn.progress", { event: parseJson(event) });
      },
    };
    const input = JSON.stringify({ v: 1, message: submission.message });
    await this.#deps.recorded;
    const running = this.#deps.sessions.runAgentLoop(record.workspace, record.sessionId, loop, host, {
      input,
      timeoutMs: this.#remainingMs(),
      runId: record.id,
    });
    const { receipt } = await raceStop(running, this.#signal);
    if (receipt.outcome === "failure") throw new LoopFailed(receipt.code, receipt.message);
    if (receipt.outcome === "unknown") throw new LoopFailed("unknown_outcome", receipt.message);
    const output = parseJson(receipt.output) as { message?: unknown } | null;
    return { stopReason: "end_turn", rounds: round, outputText: typeof output?.message === "string" ? output.message : receipt.output };
  }

  async #dispatch(call: ToolCall, round: number, index: number): Promise<ToolResult> {
    const { record } = this.#setup;
    const { log } = this.#deps;
    record.toolCalls++;
    this.#events.record("tool.call", { round, callId: call.id, name: call.name, input: call.input ?? null }, [log.counters(record)]);
    return this.#settle(call, round, index);
  }

  /**
   * Runs one call and records its result: at once, or, for a tool placed with approval "always",
   * once a person approved it (a denial is its error result, and nothing is sent). `approval`: the
   * pending approval a resumed turn waits for again (its request was recorded by the stopped process).
   */
  async #settle(call: ToolCall, round: number, index: number, approval?: ApprovalRecord): Promise<ToolResult> {
    const { log } = this.#deps;
    const result = approval || this.#setup.approvalTools.has(call.name) ? await this.#approved(call, round, index, approval) : await this.#callTool(call);
    const returned = result.event.outcome === "returned";
    const { output, images } = returned ? withImages(result.output) : { output: result.output, images: undefined };
    const toolResult: ToolResult = { type: "tool_result", toolCallId: call.id, output, isError: !returned, ...(images ? { images } : {}) };
    this.#events.record("tool.result", { round, callId: call.id, name: call.name, ...result.event }, [log.result(toolResult)]);
    return toolResult;
  }

  /** Asks for a person's decision (once: a resumed turn passes the approval it asked for), waits, then calls the tool or reports the denial. */
  async #approved(call: ToolCall, round: number, index: number, asked?: ApprovalRecord): Promise<{ output: string; event: Record<string, unknown> }> {
    const { approvals } = this.#deps;
    let approval = asked;
    if (!approval) {
      const { workspace, sessionId, id: runId } = this.#setup.record;
      const input = call.input ?? null;
      approval = {
        id: newId("apr"),
        workspace,
        sessionId,
        runId,
        round,
        index,
        callId: call.id,
        tool: call.name,
        input,
        status: "pending",
        requestedAt: new Date().toISOString(),
      };
      // Waited for before it is recorded: a decision that comes as soon as the event is seen finds it.
      const decided = approvals.wait(approval);
      this.#events.record("tool.approval_requested", { round, callId: call.id, approvalId: approval.id, tool: call.name, input }, [
        approvals.records.putOp(approval),
      ]);
      return this.#decided(call, await decided);
    }
    return this.#decided(call, await approvals.wait(approval));
  }

  async #decided(call: ToolCall, decision: Decision): Promise<{ output: string; event: Record<string, unknown> }> {
    if (!decision.approved) return failedResult(DENIED_CODE, decision.message);
    // A turn stopped while the decision was being written sends nothing after all.
    this.#throwIfStopped();
    return this.#callTool(call);
  }

  async #callTool(call: ToolCall): Promise<{ output: string; event: Record<string, unknown> }> {
    if (call.name === SKILLS_TOOL_NAME && this.#setup.skills.length > 0) {
      const answer = callSkillsTool(call.input, this.#setup.skills);
      return answer.ok ? returnedResult(answer.output) : failedResult(answer.code, answer.message);
    }
    const { workspace, sessionId, id } = this.#setup.record;
    let called: ToolCallResult;
    try {
      const input = JSON.stringify(call.input ?? {});
      called = await this.#deps.sessions.callTool(workspace, sessionId, call.name, { input, timeoutMs: this.#remainingMs(), runId: id });
    } catch (error) {
      const { body } = describeError(error);
      return failedResult(body.code, body.message);
    }
    const { receipt, operationId } = called;
    if (receipt.outcome === "returned") return returnedResult(receipt.output, operationId);
    if (receipt.outcome === "failure") return failedResult(receipt.code, receipt.message, operationId);
    return {
      output: JSON.stringify({ error: { code: "unknown_outcome", message: `the tool may or may not have run: ${receipt.message}` } }),
      event: { outcome: "unknown", message: receipt.message, operationId },
    };
  }

  /**
   * Into every workspace of the session: skills/ replaced by the skills' files under
   * skills/<name>/, then the run's files. A run without skills or files stages too, so that no
   * earlier run's skills are left in skills/. A session without a workspace stages nothing, and
   * does not wait here for the run's record: its first model request may share that batch.
   */
  async #stage(): Promise<void> {
    const { skills, files, record } = this.#setup;
    const { sessions } = this.#deps;
    if (!(await sessions.stagesFiles(record.workspace, record.sessionId))) return;
    const skillFiles = skills.flatMap((skill) => [...skill.files].map(([path, bytes]) => ({ path: `${SKILLS_DIRECTORY}/${skill.name}/${path}`, bytes })));
    await this.#deps.recorded;
    const receipts = await sessions.stage(record.workspace, record.sessionId, { replace: [SKILLS_DIRECTORY], files: [...skillFiles, ...files] }, record.id);
    const failed = receipts.find(({ receipt }) => receipt.outcome !== "returned");
    if (failed)
      throw new StagingFailed(
        `staging into environment ${failed.environment} failed: ${failed.receipt.outcome === "failure" ? failed.receipt.message : failed.receipt.outcome}`,
      );
    this.#skillsStaged = receipts.length > 0;
  }

  #system(): string {
    const parts = [this.#setup.submission.agentsMd];
    if (this.#setup.skills.length > 0) {
      const where = this.#skillsStaged ? ` Its files are under ${STAGED_SKILL_FILES}.` : "";
      parts.push(`Skills are available through the \`skills\` tool: list them, then load one before following it.${where}`);
    }
    return parts.filter((part) => part !== "").join("\n\n");
  }

  #failed(error: unknown): Omit<TurnEnd, "progressDropped"> {
    const added = consistentPrefix(this.#added);
    const outputText = "";
    const stop = this.#signal.aborted ? (this.#signal.reason as TurnStopped) : undefined;
    if (stop?.code === "cancelled") return { status: "cancelled", added, outputText, error: { code: "cancelled", message: stop.message } };
    if (stop) return { status: "failed", added, outputText, error: { code: stop.code, message: stop.message } };
    return { status: "failed", added, outputText, error: failureOf(error) };
  }

  #remainingMs(): number {
    return Math.max(0, this.#deps.deadlineMs - Date.now());
  }

  #throwIfStopped(): void {
    if (this.#signal.aborted) throw this.#signal.reason;
  }
}

class StagingFailed extends Error {
  override name = "StagingFailed";
}

/** A custom agent loop ended with a failure of its own (or an unknown outcome). */
class LoopFailed extends Error {
  override name = "LoopFailed";
  readonly code: string;
  constructor(code: string, message: string) {
    super(message);
    this.code = code;
  }
}

/** What a guest's host call sees of a failure: its stable code, never host internals. */
function asGuestFailure(error: unknown): never {
  throw failureOf(error);
}

function failureOf(error: unknown): RunFailure {
  if (error instanceof ModelError) {
    const hasDetails = Object.keys(error.details).length > 0;
    return { code: error.code, message: error.message, retryable: error.retryable, ...(hasDetails ? { details: { ...error.details } } : {}) };
  }
  if (error instanceof MaxRoundsExceeded) return { code: "max_rounds_exceeded", message: error.message };
  if (error instanceof StagingFailed) return { code: "staging_failed", message: error.message };
  if (error instanceof LoopFailed) return { code: error.code, message: error.message };
  if (error instanceof TurnStopped) return { code: error.code, message: error.message };
  if (error instanceof ConnectError) {
    const { body } = describeError(error);
    return { code: body.code, message: body.message };
  }
  return { code: "internal", message: "the turn failed unexpectedly" };
}

function returnedResult(output: string, operationId?: string): { output: string; event: Record<string, unknown> } {
  return { output, event: { outcome: "returned", output: parseJson(output), ...(operationId ? { operationId } : {}) } };
}

function failedResult(code: string, message: string, operationId?: string): { output: string; event: Record<string, unknown> } {
  return {
    output: JSON.stringify({ error: { code, message } }),
    event: { outcome: "failure", error: { code, message }, ...(operationId ? { operationId } : {}) },
  };
}

function raceStop<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    work.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(error);
      },
    );
  });
}
