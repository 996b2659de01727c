/**
 * The shell extension: `npm run shell-extension -- [--port N] [--root DIR] [--output-limit BYTES]
 * [--network on|off] [--bwrap auto|on|off] [--host ADDRESS]`; README.md has the details.
 */
import * as fs from "node:fs/promises";
import { chooseSandbox } from "./sandbox.ts";
import { serve } from "./server.ts";
import { ShellExtensionService } from "./service.ts";
import { readSettings } from "./settings.ts";

try {
  await main();
} catch (error) {
  // A setting or the machine is wrong: say which, without a stack trace.
  console.error(`shell-extension: ${error instanceof Error ? error.message : String(error)}`);
  process.exitCode = 1;
}

async function main(): Promise<void> {
  const settings = readSettings(process.argv.slice(2), process.env);
  const root = await prepareRoot(settings.root);

  const { sandbox, warning } = await chooseSandbox(settings.bwrap, settings.network, root);
  if (warning !== undefined) {
    console.error(`shell-extension: WARNING: ${warning}.`);
    console.error(
      "shell-extension: WARNING: commands run as plain processes of this user: no isolation from the host's files, network or this user's other processes.",
    );
  }
  console.error(
    `shell-extension: commands run as ${sandbox.description}; workspaces under ${root}; ${settings.token === undefined ? "no credential required" : "bearer credential required"}`,
  );

  const service = new ShellExtensionService({ root, sandbox, outputLimit: settings.outputLimit });
  const server = await serve({ host: settings.host, port: settings.port, token: settings.token, service });
  for (const signal of ["SIGINT", "SIGTERM"] as const) process.once(signal, () => void server.close().then(() => process.exit(0)));
  // Said only once a signal stops it cleanly: whoever waits for this line may stop it at once.
  console.error(`shell-extension listening on ${server.url}`);
}

/**
 * Makes the root and returns its real path: workspace paths are compared with the real paths of
 * opened files. It holds every binding's files, so it must be this user's alone: in a shared /tmp
 * another user could have made it first.
 */
async function prepareRoot(root: string): Promise<string> {
  await fs.mkdir(root, { recursive: true, mode: 0o700 });
  const real = await fs.realpath(root);
  const stat = await fs.stat(real);
  if (!stat.isDirectory() || stat.uid !== process.getuid?.() || (stat.mode & 0o022) !== 0) {
    throw new Error(`the root ${root} must be a directory owned by this user and writable by no one else`);
  }
  return real;
}
