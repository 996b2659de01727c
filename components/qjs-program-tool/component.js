// qjs-program-tool: world `tool`; the runtime for tool programs on QuickJS, the same convention
// as js-program-tool (see there) at a fraction of StarlingMonkey's cost per call, for
// synchronous programs only: QuickJS's exports here are synchronous and promise jobs never
// run, so a `run` that returns a promise (an async function) is err({code:"invalid_program"}).
// Date.now and Math.random work; no network. QuickJS has no console: programs get one that
// discards what they log, as the host does with a guest's output anyway.
import { load, parseJson, programFailure } from "../shared/program-runtime.js";

const discard = () => {};
globalThis.console ??= { log: discard, info: discard, warn: discard, error: discard, debug: discard };

export function run(input, configuration, deadlineMs) {
  const { source, configuration: programConfiguration } = parseJson(configuration, "configuration");
  const program = load(source, "run");
  const programInput = parseJson(input, "input");
  let result;
  try {
    result = program(programInput, programConfiguration, { deadlineMs: Number(deadlineMs) });
  } catch (error) {
    throw programFailure(error);
  }
  if (typeof result?.then === "function") {
    throw { code: "invalid_program", message: "run returned a promise: this runtime (QuickJS) runs synchronous programs only" };
  }
  return JSON.stringify(result ?? null);
}
