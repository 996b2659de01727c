// fetch-js: world `tool`, built with the componentize-js `http` feature only, so
// `fetch` goes out through wasi:http/outgoing-handler (the network grant).
//
// Input:  {"v":1,"url":"https://..."}  ->  one GET.
// Output: {"v":1,"status":N,"body":"..."} for any HTTP status, or
//         err({code:"http_error", message}) when no response arrives (refused
//         origin, DNS, connection) and err({code:"invalid_input"}) for bad input.
export async function run(input) {
  const url = parseUrl(input);
  try {
    const response = await fetch(url);
    return JSON.stringify({ v: 1, status: response.status, body: await response.text() });
  } catch (error) {
    throw { code: "http_error", message: `GET ${url}: ${error?.message ?? String(error)}` };
  }
}

function parseUrl(input) {
  let request;
  try {
    request = JSON.parse(input);
  } catch (error) {
    throw { code: "invalid_input", message: `input is not JSON: ${error.message}` };
  }
  if (request?.v !== 1 || typeof request.url !== "string") {
    throw { code: "invalid_input", message: 'expected {"v":1,"url":string}' };
  }
  return request.url;
}
