export { StatusService } from "../../../gen/skillenv/status/v1/status_pb.js";
export { createStatusService, MAX_RUNS_COUNTED, RUN_WINDOW_MS, type StatusSources } from "./workspace-status.ts";
