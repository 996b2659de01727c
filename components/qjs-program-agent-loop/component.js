// qjs-program-agent-loop: world `agent-loop`; the runtime for agent loops written as JavaScript
// programs on QuickJS, the same convention as js-program-agent-loop (see there) for synchronous
// programs only: the host calls return directly anyway (the host suspends the whole guest while
// it waits), but a `turn` that returns a promise (an async function) is
// err({code:"invalid_program"}), as QuickJS's exports here are synchronous and promise jobs never
// run. Date.now and Math.random work; console discards what it is given; no network.
import { callModel, dispatchTools, emit } from "skillenv:env/host@0.1.0";
import { load, parseJson, programFailure } from "../shared/program-runtime.js";

const discard = () => {};
globalThis.console ??= { log: discard, info: discard, warn: discard, error: discard, debug: discard };

export function turn(input, configuration, deadlineMs) {
  const { source, configuration: programConfiguration } = parseJson(configuration, "configuration");
  const program = load(source, "turn");
  const programInput = parseJson(input, "input");
  const host = {
    callModel: (request) => callHost(callModel, request),
    dispatchTools: (calls) => callHost(dispatchTools, calls),
    emit: (event) => emit(JSON.stringify(event)),
    deadlineMs: Number(deadlineMs),
  };
  let result;
  try {
    result = program(programInput, programConfiguration, host);
  } catch (error) {
    throw programFailure(error);
  }
  if (typeof result?.then === "function") {
    throw { code: "invalid_program", message: "turn returned a promise: this runtime (QuickJS) runs synchronous programs only" };
  }
  return JSON.stringify(result ?? null);
}

/** A host call with plain objects in and out; a host failure is thrown as its {code, message}. */
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
