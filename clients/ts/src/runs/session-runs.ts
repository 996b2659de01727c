import type { Run as RunMessage } from "../../gen/skillenv/sessions/v1/runs_pb.js";
import type { ListOptions } from "../sessions/index.ts";
import { required } from "../sessions/wire.ts";
import { Run, type RunEventSource, type RunRpc } from "./run.ts";
import type { RunUploads } from "./submission.ts";
import { runRecordFrom } from "./wire.ts";

/** What sessions need for runs: the RunService client and the uploads a submission may need. */
export interface RunsDeps {
  rpc: RunRpc;
  uploads: RunUploads;
}

export interface RunPage {
  /** Newest first. */
  runs: Run[];
  /** Empty on the last page. */
  nextPageToken: string;
}

/** `session.runs`: the runs of one session. */
export interface SessionRuns {
  /** Default 50 a page, at most 1000. */
  list(options?: ListOptions): Promise<RunPage>;
  /** A run of this session; any other id is refused as run_not_found. */
  get(id: string): Promise<Run>;
}

/** A session, as its runs see it: an id and a journal. */
export type RunSession = RunEventSource & { readonly id: string };

/** A handle on a run the server answered with. */
export function runHandle(rpc: RunRpc, session: RunSession, message: RunMessage | undefined): Run {
  return new Run(rpc, session, runRecordFrom(required(message, "the run")));
}

export function createSessionRuns(rpc: RunRpc, session: RunSession): SessionRuns {
  return {
    async list(options = {}) {
      const page = await rpc.listRuns({ sessionId: session.id, pageSize: options.pageSize ?? 0, pageToken: options.pageToken ?? "" });
      return { runs: page.runs.map((run) => runHandle(rpc, session, run)), nextPageToken: page.nextPageToken };
    },
    async get(id) {
      return runHandle(rpc, session, (await rpc.getRun({ sessionId: session.id, runId: id })).run);
    },
  };
}
