import type { ServiceImpl } from "@connectrpc/connect";
import type { RunService } from "../../../gen/skillenv/sessions/v1/runs_pb.js";
import { requireWorkspace } from "../auth/index.ts";
import { approvalMessage, runMessage } from "./messages.ts";
import type { Runs } from "./runs.ts";

/** The RunService RPCs: thin adapters from messages to Runs. */
export function createRunService(runs: Runs): ServiceImpl<typeof RunService> {
  return {
    async createRun(request, context) {
      const { run, created } = await runs.create(requireWorkspace(context), request.sessionId, request.run);
      return { run: runMessage(run), created };
    },
    async getRun(request, context) {
      return { run: runMessage(await runs.get(requireWorkspace(context), request.sessionId, request.runId)) };
    },
    async listRuns(request, context) {
      const page = await runs.list(requireWorkspace(context), request.sessionId, request);
      return { runs: page.items.map(runMessage), nextPageToken: page.nextPageToken };
    },
    async cancelRun(request, context) {
      return { run: runMessage(await runs.cancel(requireWorkspace(context), request.sessionId, request.runId)) };
    },
    async deleteRun(request, context) {
      await runs.delete(requireWorkspace(context), request.sessionId, request.runId);
      return {};
    },
    async listApprovals(request, context) {
      return { approvals: (await runs.approvals(requireWorkspace(context), request.sessionId, request.runId)).map(approvalMessage) };
    },
    async approveToolCall(request, context) {
      const decision = { approved: true, label: request.label, message: "" };
      return { approval: approvalMessage(await runs.decide(requireWorkspace(context), request.sessionId, request.runId, request.approvalId, decision)) };
    },
    async denyToolCall(request, context) {
      const decision = { approved: false, label: request.label, message: request.message };
      return { approval: approvalMessage(await runs.decide(requireWorkspace(context), request.sessionId, request.runId, request.approvalId, decision)) };
    },
  };
}
