// workspace-js: world `workspace-tool` (tool + wasi:filesystem/preopens).
//
// Input:  {"v":1,"op":"read"|"write"|"list","path":"/workspace/x","data"?:"text"}
// Output: read  -> {"v":1,"ok":true,"data":"text"}
//         write -> {"v":1,"ok":true,"bytes":N}
//         list  -> {"v":1,"ok":true,"entries":[{"name","type"}]}
// A refused operation is err({code: <WASI error code, e.g. "not-permitted">, message}).
//
// StarlingMonkey has no file API for JavaScript, so this uses the
// wasi:filesystem bindings directly. The guest never filters paths itself:
// the path goes to the host as given (relative to the longest matching
// preopen, or unchanged to the first preopen when none matches) so that grant
// escape tests exercise the host's sandbox, not this component.
import { getDirectories } from "wasi:filesystem/preopens@0.2.12";

const CHUNK = 65536n;

const OPS = {
  read: ({ dir, rel }) => ({ data: readText(dir, rel) }),
  write: ({ dir, rel }, request) => ({ bytes: writeText(dir, rel, request.data) }),
  list: ({ dir, rel }) => ({ entries: listEntries(dir, rel) }),
};

export function run(input) {
  const request = parseRequest(input);
  try {
    return JSON.stringify({ v: 1, ok: true, ...OPS[request.op](resolve(request.path), request) });
  } catch (error) {
    throw toFailure(error, `${request.op} ${request.path}`);
  }
}

function parseRequest(input) {
  let request;
  try {
    request = JSON.parse(input);
  } catch (error) {
    throw { code: "invalid_input", message: `input is not JSON: ${error.message}` };
  }
  if (request?.v !== 1 || !Object.hasOwn(OPS, request.op) || typeof request.path !== "string") {
    throw { code: "invalid_input", message: 'expected {"v":1,"op":"read"|"write"|"list","path":string}' };
  }
  if (request.op === "write" && typeof request.data !== "string") {
    throw { code: "invalid_input", message: 'write needs "data": string' };
  }
  return request;
}

// Picks the preopen a guest path belongs to and the path relative to it.
function resolve(path) {
  const preopens = getDirectories();
  let best;
  for (const [dir, name] of preopens) {
    const prefix = name.endsWith("/") ? name : `${name}/`;
    const inside = path === name || path.startsWith(prefix);
    if (inside && (!best || name.length > best.name.length)) {
      best = { dir, name, rel: path.slice(prefix.length) || "." };
    }
  }
  if (best) return best;
  if (preopens.length === 0) throw { code: "not-permitted", message: "no directory is preopened" };
  const [dir, name] = preopens[0];
  return { dir, name, rel: path };
}

function readText(dir, rel) {
  const file = dir.openAt({ symlinkFollow: true }, rel, {}, { read: true });
  const decoder = new TextDecoder();
  let text = "";
  for (let offset = 0n; ; ) {
    const [bytes, eof] = file.read(CHUNK, offset);
    text += decoder.decode(bytes, { stream: !eof && bytes.length > 0 });
    offset += BigInt(bytes.length);
    if (eof || bytes.length === 0) return text;
  }
}

function writeText(dir, rel, data) {
  const file = dir.openAt({ symlinkFollow: true }, rel, { create: true, truncate: true }, { write: true });
  const bytes = new TextEncoder().encode(data);
  let written = 0;
  while (written < bytes.length) {
    written += Number(file.write(bytes.subarray(written), BigInt(written)));
  }
  return written;
}

function listEntries(dir, rel) {
  const stream = dir.openAt({ symlinkFollow: true }, rel, { directory: true }, { read: true }).readDirectory();
  const entries = [];
  for (let entry = stream.readDirectoryEntry(); entry; entry = stream.readDirectoryEntry()) {
    entries.push({ name: entry.name, type: entry.type });
  }
  return entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

// Imported WASI functions throw an Error whose `payload` is the error-code enum string.
function toFailure(error, what) {
  if (typeof error?.code === "string") return error;
  if (typeof error?.payload === "string") return { code: error.payload, message: `${what}: ${error.payload}` };
  return { code: "internal", message: `${what}: ${String(error)}` };
}
