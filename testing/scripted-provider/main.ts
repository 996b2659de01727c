/**
 * Runs the scripted provider on its own:
 *   node testing/scripted-provider/main.ts --port 9100 [--script scripts.json]
 * where scripts.json is {"<model>": {"steps": [...], "loop"?: boolean}, ...}. More scripts can be
 * loaded while it runs: PUT /_scripts/<model> with {"steps": [...], "loop"?: boolean}.
 */
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { parseScripts, startScriptedProvider } from "./index.ts";

const { values } = parseArgs({ options: { port: { type: "string", default: "0" }, script: { type: "string" } } });
const port = Number(values.port);
if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`--port: expected a port number, got ${values.port}`);
const scripts = values.script === undefined ? {} : parseScripts(JSON.parse(readFileSync(values.script, "utf8")));

const provider = await startScriptedProvider({ port, scripts });
console.log(`scripted provider listening on ${provider.url} (anthropic base URL ${provider.anthropicBaseUrl}, openai base URL ${provider.openaiBaseUrl})`);
for (const signal of ["SIGINT", "SIGTERM"] as const) process.once(signal, () => void provider.close());
