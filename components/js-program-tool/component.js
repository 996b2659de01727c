// js-program-tool: world `tool`; the runtime for tools written as JavaScript
// programs. Built with the `stdio`, `random` and `clocks` features so programs
// get a working console.log (its output is discarded by the host), Math.random/crypto and
// Date.now; no `http`, so a program has no network.
//
// Program convention:
//   configuration = {"source": "<program text>", "configuration": <the invocation's configuration>}
//   The source is a classic script, evaluated afresh for every call, that
//   declares `function run(input, configuration, context)` (it may be async).
//   input is the JSON-parsed invocation input, configuration the inner value,
//   context = {deadlineMs: number}. The return value (awaited) is
//   JSON-stringified as the output (undefined becomes null).
//   A thrown {code: string, message: string} is returned as that failure; any
//   other throw becomes err({code:"program_error"}); a source that does not
//   compile or declares no run is err({code:"invalid_program"}).
// Everything is caught here: a JavaScript exception escaping an export would
// trap the instance instead of returning a failure.
import { load, parseJson, programFailure } from "../shared/program-runtime.js";

export async function run(input, configuration, deadlineMs) {
  const { source, configuration: programConfiguration } = parseJson(configuration, "configuration");
  const program = load(source, "run");
  const programInput = parseJson(input, "input");
  try {
    const result = await program(programInput, programConfiguration, { deadlineMs: Number(deadlineMs) });
    return JSON.stringify(result ?? null);
  } catch (error) {
    throw programFailure(error);
  }
}
