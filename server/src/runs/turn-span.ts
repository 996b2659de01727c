import { inSpan, markFailed } from "../tracing/index.ts";
import type { RunRecord } from "./records.ts";
import type { Submission } from "./submission.ts";
import type { TurnEnd } from "./turn.ts";

/**
 * A run's turn as one span, `invoke_agent skillenv` in the GenAI conventions' terms: its rounds
 * (the default loop's, each with its model call and tool calls) or its custom loop's operation
 * are its children. It ends with the run's status, the tokens the turn used and, when it failed,
 * the failure's code; never the message, the output text or the key.
 */
export function inTurnSpan(record: RunRecord, submission: Submission, turn: () => Promise<TurnEnd>): Promise<TurnEnd> {
  const attributes = {
    "gen_ai.operation.name": "invoke_agent",
    "gen_ai.agent.name": "skillenv",
    "gen_ai.provider.name": submission.model.provider,
    "gen_ai.request.model": submission.model.name,
    "skillenv.run.id": record.id,
    "skillenv.session.id": record.sessionId,
  };
  return inSpan("invoke_agent skillenv", attributes, async (span) => {
    const end = await turn();
    span.setAttributes({
      "skillenv.run.status": end.status,
      "skillenv.run.rounds": record.rounds,
      "gen_ai.usage.input_tokens": record.usage.inputTokens,
      "gen_ai.usage.output_tokens": record.usage.outputTokens,
    });
    if (end.status === "failed") markFailed(span, end.error?.code ?? "internal");
    return end;
  });
}
