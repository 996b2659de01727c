import { toJsonString } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { Run, RunInput } from "../../../gen/skillenv/sessions/v1/runs_pb.js";
import type { SessionService } from "../../../gen/skillenv/sessions/v1/sessions_pb.js";
import { requireWorkspace } from "../auth/index.ts";
import type { EnvironmentKinds } from "../environments/index.ts";
import { environmentMessage, eventMessage, receiptMessage, sessionMessage } from "./messages.ts";
import type { Sessions } from "./sessions.ts";

/** Submits a session's first run (the run engine, which depends on sessions, not the reverse). */
export type FirstRun = (workspace: string, sessionId: string, input: RunInput) => Promise<Run>;

/** The SessionService RPCs: thin adapters from messages to Sessions. */
export function createSessionService(sessions: Sessions, kinds: EnvironmentKinds, firstRun: FirstRun): ServiceImpl<typeof SessionService> {
  const session = (record: Parameters<typeof sessionMessage>[0]) => sessionMessage(record, kinds);
  return {
    async createSession(request, context: HandlerContext) {
      const workspace = requireWorkspace(context);
      const created = await sessions.create(workspace, request);
      if (!request.run) return { session: session(created) };
      // A refused first run leaves nothing behind: the caller never learned the session's id.
      const run = await firstRun(workspace, created.id, request.run).catch(async (error: unknown) => {
        await sessions.delete(workspace, created.id);
        throw error;
      });
      return { session: session(await sessions.get(workspace, created.id)), run };
    },
    async getSession(request, context) {
      return { session: session(await sessions.get(requireWorkspace(context), request.sessionId)) };
    },
    async listSessions(request, context) {
      const page = await sessions.list(requireWorkspace(context), request);
      return { sessions: page.items.map(session), nextPageToken: page.nextPageToken };
    },
    async setupEnvironment(request, context) {
      const workspace = requireWorkspace(context);
      const { environment, receipt } = await sessions.setup(workspace, request.sessionId, request.environment);
      return {
        environment: environmentMessage({ workspace, sessionId: request.sessionId }, environment, kinds),
        ...(receipt ? { receipt: receiptMessage(receipt) } : {}),
      };
    },
    async callTool(request, context) {
      const timeoutMs = request.timeout ? Number(request.timeout.seconds) * 1000 + Math.floor(request.timeout.nanos / 1e6) : undefined;
      const input = request.input ? toJsonString(ValueSchema, request.input) : "{}";
      // A client that leaves (cancels, disconnects, or its RPC deadline passes) withdraws the call:
      // once dispatched, its environment is sent a journaled cancel (docs/sessions.md).
      const result = await sessions.callTool(requireWorkspace(context), request.sessionId, request.tool, {
        input,
        ...(timeoutMs === undefined ? {} : { timeoutMs }),
        signal: context.signal,
      });
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
