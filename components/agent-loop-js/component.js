// agent-loop-js: world `agent-loop`, built with the componentize-js `clocks`
// feature only (Date.now() must be live to honour deadline-ms between rounds).
//
// turn(input = {"v":1,"message":"..."}):
//   emit {"v":1,"kind":"turn_started"}
//   call-model {"v":1,"messages":[{"role":"user","content":message}]}
//   while the answer's message has tool_calls: dispatch-tools {"v":1,"calls":[...]},
//     append the assistant message and one {"role":"tool"} message per result,
//     call the model again
//   -> {"v":1,"message":<final content>,"tool_results":[every dispatched result]}
// At most MAX_ROUNDS model calls; a model that still wants tools after that is
// err(max_rounds). Host failures are returned unchanged as the turn's failure.
import { callModel, dispatchTools, emit } from "skillenv:env/host@0.1.0";

const MAX_ROUNDS = 8;

export function turn(input, _configuration, deadlineMs) {
  const { message } = parseInput(input);
  const deadline = Number(deadlineMs);
  emit(JSON.stringify({ v: 1, kind: "turn_started" }));
  const messages = [{ role: "user", content: message }];
  const toolResults = [];
  for (let round = 1; round <= MAX_ROUNDS; round++) {
    checkDeadline(deadline);
    const answer = callHost(callModel, { v: 1, messages }).message ?? {};
    const calls = answer.tool_calls ?? [];
    if (calls.length === 0) {
      return JSON.stringify({ v: 1, message: answer.content ?? "", tool_results: toolResults });
    }
    checkDeadline(deadline);
    emit(JSON.stringify({ v: 1, kind: "tool_calls", round, count: calls.length }));
    const { results = [] } = callHost(dispatchTools, { v: 1, calls });
    toolResults.push(...results);
    messages.push({ role: "assistant", content: answer.content ?? "", tool_calls: calls });
    for (const result of results) messages.push(toolMessage(result));
  }
  throw { code: "max_rounds", message: `the model still asked for tools after ${MAX_ROUNDS} rounds` };
}

function parseInput(input) {
  let request;
  try {
    request = JSON.parse(input);
  } catch (error) {
    throw { code: "invalid_input", message: `input is not JSON: ${error.message}` };
  }
  if (request?.v !== 1 || typeof request.message !== "string") {
    throw { code: "invalid_input", message: 'expected {"v":1,"message":string}' };
  }
  return request;
}

// Host imports take and return JSON text; an err result arrives as an Error
// whose payload is the host's failure record.
function callHost(fn, request) {
  let text;
  try {
    text = fn(JSON.stringify(request));
  } catch (error) {
    if (typeof error?.payload?.code === "string") throw error.payload;
    throw { code: "internal", message: String(error) };
  }
  try {
    return JSON.parse(text);
  } catch (error) {
    throw { code: "invalid_host_response", message: `host answered with invalid JSON: ${error.message}` };
  }
}

function toolMessage(result) {
  const content = "error" in result ? { error: result.error } : result.output;
  return { role: "tool", tool_call_id: result.id, content: typeof content === "string" ? content : JSON.stringify(content) };
}

function checkDeadline(deadline) {
  if (Date.now() >= deadline) throw { code: "timeout", message: "the turn deadline has passed" };
}
