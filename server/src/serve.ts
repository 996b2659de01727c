import { ConnectError } from "@connectrpc/connect";
import { startService } from "./app.ts";
import { loadSettings, SettingsError } from "./config/index.ts";

/** The service as a process (main.ts loads it): settings from the environment, graceful stop on SIGTERM/SIGINT. */
async function main(): Promise<void> {
  let settings: ReturnType<typeof loadSettings>;
  try {
    settings = loadSettings();
  } catch (error) {
    if (!(error instanceof SettingsError)) throw error;
    process.stderr.write(`${error.message}\n`);
    process.exit(2);
  }
  if (!settings.env.sandbox) {
    process.stderr.write(
      "WARNING: SERVICE_ENV_SANDBOX=off: service-environment guests run WITHOUT OS isolation. A guest that gets past the engine's own checks reaches everything this server's user can: its keys, its data, its network. Use it only where bubblewrap cannot run (docs/operations.md#the-sandbox).\n",
    );
  }
  let service: Awaited<ReturnType<typeof startService>>;
  try {
    service = await startService(settings, {
      onPortOpen: (url) => process.stderr.write(`skillenv starting on ${url} (GET /readyz answers 503 until it is ready)\n`),
    });
  } catch (error) {
    // Startup refusals (a bad preparation file, a component that fails to prepare, a busy
    // port) are the operator's to fix: say what failed, without a stack trace.
    process.stderr.write(`startup failed: ${error instanceof ConnectError ? error.rawMessage : (error as Error).message}\n`);
    process.exit(1);
  }
  if (service.serviceEnv.unavailable) {
    process.stderr.write(
      `WARNING: the service environment is not running (sessions binding it are refused with sandbox_unavailable): ${service.serviceEnv.unavailable}\n`,
    );
  }
  if (service.devKeyFile) {
    process.stderr.write(`no SERVICE_API_KEYS set: development key for workspace "dev" is in ${service.devKeyFile}\n`);
  }
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    process.stderr.write(`${signal}: draining\n`);
    service.close().then(
      () => process.exit(0),
      (error: unknown) => {
        process.stderr.write(`shutdown failed: ${String(error)}\n`);
        process.exit(1);
      },
    );
  };
  process.on("SIGTERM", () => stop("SIGTERM"));
  process.on("SIGINT", () => stop("SIGINT"));
  // Said only once a signal drains: a supervisor that waits for this line may stop it at once.
  process.stderr.write(`skillenv listening on ${service.url} (data: ${settings.dataDir})\n`);
}

await main();
