// js-program-agent-loop: world `agent-loop`; the runtime for agent loops written
// as JavaScript programs. Built with `stdio`, `random` and `clocks` (console.log
// works, its output discarded by the host; Math.random/crypto, Date.now); no `http`.
//
// Program convention (same as js-program-tool, with `turn` instead of `run`):
//   configuration = {"source": "<program text>", "configuration": <the invocation's configuration>}
//   The source is a classic script, evaluated afresh for every turn, that
//   declares `function turn(input, configuration, host)` (it may be async).
//   host = {callModel(request), dispatchTools(calls), emit(event), deadlineMs}:
//   the three functions wrap the skillenv:env/host imports, taking and
//   returning plain objects (JSON on the wire). They return directly: the
//   host suspends the whole guest while it waits. A host failure is thrown
//   as its {code, message} record.
//   The return value (awaited) is JSON-stringified as the turn's output.
//   A thrown {code, message} is returned as that failure (so an uncaught host
//   failure passes through); any other throw is err({code:"program_error"});
//   a source that does not compile or declares no turn is err({code:"invalid_program"}).
import { callModel, dispatchTools, emit } from "skillenv:env/host@0.1.0";
import { load, parseJson, programFailure } from "../shared/program-runtime.js";

export async function turn(input, configuration, deadlineMs) {
  const { source, configuration: programConfiguration } = parseJson(configuration, "configuration");
  const program = load(source, "turn");
  const programInput = parseJson(input, "input");
  const host = {
    callModel: (request) => callHost(callModel, request),
    dispatchTools: (calls) => callHost(dispatchTools, calls),
    emit: (event) => emit(JSON.stringify(event)),
    deadlineMs: Number(deadlineMs),
  };
  try {
    const result = await program(programInput, programConfiguration, host);
    return JSON.stringify(result ?? null);
  } catch (error) {
    throw programFailure(error);
  }
}

function callHost(fn, request) {
  let text;
  try {
    text = fn(JSON.stringify(request));
  } catch (error) {
    if (typeof error?.payload?.code === "string") throw { code: error.payload.code, message: error.payload.message };
    throw error;
  }
  return JSON.parse(text);
}
