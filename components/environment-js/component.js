// environment-js: world `environment-tool` (tool + wasi:cli/{environment,exit}).
//
// Input:  {"v":1}             ->  {"v":1,"variables":[[name,value]...],"arguments":[...],"cwd":string|null}
//         {"v":1,"exit":true} ->  calls wasi:cli/exit (the host must end the invocation, not itself)
// Reports exactly what the host's wasi:cli/environment hands a guest.
import { getArguments, getEnvironment, initialCwd } from "wasi:cli/environment@0.2.12";
import { exit } from "wasi:cli/exit@0.2.12";

export function run(input) {
  let request;
  try {
    request = JSON.parse(input);
  } catch (error) {
    throw { code: "invalid_input", message: `input is not JSON: ${error.message}` };
  }
  if (request?.exit === true) exit({ tag: "ok" });
  return JSON.stringify({ v: 1, variables: getEnvironment(), arguments: getArguments(), cwd: initialCwd() ?? null });
}
