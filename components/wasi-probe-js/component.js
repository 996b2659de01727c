// wasi-probe-js: world `wasi-probe-tool` (tool + wasi:filesystem/preopens + wasi:clocks): an
// attacker's toolkit for the engine's tests. It runs the JavaScript it is given against the raw
// WASI bindings, so that a test can write any sequence of calls (stale descriptors, symlink swaps,
// rename races, hard links, a long blocking wait on a clock) and see what the host let through.
//
// Input:  {"v":1,"source":"...","args":any}
//   The source is the body of a function (preopens, args, tools) => result:
//   - preopens: { "/workspace": Descriptor, "/scratch": Descriptor, ... } (what is granted)
//   - tools.clock: wasi:clocks/monotonic-clock (now, subscribeDuration, subscribeInstant: a
//     pollable whose block() waits)
//   - tools.code(error): the WASI error code a host call threw ("no-entry", "not-permitted", ...)
//   - tools.readAll(descriptor): the whole file as text
// Output: {"v":1,"result": <what the source returned>}; a throw that escapes the source is
// err({code: "probe_failed", message}).
import { getDirectories } from "wasi:filesystem/preopens@0.2.12";
import * as clock from "wasi:clocks/monotonic-clock@0.2.12";

const tools = {
  clock,
  code(error) {
    if (typeof error?.payload === "string") return error.payload;
    return `not-a-wasi-error: ${String(error)}`;
  },
  readAll(file) {
    const decoder = new TextDecoder();
    let text = "";
    for (let offset = 0n; ; ) {
      const [bytes, eof] = file.read(65536n, offset);
      text += decoder.decode(bytes, { stream: !eof && bytes.length > 0 });
      offset += BigInt(bytes.length);
      if (eof || bytes.length === 0) return text;
    }
  },
};

export function run(input) {
  const { source, args } = JSON.parse(input);
  const preopens = Object.fromEntries(getDirectories().map(([descriptor, path]) => [path, descriptor]));
  try {
    return JSON.stringify({ v: 1, result: new Function("preopens", "args", "tools", source)(preopens, args, tools) ?? null });
  } catch (error) {
    throw { code: "probe_failed", message: `${tools.code(error)}: ${error?.stack ?? ""}` };
  }
}
