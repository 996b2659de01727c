// The JSON a custom agent loop exchanges with its host (server/src/runs/wit-loop.ts, docs/wit.md):
// a reply's provider blocks reach the loop in `blocks` and come back whole; a malformed block is
// refused as the loop's own mistake (invalid_input), naming what is wrong.
import { describe, expect, it } from "vitest";
import type { ModelResponse } from "../src/models/index.ts";
import { conversationFromWit, replyToWit } from "../src/runs/wit-loop.ts";

const thinking = { type: "provider_block" as const, provider: "anthropic", block: { type: "thinking", thinking: "t", signature: "sig_1" } };

describe("a custom loop's model messages", () => {
  it("gives a reply with provider blocks all of its content in order, and takes it back as it was", () => {
    const reply: ModelResponse = {
      content: [thinking, { type: "text", text: "Writing." }, { type: "tool_call", id: "c1", name: "fs", input: { v: 1 } }],
      stopReason: "tool_use",
      usage: { inputTokens: 1, outputTokens: 1 },
    };
    const { message } = replyToWit(reply) as { message: Record<string, unknown> };
    expect(message).toMatchObject({ content: "Writing.", tool_calls: [{ id: "c1", name: "fs", input: { v: 1 } }] });
    expect(conversationFromWit([{ role: "assistant", ...message }])).toEqual([{ role: "assistant", content: reply.content }]);
  });

  it("adds no blocks to a reply without provider blocks", () => {
    const reply: ModelResponse = { content: [{ type: "text", text: "hi" }], stopReason: "end_turn", usage: { inputTokens: 1, outputTokens: 1 } };
    expect((replyToWit(reply) as { message: object }).message).toEqual({ content: "hi", tool_calls: [] });
  });

  it.each([
    ["blocks that are not an array", { blocks: "x" }, "blocks must be an array"],
    ["a block of an unknown type", { blocks: [{ type: "image" }] }, 'of type "text", "tool_call" or "provider_block"'],
    ["a text block without text", { blocks: [{ type: "text" }] }, "a text block needs its text"],
    ["a tool call without a name", { blocks: [{ type: "tool_call", id: "c" }] }, "every call needs an id and a name"],
    ["a provider block that is not an object", { blocks: [{ type: "provider_block", provider: "anthropic", block: [1] }] }, "its block (an object)"],
  ])("refuses %s as invalid_input", (_, fields, message) => {
    let failure: unknown;
    try {
      conversationFromWit([{ role: "assistant", ...fields }]);
    } catch (error) {
      failure = error;
    }
    expect(failure).toMatchObject({ code: "invalid_input", message: expect.stringContaining(message) });
  });
});
