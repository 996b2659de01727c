import { toJsonString } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { SessionService } from "../../../gen/skillenv/sessions/v1/sessions_pb.js";
import { requireWorkspace } from "../auth/index.ts";
import type { EnvironmentKinds } from "../environments/index.ts";
import { environmentMessage, eventMessage, receiptMessage, sessionMessage } from "./messages.ts";
import type { Sessions } from "./sessions.ts";

/** The SessionService RPCs: thin adapters from messages to Sessions. */
export function createSessionService(sessions: Sessions, kinds: EnvironmentKinds): ServiceImpl<typeof SessionService> {
  const session = (record: Parameters<typeof sessionMessage>[0]) => sessionMessage(record, kinds);
  return {
    async createSession(request, context: HandlerContext) {
      return { session: session(await sessions.create(requireWorkspace(context), request)) };
    },
    async getSession(request, context) {
      return { session: session(await sessions.get(requireWorkspace(context), request.sessionId)) };
    },
    async listSessions(request, context) {
      const page = await sessions.list(requireWorkspace(context), request.pageSize, request.pageToken);
      return { sessions: page.records.map(session), nextPageToken: page.nextPageToken };
    },
    async setupEnvironment(request, context) {
      const { environment, receipt } = await sessions.setup(requireWorkspace(context), request.sessionId, request.environment);
      return { environment: environmentMessage(environment, kinds), ...(receipt ? { receipt: receiptMessage(receipt) } : {}) };
    },
    async callTool(request, context) {
      const timeoutMs = request.timeout ? Number(request.timeout.seconds) * 1000 + Math.floor(request.timeout.nanos / 1e6) : undefined;
      const input = request.input ? toJsonString(ValueSchema, request.input) : "{}";
      const result = await sessions.callTool(requireWorkspace(context), request.sessionId, request.tool, { input, ...(timeoutMs === undefined ? {} : { timeoutMs }) });
      return { operationId: result.operationId, receipt: receiptMessage(result.receipt) };
    },
    async *watchSession(request, context) {
      const events = await sessions.watch(requireWorkspace(context), request.sessionId, Number(request.after), context.signal);
      for await (const event of events) yield { event: eventMessage(request.sessionId, event) };
    },
    async endSession(request, context) {
      return { session: session(await sessions.end(requireWorkspace(context), request.sessionId)) };
    },
    async deleteSession(request, context) {
      await sessions.delete(requireWorkspace(context), request.sessionId);
      return {};
    },
  };
}
