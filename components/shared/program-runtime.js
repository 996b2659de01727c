// Shared by the JavaScript program runtimes (js-program-tool, js-program-agent-loop):
// decoding their arguments, evaluating the admitted source, and turning every exception into
// a typed failure. componentize-js bundles relative imports, so this file is compiled into each
// runtime; a change here rebuilds every component.

export function parseJson(text, what) {
  try {
    return JSON.parse(text);
  } catch (error) {
    throw { code: "invalid_input", message: `${what} is not JSON: ${error.message}` };
  }
}

// Evaluates the script and returns its top-level function `name`.
export function load(source, name) {
  if (typeof source !== "string") throw { code: "invalid_program", message: "configuration.source must be a string" };
  let script;
  try {
    script = new Function(`${source}\n;return typeof ${name} === 'function' ? ${name} : undefined;`);
  } catch (error) {
    throw { code: "invalid_program", message: `the program does not compile: ${error.message}` };
  }
  let entry;
  try {
    entry = script();
  } catch (error) {
    throw programFailure(error);
  }
  if (!entry) throw { code: "invalid_program", message: `the program declares no function ${name}` };
  return entry;
}

export function programFailure(error) {
  if (typeof error?.code === "string" && typeof error.message === "string" && !(error instanceof Error)) {
    return { code: error.code, message: error.message };
  }
  return { code: "program_error", message: error instanceof Error ? `${error.name}: ${error.message}` : String(error) };
}
