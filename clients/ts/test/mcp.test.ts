import { inspect } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startEverything, type EverythingServer } from "../../../server/test/helpers/mcp.ts";
import { KEY_A, startTestService, type TestService } from "../../../server/test/helpers/service.ts";
import { createNodeTransport, createServiceClient, mcpEnv, PlacementError, tool, type ServiceClient } from "../src/node.ts";

const TOKEN = "mcp-token-7c2d04-never-shown";

let everything: EverythingServer;
let service: TestService;
let client: ServiceClient;
beforeAll(async () => {
  everything = await startEverything();
  service = await startTestService({ SERVICE_MCP_ALLOW: everything.origin });
  client = createServiceClient(createNodeTransport({ baseUrl: service.url, apiKey: KEY_A }));
});
afterAll(async () => {
  await service?.close();
  await everything?.kill();
});

describe("mcpEnv(...)", () => {
  it("defines an MCP environment whose credential is not among its fields", () => {
    const definition = mcpEnv({ name: "ev", url: everything.url, credential: TOKEN, tools: ["echo"] });
    expect(definition).toEqual({ kind: "mcp", name: "ev", setup: "automatic", url: everything.url, tools: ["echo"], approval: "never", hasCredential: true });
    expect(JSON.stringify(definition)).not.toContain(TOKEN);
    expect(inspect(definition)).not.toContain(TOKEN);
    expect(() => mcpEnv({ name: "ev", url: "ftp://example.com/mcp" })).toThrow(TypeError);
    expect(() => tool({ name: "mine", environment: definition })).toThrow(PlacementError);
  });

  it("mounts the server in a session: its tools are placed and called like any other", async () => {
    const session = await client.sessions.create({
      environments: [mcpEnv({ name: "ev", url: everything.url, credential: TOKEN, tools: ["echo", "get-sum"] })],
    });
    expect(session.record.environments).toEqual([expect.objectContaining({ name: "ev", kind: "mcp", state: "ready" })]);
    expect(session.record.tools).toEqual([
      { name: "ev__echo", description: "Echoes back the input string", environment: "ev", approval: "never" },
      { name: "ev__get-sum", description: "Returns the sum of two numbers", environment: "ev", approval: "never" },
    ]);
    const result = await session.callTool("ev__get-sum", { a: 1, b: 2 });
    expect(result).toMatchObject({ outcome: "returned", output: { content: "The sum of 1 and 2 is 3." } });
    await session.delete();
  });
});
