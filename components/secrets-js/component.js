// secrets-js: world `secrets-tool` (tool + wasi:filesystem/preopens).
//
// Input:  {"v":1,"name":"X"}  ->  reads the file X under the preopen "/secrets".
// Output: {"v":1,"value":"..."} or err({code, message}); WASI refusals keep their
// error code (e.g. "no-entry", "not-permitted"). The name goes to the host
// unfiltered: confinement is the host's sandbox, which tests probe through it.
import { getDirectories } from "wasi:filesystem/preopens@0.2.12";

const SECRETS = "/secrets";
const CHUNK = 65536n;

export function run(input) {
  const name = parseName(input);
  const preopen = getDirectories().find(([, path]) => path === SECRETS);
  if (!preopen) throw { code: "not-permitted", message: `no secrets are granted (${SECRETS} is not preopened)` };
  try {
    return JSON.stringify({ v: 1, value: readText(preopen[0], name) });
  } catch (error) {
    const code = typeof error?.payload === "string" ? error.payload : "internal";
    throw { code, message: `secret ${JSON.stringify(name)}: ${code === "internal" ? String(error) : code}` };
  }
}

function parseName(input) {
  let request;
  try {
    request = JSON.parse(input);
  } catch (error) {
    throw { code: "invalid_input", message: `input is not JSON: ${error.message}` };
  }
  if (request?.v !== 1 || typeof request.name !== "string" || request.name === "") {
    throw { code: "invalid_input", message: 'expected {"v":1,"name":non-empty string}' };
  }
  return request.name;
}

function readText(dir, name) {
  const file = dir.openAt({ symlinkFollow: true }, name, {}, { read: true });
  let text = "";
  const decoder = new TextDecoder();
  for (let offset = 0n; ; ) {
    const [bytes, eof] = file.read(CHUNK, offset);
    text += decoder.decode(bytes, { stream: !eof && bytes.length > 0 });
    offset += BigInt(bytes.length);
    if (eof || bytes.length === 0) return text;
  }
}
