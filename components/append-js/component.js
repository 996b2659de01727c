// append-js: world `append-tool` (tool + wasi:filesystem/preopens), features: clocks.
//
// Input:  {"v":1,"file":"runs.log","line":"text","holdMs"?:N}
// Output: {"v":1,"size":<file size after the append>}
// Appends `line` and a newline to /workspace/<file>, then waits holdMs (a
// timer: the guest is suspended, its worker stays free). Tests count the lines
// to prove an invocation ran exactly once, e.g. across a server killed while
// the tool waits.
import { getDirectories } from "wasi:filesystem/preopens@0.2.12";

export async function run(input) {
  const request = parseRequest(input);
  const workspace = getDirectories().find(([, name]) => name === "/workspace");
  if (!workspace) throw { code: "not-permitted", message: "no /workspace is granted" };
  let size;
  try {
    size = append(workspace[0], request.file, `${request.line}\n`);
  } catch (error) {
    throw { code: typeof error?.payload === "string" ? error.payload : "internal", message: `append ${request.file}: ${String(error?.payload ?? error)}` };
  }
  if (request.holdMs > 0) await new Promise((resolve) => setTimeout(resolve, request.holdMs));
  return JSON.stringify({ v: 1, size });
}

function parseRequest(input) {
  let request;
  try {
    request = JSON.parse(input);
  } catch (error) {
    throw { code: "invalid_input", message: `input is not JSON: ${error.message}` };
  }
  if (request?.v !== 1 || typeof request.file !== "string" || typeof request.line !== "string") {
    throw { code: "invalid_input", message: 'expected {"v":1,"file":string,"line":string,"holdMs"?:number}' };
  }
  return { ...request, holdMs: Number(request.holdMs ?? 0) };
}

function append(dir, file, text) {
  const handle = dir.openAt({ symlinkFollow: false }, file, { create: true }, { write: true });
  const bytes = new TextEncoder().encode(text);
  let offset = handle.stat().size;
  for (let written = 0; written < bytes.length; ) {
    const count = Number(handle.write(bytes.subarray(written), offset));
    written += count;
    offset += BigInt(count);
  }
  return Number(offset);
}
