import type { SessionEvent } from "@skillenv/client";
import { describe, expect, it } from "vitest";
import { Transcript, type Entry } from "../src/transcript.ts";

/** Events as WatchSession delivers them: numbered from 1, in the order given. */
function journal(...events: Array<[type: string, data: Record<string, unknown>]>): SessionEvent[] {
  return events.map(([type, data], index) => ({ seq: index + 1, at: new Date(0), type, data }));
}

function fold(events: SessionEvent[]): { transcript: Transcript; touched: Array<Entry | undefined> } {
  const transcript = new Transcript();
  return { transcript, touched: events.map((event) => transcript.apply(event)) };
}

const RUN = "run_1";
const USAGE = { inputTokens: 30, outputTokens: 12 };

describe("the console's transcript", () => {
  it("grows the model's text as it streams, then takes the round's whole message", () => {
    const { transcript, touched } = fold(
      journal(
        [
          "run.submitted",
          {
            runId: RUN,
            model: { provider: "anthropic", name: "m" },
            skills: [{ name: "release-notes" }, { name: "weekly", version: 3 }, { name: "old-notes", version: 1, pinned: true }],
            files: [],
            message: "Hi",
          },
        ],
        ["turn.started", { runId: RUN }],
        ["assistant.delta", { runId: RUN, round: 1, text: "Hel" }],
        ["assistant.delta", { runId: RUN, round: 1, text: "lo" }],
      ),
    );
    const [user, model] = transcript.entries;
    expect(user).toMatchObject({ kind: "user", message: "Hi", model: "anthropic m", skills: ["release-notes", "weekly v3", "old-notes v1 (pinned)"] });
    expect(model).toMatchObject({ kind: "model", text: "Hello", streaming: true });
    expect(touched[1]).toBeUndefined();
    expect(touched[3]).toBe(model);

    transcript.apply({ seq: 5, at: new Date(0), type: "assistant.message", data: { runId: RUN, round: 1, text: "Hello!", toolCalls: [] } });
    transcript.apply({ seq: 6, at: new Date(0), type: "model.usage", data: { runId: RUN, round: 1, ...USAGE } });
    expect(transcript.entries).toHaveLength(2);
    expect(model).toMatchObject({ text: "Hello!", streaming: false, usage: USAGE });
  });

  it("joins a run's tool call with the operation that carried it, its receipts and its result", () => {
    const { transcript } = fold(
      journal(
        ["assistant.message", { runId: RUN, round: 1, text: "", toolCalls: [{ id: "c1", name: "ask_user" }] }],
        ["tool.call", { runId: RUN, round: 1, callId: "c1", name: "ask_user", input: { question: "Which version?" } }],
        ["operation.sent", { operationId: "op_1", environment: "browser", kind: "execute", tool: "ask_user", input: {}, runId: RUN }],
        ["operation.accepted", { operationId: "op_1", runId: RUN }],
        ["operation.progress", { operationId: "op_1", data: "waiting for the user", runId: RUN }],
        [
          "operation.receipt",
          { operationId: "op_1", environment: "browser", kind: "execute", receipt: { returned: { output: { answer: "2.4.0" } } }, runId: RUN },
        ],
        ["tool.result", { runId: RUN, round: 1, callId: "c1", name: "ask_user", outcome: "returned", output: { answer: "2.4.0" }, operationId: "op_1" }],
      ),
    );
    expect(transcript.entries).toEqual([
      expect.objectContaining({
        kind: "tool",
        name: "ask_user",
        input: { question: "Which version?" },
        operation: {
          id: "op_1",
          environment: "browser",
          accepted: true,
          progress: ["waiting for the user"],
          receipt: { outcome: "returned", output: { answer: "2.4.0" } },
        },
        result: { outcome: "returned", output: { answer: "2.4.0" } },
      }),
    ]);
  });

  it("shows a direct CallTool as a tool call of its own, and other operations as operation lines", () => {
    const { transcript } = fold(
      journal(
        ["operation.sent", { operationId: "op_s", environment: "browser", kind: "setup" }],
        ["operation.receipt", { operationId: "op_s", environment: "browser", kind: "setup", receipt: { returned: {} } }],
        ["operation.sent", { operationId: "op_c", environment: "browser", kind: "execute", tool: "page_title", input: {} }],
        [
          "operation.receipt",
          { operationId: "op_c", environment: "browser", kind: "execute", receipt: { failure: { code: "host_unavailable", message: "no host" } } },
        ],
      ),
    );
    expect(transcript.entries).toMatchObject([
      { kind: "operation", operationKind: "setup", operation: { receipt: { outcome: "returned", output: null } } },
      { kind: "tool", runId: undefined, name: "page_title", operation: { receipt: { outcome: "failure", code: "host_unavailable" } }, result: undefined },
    ]);
  });

  it("ends a run with its outcome, and ignores events it has applied already", () => {
    const events = journal(["turn.failed", { runId: RUN, code: "model_rate_limited", message: "slow down", rounds: 1, toolCalls: 0, usage: USAGE }]);
    const { transcript } = fold([...events, ...events]);
    expect(transcript.entries).toEqual([
      expect.objectContaining({ kind: "end", status: "failed", text: "Failed: model_rate_limited: slow down (1 round, 0 tool calls, 30 + 12 tokens)" }),
    ]);
    expect(transcript.lastSeq).toBe(1);
  });

  it("keeps an event type it does not know as a note, so nothing is hidden", () => {
    const { transcript } = fold(journal(["something.new", { detail: 1 }]));
    expect(transcript.entries).toMatchObject([{ kind: "note", text: 'something.new {"detail":1}' }]);
  });

  it("shows a call's approval: asked, then decided once; a run that ends expires what is still pending", () => {
    const { transcript, touched } = fold(
      journal(
        ["tool.call", { runId: RUN, round: 1, callId: "c1", name: "pay", input: { amount: 5 } }],
        ["tool.call", { runId: RUN, round: 1, callId: "c2", name: "pay", input: { amount: 5000 } }],
        ["tool.approval_requested", { runId: RUN, round: 1, callId: "c1", approvalId: "apr_1", tool: "pay", input: { amount: 5 } }],
        ["tool.approval_requested", { runId: RUN, round: 1, callId: "c2", approvalId: "apr_2", tool: "pay", input: { amount: 5000 } }],
        ["tool.denied", { runId: RUN, round: 1, callId: "c1", approvalId: "apr_1", tool: "pay", decidedBy: { workspace: "a", label: "ana" }, message: "no" }],
      ),
    );
    const [first, second] = transcript.entries;
    expect(touched[2]).toBe(first);
    expect(first).toMatchObject({ kind: "tool", approval: { id: "apr_1", status: "denied", decidedBy: { workspace: "a", label: "ana" }, message: "no" } });
    expect(second).toMatchObject({ kind: "tool", approval: { id: "apr_2", status: "pending" } });
    expect(transcript.takeAlsoChanged()).toEqual([]);

    const usage = { inputTokens: 0, outputTokens: 0 };
    transcript.apply({
      seq: 6,
      at: new Date(0),
      type: "run.cancelled",
      data: { runId: RUN, code: "cancelled", message: "stop", rounds: 1, toolCalls: 2, usage },
    });
    expect(second).toMatchObject({ approval: { status: "expired" } });
    expect(transcript.takeAlsoChanged()).toEqual([second]);
    expect(transcript.takeAlsoChanged()).toEqual([]);
  });
});
