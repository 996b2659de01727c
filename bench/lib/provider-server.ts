// Child of the runs suite: the scripted model provider (testing/scripted-provider) in its own
// process, so that its CPU is its own and neither the service's nor the bench client's. Scripts
// are loaded through its control endpoint (PUT /_scripts/<model>).
import { startScriptedProvider } from "../../testing/scripted-provider/index.ts";
import { serveOverIpc } from "./serve.ts";

await serveOverIpc(async () => {
  const provider = await startScriptedProvider();
  // It records every request for tests to inspect; a benchmark sends tens of thousands.
  setInterval(() => (provider.requests.length = 0), 1000).unref();
  return { url: provider.url, close: () => provider.close() };
});
