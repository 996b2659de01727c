export type { AgentLoop, AgentLoopImplementation, PreparedAgentLoop, ResolvedAgentLoopImplementation } from "./agent-loop.ts";
export { Run, type DecisionOptions, type DenialOptions, type RunEventSource, type RunRpc, type WaitOptions } from "./run.ts";
export { createSessionRuns, runHandle, type RunPage, type RunsDeps, type RunSession, type SessionRuns } from "./session-runs.ts";
export {
  prepareRunInput,
  type PinnedSkill,
  type RunFile,
  type RunModel,
  type RunOptions,
  type RunSkill,
  type RunSubmission,
  type RunUploads,
} from "./submission.ts";
export { submitRun } from "./submit.ts";
export type { ApprovalRecord, ApprovalStatus, RunRecord, RunSkillSnapshot, RunStatus, RunUsage } from "./wire.ts";
