// The real service in its own process (so it gets its own core), on an ephemeral loopback port
// with a throwaway data dir. Settings come from the environment the bench passes.
import * as fs from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import { startService } from "../../server/src/app.ts";
import { loadSettings } from "../../server/src/config/index.ts";
import { serveOverIpc } from "../lib/serve.ts";

await serveOverIpc(async () => {
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "skillenv-bench-"));
  const settings = loadSettings({ ...process.env, SERVICE_LISTEN: "127.0.0.1:0", SERVICE_DATA_DIR: dataDir, SERVICE_LOG_REQUESTS: "false" });
  const service = await startService(settings);
  return {
    url: service.url,
    async close() {
      await service.close();
      await fs.rm(dataDir, { recursive: true, force: true });
    },
  };
});
