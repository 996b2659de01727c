/**
 * The shell extension: `npm run shell-extension -- [--port N] [--root DIR] [--output-limit BYTES]
 * [--network on|off] [--bwrap auto|on|off] [--host ADDRESS]`; README.md has the details.
 */
import * as fs from "node:fs/promises";
import { chooseSandbox } from "./sandbox.ts";
import { serve } from "./server.ts";
import { ShellExtensionService } from "./service.ts";
import { readSettings } from "./settings.ts";

const settings = readSettings(process.argv.slice(2), process.env);
await fs.mkdir(settings.root, { recursive: true, mode: 0o700 });
// Workspace paths are compared with the real paths of opened files, so the root has no symlinks.
const root = await fs.realpath(settings.root);

const { sandbox, warning } = await chooseSandbox(settings.bwrap, settings.network, root);
if (warning !== undefined) {
  console.error(`shell-extension: WARNING: ${warning}.`);
  console.error("shell-extension: WARNING: commands run as plain processes of this user: no isolation from the host's files, network or this user's other processes.");
}
console.error(`shell-extension: commands run as ${sandbox.description}; workspaces under ${root}; ${settings.token === undefined ? "no credential required" : "bearer credential required"}`);

const service = new ShellExtensionService({ root, sandbox, outputLimit: settings.outputLimit });
const server = await serve({ host: settings.host, port: settings.port, token: settings.token, service });
console.error(`shell-extension listening on ${server.url}`);

for (const signal of ["SIGINT", "SIGTERM"] as const) process.once(signal, () => void server.close().then(() => process.exit(0)));
