import type { ServiceImpl } from "@connectrpc/connect";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { PoolStatusSchema, StatusService } from "../../../gen/skillenv/status/v1/status_pb.js";
import { requireWorkspace } from "../auth/index.ts";
import type { PoolStats, WorkspaceLoad } from "../engine/index.ts";
import type { RunStatusCounts } from "../runs/index.ts";
import type { Lifecycle } from "../sessions/index.ts";

/** The window of "runs in the last hour". */
export const RUN_WINDOW_MS = 60 * 60 * 1000;
/**
 * The most runs one answer counts (the newest of the window): the count is one range read of an
 * index of a few bytes a run, bounded by this however many runs the workspace starts.
 */
export const MAX_RUNS_COUNTED = 10_000;

/**
 * Where the numbers come from: the same sources as the Prometheus metrics (app.ts wires both),
 * asked for one workspace. `pool` is undefined when the service environment is not running.
 */
export interface StatusSources {
  sessions(workspace: string): { sessions: Map<string, number> };
  runs(workspace: string, since: number, limit: number): Promise<RunStatusCounts>;
  pool: { stats(): PoolStats; workspaceLoad(workspace: string): WorkspaceLoad } | undefined;
  /** Default Date.now. */
  now?: () => number;
}

/** The StatusService: each workspace's numbers, never another's. */
export function createStatusService(sources: StatusSources): ServiceImpl<typeof StatusService> {
  const now = sources.now ?? Date.now;
  return {
    async getWorkspaceStatus(_request, context) {
      const workspace = requireWorkspace(context);
      const readAt = now();
      const since = readAt - RUN_WINDOW_MS;
      const runs = await sources.runs(workspace, since, MAX_RUNS_COUNTED);
      const sessions = sources.sessions(workspace).sessions;
      const count = (lifecycle: Lifecycle) => sessions.get(lifecycle) ?? 0;
      return {
        readAt: timestampFromMs(readAt),
        sessions: { active: count("active"), ending: count("ending"), ended: count("ended"), deleting: count("deleting") },
        runsLastHour: { since: timestampFromMs(since), ...runs.counts, truncated: runs.truncated },
        pool: poolStatus(sources.pool, workspace),
      };
    },
  };
}

function poolStatus(pool: StatusSources["pool"], workspace: string): MessageInitShape<typeof PoolStatusSchema> {
  if (!pool) return { available: false };
  const stats = pool.stats();
  const load = pool.workspaceLoad(workspace);
  const slots = (kind: "tools" | "agentLoops") => ({
    total: stats.capacity[kind],
    busy: stats.inFlight[kind],
    waiting: stats.waiting[kind],
    workspaceBusy: load.inFlight[kind],
    workspaceWaiting: load.waiting[kind],
  });
  return { available: true, tools: slots("tools"), agentLoops: slots("agentLoops") };
}
