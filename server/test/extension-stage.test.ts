/**
 * Runs in a session with an extension that does not implement Stage (e.g. one wrapping an external
 * service, with no workspace): Connect answers its Stage `unimplemented`. Every run stages, so a
 * run without skills or files must still work there; one with files to stage must not.
 */
import * as http from "node:http";
import { fromJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import type { Client } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ExtensionEnvironmentService } from "../../gen/skillenv/extension/v1/extension_pb.js";
import type { SessionEvent, SessionService } from "../../gen/skillenv/sessions/v1/sessions_pb.js";
import { startScriptedProvider, type ScriptedProvider } from "../../testing/scripted-provider/index.ts";
import { KEY_A, startTestService, type TestService } from "./helpers/service.ts";
import { eventsUntil, runClient, runEnded, sessionClient } from "./helpers/sessions.ts";
import { bundleOf, publish, skillMd } from "./helpers/skills.ts";

/** An extension with every RPC but Stage, which Connect then answers `unimplemented`; it records the calls it serves. */
async function startExtensionWithoutStage(): Promise<{ url: string; methods: string[]; close(): Promise<void> }> {
  const methods: string[] = [];
  const served = (method: string) => async () => (methods.push(method), {});
  const adapter = connectNodeAdapter({
    routes: (router) =>
      router.service(ExtensionEnvironmentService, {
        setup: served("setup"),
        cancel: served("cancel"),
        detach: served("detach"),
        teardown: served("teardown"),
        async *execute() {
          methods.push("execute");
          yield { receipt: { case: "returned" as const, value: { output: fromJson(ValueSchema, { ok: true }) } } };
        },
      }),
  });
  const server = http.createServer(adapter);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    methods,
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

describe("an extension without Stage", () => {
  let extension: Awaited<ReturnType<typeof startExtensionWithoutStage>>;
  let provider: ScriptedProvider;
  let service: TestService;
  let sessions: Client<typeof SessionService>;

  beforeAll(async () => {
    extension = await startExtensionWithoutStage();
    provider = await startScriptedProvider();
    service = await startTestService({ SERVICE_ENV_NETWORK_ALLOW: extension.url, SERVICE_ANTHROPIC_BASE_URL: provider.anthropicBaseUrl });
    sessions = sessionClient(service.url, KEY_A);
  });
  afterAll(async () => {
    await service?.close();
    await extension?.close();
    await provider?.close();
  });

  async function run(model: string, skills: string[]): Promise<SessionEvent[]> {
    const { session } = await sessions.createSession({
      environments: [{ name: "remote", kind: { case: "extension", value: { url: extension.url } } }],
      tools: [{ name: "lookup", environment: "remote", implementation: { kind: { case: "opaque", value: fromJson(ValueSchema, {}) } } }],
    });
    const { run } = await runClient(service.url, KEY_A).createRun({
      sessionId: session!.id,
      run: {
        model: { provider: "anthropic", name: model, maxTokens: 0 },
        message: "go",
        skills: skills.map((name) => ({ kind: "skill", name })),
        providerKeys: { anthropic: "k" },
      } as never,
    });
    return eventsUntil(sessions, session!.id, runEnded(run!.id));
  }

  /** The receipt of the run's stage operation, as journaled. */
  function stageReceipt(events: SessionEvent[]): unknown {
    const sent = events.find((event) => event.type === "operation.sent" && event.data?.kind === "stage");
    expect(sent, "a stage operation was sent").toBeDefined();
    return events.find((event) => event.type === "operation.receipt" && event.data?.operationId === sent!.data?.operationId)?.data?.receipt;
  }

  it("runs a run without skills or files: its Stage, unimplemented, had nothing to write", async () => {
    provider.script("no-stage-model", [{ toolCalls: [{ id: "l1", name: "lookup", input: {} }] }, { text: "done" }]);
    const events = await run("no-stage-model", []);
    expect(events.at(-1)?.type).toBe("turn.completed");
    expect(stageReceipt(events)).toEqual({ returned: { output: {} } });
    expect(events.find((event) => event.type === "tool.result")?.data).toMatchObject({ outcome: "returned", output: { ok: true } });
    expect(extension.methods).toContain("execute");
  });

  it("fails a run with a skill's files to stage: they were not written", async () => {
    await publish(service, "no-stage-skill", bundleOf({ "SKILL.md": skillMd({ description: "Has files." }) }));
    const events = await run("no-stage-model-2", ["no-stage-skill"]);
    expect(events.at(-1)).toMatchObject({ type: "turn.failed", data: { code: "staging_failed" } });
    expect(stageReceipt(events)).toMatchObject({ failure: { code: "extension_unimplemented" } });
  });
});
