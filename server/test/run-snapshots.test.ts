import * as fs from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startScriptedProvider, type ScriptedProvider } from "../../testing/scripted-provider/index.ts";
import { newId } from "../src/ids/index.ts";
import { KEY_A, onEmbeddedStorage, runSnapshots, startTestService, type TestService } from "./helpers/service.ts";
import { eventsUntil, runClient, runEnded, sessionClient } from "./helpers/sessions.ts";
import { bundleOf, publish, skillMd } from "./helpers/skills.ts";

const exists = (file: string) =>
  fs.stat(file).then(
    () => true,
    () => false,
  );

describe("run snapshots (SPEC 3.8)", () => {
  let provider: ScriptedProvider;
  let dataDir: string;
  let service: TestService | undefined;

  const start = async () => {
    service = await startTestService({ SERVICE_DATA_DIR: dataDir, SERVICE_ANTHROPIC_BASE_URL: provider.anthropicBaseUrl });
    return service;
  };

  beforeAll(async () => {
    provider = await startScriptedProvider();
    dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "skillenv-run-snapshots-"));
  });
  afterAll(async () => {
    await service?.close();
    await provider?.close();
    await fs.rm(dataDir, { recursive: true, force: true });
  });

  // The embedded layout: runs/<runId>/assets under the data directory (S3RunAssets keeps them in the bucket).
  it.runIf(onEmbeddedStorage)(
    "keeps a recorded run's copy across a restart, removes a copy no run was recorded for, and DeleteRun removes the rest",
    async () => {
      const first = await start();
      const bundle = bundleOf({ "SKILL.md": skillMd({ description: "Kept for the run.", body: "BODY" }) });
      await publish(first, "kept", bundle);
      const { session } = await sessionClient(first.url, KEY_A).createSession({});
      const sessionId = session!.id;
      provider.script("snapshot-restart-model", [{ text: "done" }]);
      const { run } = await runClient(first.url, KEY_A).createRun({
        sessionId,
        run: {
          model: { provider: "anthropic", name: "snapshot-restart-model", maxTokens: 0 },
          skills: [{ kind: "skill", name: "kept" }],
          message: "go",
          providerKeys: { anthropic: "sk-snap" },
        } as never,
      });
      await eventsUntil(sessionClient(first.url, KEY_A), sessionId, runEnded(run!.id));
      const runs = path.join(dataDir, "runs");
      const recorded = path.join(runs, run!.id, "assets", bundle.hash);
      expect(await fs.readFile(recorded)).toEqual(Buffer.from(bundle.zip));

      // What a submission leaves when the server stops between the copy and the record: a run
      // directory no run record names. A directory that is not a run's is not the service's to remove.
      const orphan = path.join(runs, newId("run"));
      await fs.mkdir(path.join(orphan, "assets"), { recursive: true });
      await fs.writeFile(path.join(orphan, "assets", bundle.hash), bundle.zip);
      await fs.mkdir(path.join(runs, "not-a-run"));
      await first.close();

      const second = await start();
      expect(await exists(orphan)).toBe(false);
      expect(await exists(path.join(runs, "not-a-run"))).toBe(true);
      expect(await fs.readFile(recorded)).toEqual(Buffer.from(bundle.zip));

      await runClient(second.url, KEY_A).deleteRun({ sessionId, runId: run!.id });
      expect(await exists(path.join(runs, run!.id))).toBe(false);
    },
    120_000,
  );

  it("keeps a recorded run's copy where the service keeps snapshots (data directory or bucket) across a restart; DeleteRun removes it", async () => {
    await service?.close();
    const first = await start();
    const bundle = bundleOf({ "SKILL.md": skillMd({ description: "Kept wherever snapshots are." }) });
    await publish(first, "kept-anywhere", bundle);
    const { session } = await sessionClient(first.url, KEY_A).createSession({});
    const sessionId = session!.id;
    provider.script("snapshot-anywhere-model", [{ text: "done" }]);
    const { run } = await runClient(first.url, KEY_A).createRun({
      sessionId,
      run: {
        model: { provider: "anthropic", name: "snapshot-anywhere-model", maxTokens: 0 },
        skills: [{ kind: "skill", name: "kept-anywhere" }],
        message: "go",
        providerKeys: { anthropic: "sk-snap" },
      } as never,
    });
    await eventsUntil(sessionClient(first.url, KEY_A), sessionId, runEnded(run!.id));
    expect((await runSnapshots(first, run!.id)).get(bundle.hash)).toEqual(Buffer.from(bundle.zip));
    await first.close();

    const second = await start();
    expect((await runSnapshots(second, run!.id)).get(bundle.hash)).toEqual(Buffer.from(bundle.zip));
    await runClient(second.url, KEY_A).deleteRun({ sessionId, runId: run!.id });
    expect((await runSnapshots(second, run!.id)).size).toBe(0);
  }, 120_000);
});
