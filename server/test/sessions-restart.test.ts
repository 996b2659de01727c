import * as fs from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SessionEvent } from "../../gen/skillenv/sessions/v1/sessions_pb.js";
import { buildTestComponents } from "./helpers/pool.ts";
import { spawnService, type ServiceProcess } from "./helpers/process.ts";
import { KEY_A, KEY_B } from "./helpers/service.ts";
import { fromJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { TestExtension } from "./helpers/extension.ts";
import { lineCount, whenChangedIn } from "./helpers/files.ts";
import { hostClient, TestHost } from "./helpers/hosts.ts";
import { admitTool, eventsUntil, sessionClient } from "./helpers/sessions.ts";

beforeAll(() => buildTestComponents(), 600_000);

type Replayed = Pick<SessionEvent, "seq" | "type" | "data">;

/**
 * The session's journal from its start until an event satisfies `until` (inclusive); by default
 * until its end, which an ended session's stream reaches by itself.
 */
async function replay(url: string, sessionId: string, until: (event: SessionEvent) => boolean = () => false): Promise<Replayed[]> {
  const events = await eventsUntil(sessionClient(url, KEY_A), sessionId, until);
  return events.map(({ seq, type, data }) => ({ seq, type, data }));
}

describe("a server killed with a tool call in flight", () => {
  let root: string;
  let env: Record<string, string>;
  let first: ServiceProcess | undefined;
  let second: ServiceProcess | undefined;

  beforeAll(async () => {
    root = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "skillenv-restart-")));
    env = {
      SERVICE_DATA_DIR: path.join(root, "data"),
      SERVICE_API_KEYS: `a=${KEY_A},b=${KEY_B}`,
      SERVICE_ENV_FILESYSTEM_ALLOW: root,
      SERVICE_ENV_WORKSPACE_ROOT: path.join(root, "workspaces"),
    };
  });
  afterAll(async () => {
    for (const service of [first, second]) service?.child.kill("SIGKILL");
    await fs.rm(root, { recursive: true, force: true });
  });

  it("records exactly one unknown receipt after the restart, runs nothing twice, and takes new calls", async () => {
    first = await spawnService(env);
    const tool = await admitTool(first.url, KEY_A, "append-js");
    const client = sessionClient(first.url, KEY_A);
    const { session } = await client.createSession({
      environments: [{ name: "files", kind: { case: "service", value: { grants: { filesystem: { workspace: "write" } } } } }],
      tools: [{ name: "append", environment: "files", implementation: { kind: { case: "tool", value: tool } } }],
    });
    const sessionId = session!.id;
    const log = path.join(root, "workspaces", "a", sessionId, "files", "runs.log");
    const input = (line: string, holdMs: number) => ({
      kind: {
        case: "structValue" as const,
        value: {
          fields: {
            v: { kind: { case: "numberValue" as const, value: 1 } },
            file: { kind: { case: "stringValue" as const, value: "runs.log" } },
            line: { kind: { case: "stringValue" as const, value: line } },
            holdMs: { kind: { case: "numberValue" as const, value: holdMs } },
          },
        },
      },
    });

    void client.callTool({ sessionId, tool: "append", input: input("slow", 60_000) }).catch(() => undefined);
    // The guest has written its line and holds on: its operation is journaled as sent, without a receipt.
    await whenChangedIn(path.dirname(log), async () => (await lineCount(log)) >= 1);
    const before = await replay(first.url, sessionId, (event) => event.type === "operation.sent" && event.data?.kind === "execute");
    const slowOperation = before.at(-1)!.data!.operationId;
    first.child.kill("SIGKILL");
    await first.exited;

    second = await spawnService(env);
    const restarted = sessionClient(second.url, KEY_A);
    const again = await restarted.callTool({ sessionId, tool: "append", input: input("fast", 0) });
    expect(again.receipt?.outcome.case).toBe("returned");
    expect((await fs.readFile(log, "utf8")).split("\n").filter(Boolean)).toEqual(["slow", "fast"]);
    // Ended, the session's journal is complete: its stream ends by itself.
    await restarted.endSession({ sessionId });
    const after = await replay(second.url, sessionId);
    expect(after.slice(0, before.length)).toEqual(before);
    const receipts = after.filter((event) => event.type === "operation.receipt" && event.data?.operationId === slowOperation);
    expect(receipts).toHaveLength(1);
    expect(receipts[0]?.data?.receipt).toMatchObject({ unknown: {} });
    // The unknown receipt was written at startup, before the next call.
    const fastSent = after.findIndex((event) => event.type === "operation.sent" && event.data?.operationId === again.operationId);
    expect(after.indexOf(receipts[0]!)).toBeLessThan(fastSent);
    expect(after.at(-1)?.type).toBe("session.ended");

    expect(await replay(second.url, sessionId)).toEqual(after);
  }, 120_000);
});

describe("a server killed with host and extension commands in flight", () => {
  let root: string;
  let extension: TestExtension;
  const services: ServiceProcess[] = [];

  beforeAll(async () => {
    root = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "skillenv-restart-envs-")));
    extension = await new TestExtension().start();
  });
  afterAll(async () => {
    for (const service of services) service.child.kill("SIGKILL");
    await extension?.close();
    await fs.rm(root, { recursive: true, force: true });
  });

  it("gives each exactly one unknown receipt after the restart", async () => {
    const env = { SERVICE_DATA_DIR: path.join(root, "data"), SERVICE_API_KEYS: `a=${KEY_A},b=${KEY_B}`, SERVICE_ENV_NETWORK_ALLOW: extension.url };
    const first = await spawnService(env);
    services.push(first);
    const client = sessionClient(first.url, KEY_A);
    const { session } = await client.createSession({
      environments: [
        { name: "laptop", kind: { case: "host", value: {} } },
        { name: "remote", kind: { case: "extension", value: { url: extension.url } } },
      ],
      tools: [
        { name: "local", environment: "laptop" },
        { name: "hang", environment: "remote" },
      ],
    });
    const sessionId = session!.id;
    const host = new TestHost(hostClient(first.url, KEY_A), sessionId, "laptop");
    await host.attached();
    const input = fromJson(ValueSchema, {});
    void client.callTool({ sessionId, tool: "local", input }).catch(() => undefined);
    void client.callTool({ sessionId, tool: "hang", input }).catch(() => undefined);
    await host.command("local");
    await extension.called("execute");
    first.child.kill("SIGKILL");
    await first.exited;

    const second = await spawnService(env);
    services.push(second);
    await sessionClient(second.url, KEY_A).endSession({ sessionId });
    const events = await replay(second.url, sessionId);
    const executes = events.filter((event) => event.type === "operation.sent" && event.data?.kind === "execute");
    expect(executes.map((event) => event.data?.tool).sort()).toEqual(["hang", "local"]);
    for (const sent of executes) {
      const receipts = events.filter((event) => event.type === "operation.receipt" && event.data?.operationId === sent.data?.operationId);
      expect(receipts.map((event) => Object.keys(event.data?.receipt ?? {}))).toEqual([["unknown"]]);
    }
    expect(host.commands).toHaveLength(1);
  }, 120_000);
});
