import * as fs from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildTestComponents, COMPONENTS_DIR } from "../../../server/test/helpers/pool.ts";
import { KEY_A, startTestService, type TestService } from "../../../server/test/helpers/service.ts";
import { startScriptedProvider, type ScriptedProvider } from "../../../testing/scripted-provider/index.ts";
import {
  createNodeTransport,
  createServiceClient,
  PlacementError,
  serviceEnv,
  serviceErrorCode,
  tool,
  type ApprovalRecord,
  type ServiceClient,
} from "../src/node.ts";

// A run's approvals through the client (docs/runs.md, "Approvals"): iterate the pending ones, approve or deny.

const providerKeys = { anthropic: "sk-client-approvals-2b7d" };

let provider: ScriptedProvider;
let service: TestService;
let root: string;
let client: ServiceClient;

beforeAll(async () => {
  await buildTestComponents();
  provider = await startScriptedProvider();
  root = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "skillenv-client-approvals-")));
  service = await startTestService({
    SERVICE_ANTHROPIC_BASE_URL: provider.anthropicBaseUrl,
    SERVICE_MODEL_MAX_RETRIES: "0",
    SERVICE_ENV_FILESYSTEM_ALLOW: root,
    SERVICE_ENV_WORKSPACE_ROOT: path.join(root, "workspaces"),
  });
  client = createServiceClient(createNodeTransport({ baseUrl: service.url, apiKey: KEY_A }));
}, 600_000);
afterAll(async () => {
  await service?.close();
  await provider?.close();
  if (root) await fs.rm(root, { recursive: true, force: true });
});

describe("approvals", () => {
  it("iterates a run's pending approvals and approves one and denies another; the model gets the denial", async () => {
    const sandbox = serviceEnv({ name: "sandbox", filesystem: { workspace: "write" } });
    const append = tool({
      name: "append",
      environment: sandbox,
      implementation: { kind: "tool", bytes: await fs.readFile(path.join(COMPONENTS_DIR, "append-js.wasm")) },
      approval: "always",
    });
    expect(append.approval).toBe("always");
    const session = await client.sessions.create({ environments: [sandbox], tools: [append] });
    provider.script("client-approval-model", [
      {
        toolCalls: [
          { id: "yes", name: "append", input: { v: 1, file: "log", line: "approved" } },
          { id: "no", name: "append", input: { v: 1, file: "log", line: "denied" } },
        ],
      },
      { text: "Done." },
    ]);
    const run = await session.run({ message: "Append twice.", model: { provider: "anthropic", name: "client-approval-model" }, providerKeys });

    const seen: ApprovalRecord[] = [];
    for await (const approval of run.pendingApprovals()) {
      seen.push(approval);
      if (approval.callId === "yes") expect(await run.approve(approval, { label: "ana" })).toMatchObject({ status: "approved", decidedBy: { label: "ana" } });
      else expect(await run.deny(approval.id, { label: "ana", message: "once is enough" })).toMatchObject({ status: "denied", message: "once is enough" });
    }
    // The iteration ended with the run.
    expect(seen.map((approval) => [approval.callId, approval.tool, approval.input])).toEqual([
      ["yes", "append", { v: 1, file: "log", line: "approved" }],
      ["no", "append", { v: 1, file: "log", line: "denied" }],
    ]);
    expect((await run.result()).status).toBe("completed");
    const lines = await fs.readFile(path.join(root, "workspaces", "a", session.id, "sandbox", "log"), "utf8");
    expect(lines.trim().split("\n")).toEqual(["approved"]);
    expect((await run.approvals()).map((approval) => [approval.callId, approval.status])).toEqual([
      ["yes", "approved"],
      ["no", "denied"],
    ]);
    const again = await run.approve(seen[0]!).catch((error: unknown) => error);
    expect(serviceErrorCode(again)).toBe("approval_decided");
  });

  it("refuses an approval setting other than always or never before anything is sent", () => {
    const sandbox = serviceEnv({ name: "sandbox" });
    expect(() => tool({ name: "t", environment: sandbox, implementation: "0".repeat(64), approval: "sometimes" as never })).toThrow(PlacementError);
  });
});
