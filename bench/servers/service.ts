// The real service in its own process (so it gets its own core), on an ephemeral loopback port
// with a throwaway data dir. Settings come from the environment the bench passes.
// BENCH_REQUEST_LOG=<file> turns the request log on and writes its lines there synchronously, as
// Node writes stdout redirected to a file; unset, the request log is off.
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { startService } from "../../server/src/app.ts";
import { loadSettings } from "../../server/src/config/index.ts";
import { serveOverIpc } from "../lib/serve.ts";

await serveOverIpc(async () => {
  const dataDir = await fs.promises.mkdtemp(path.join(os.tmpdir(), "skillenv-bench-"));
  const settings = loadSettings({ ...process.env, SERVICE_LISTEN: "127.0.0.1:0", SERVICE_DATA_DIR: dataDir, SERVICE_LOG_REQUESTS: "false" });
  const logFile = process.env.BENCH_REQUEST_LOG;
  const fd = logFile ? fs.openSync(logFile, "a") : undefined;
  const service = await startService(settings, fd === undefined ? {} : { log: (line) => fs.writeSync(fd, `${line}\n`) });
  return {
    url: service.url,
    async close() {
      await service.close();
      if (fd !== undefined) fs.closeSync(fd);
      await fs.promises.rm(dataDir, { recursive: true, force: true });
    },
  };
});
