import type { ServiceImpl } from "@connectrpc/connect";
import type { RunInput, Run, RunService } from "../../../gen/skillenv/sessions/v1/runs_pb.js";
import type { Assets } from "../assets/index.ts";
import type { Sealer } from "../environments/index.ts";
import type { ModelProvider } from "../models/index.ts";
import type { Sessions } from "../sessions/index.ts";
import type { SkillRegistry } from "../skills/index.ts";
import type { Store } from "../storage/index.ts";
import { ApprovalRecords } from "./approvals.ts";
import { runMessage } from "./messages.ts";
import { RunRecords } from "./records.ts";
import { RunAssets, type RunSnapshots } from "./run-assets.ts";
import { createRunService } from "./run-service.ts";
import { Runs, type RunSettings } from "./runs.ts";

export { RunService } from "../../../gen/skillenv/sessions/v1/runs_pb.js";
export type { Runs, RunSettings } from "./runs.ts";
export { S3RunAssets } from "./run-assets.ts";
export type { RunStatusCounts } from "./records.ts";
import type { RunRecord } from "./records.ts";

export interface RunsFeature {
  service: ServiceImpl<typeof RunService>;
  runs: Runs;
  /** Submits a run and answers its message: a session's first run, from CreateSession. */
  firstRun(workspace: string, sessionId: string, input: RunInput): Promise<Run>;
}

export interface RunsFeatureOptions {
  store: Store;
  dataDir: string;
  sessions: Sessions;
  skills: SkillRegistry;
  assets: Assets;
  providers: ReadonlyMap<string, ModelProvider>;
  settings: RunSettings;
  /** Told of every run that ended (the metrics). */
  onRunEnded?: ((record: RunRecord) => void) | undefined;
  /** Seals the provider keys of runs that may resume after a restart; none resume without it (SERVICE_RUN_RESUME=off). */
  sealer?: Sealer | undefined;
  /** Where runs' skill snapshots go; default: the data directory. */
  snapshots?: RunSnapshots | undefined;
  /** On a shared store a replica resumes a session's runs when it takes the session over, not at start. */
  shared: boolean;
}

/** Opens the runs, resumes (or ends) those a previous process left running, and starts retention cleanup. */
export async function createRuns(options: RunsFeatureOptions): Promise<RunsFeature> {
  const runs = new Runs({
    ...options,
    records: new RunRecords(options.store),
    runAssets: options.snapshots ?? new RunAssets(options.dataDir),
    approvals: new ApprovalRecords(options.store),
  });
  if (options.shared) await runs.sweepSnapshots();
  else await runs.recover();
  runs.startRetention();
  return {
    service: createRunService(runs),
    runs,
    firstRun: async (workspace, sessionId, input) => runMessage((await runs.create(workspace, sessionId, input)).run),
  };
}
