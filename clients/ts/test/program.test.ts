import * as fs from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildComponents } from "../../../scripts/build-components.ts";
import { KEY_A, startTestService, type TestService } from "../../../server/test/helpers/service.ts";
import { createNodeTransport, createServiceClient, program } from "../src/node.ts";

const COMPONENTS = path.resolve(import.meta.dirname, "../../../components");
const BUILD = path.resolve(import.meta.dirname, "../../../build/components");
const SOURCE = "function run(input, configuration) { return { doubled: input.n * 2, unit: configuration.unit }; }";

let service: TestService;
let toolRuntime: Uint8Array;
let loopRuntime: Uint8Array;
beforeAll(async () => {
  await buildComponents({ dirs: ["js-program-tool", "js-program-agent-loop"].map((name) => path.join(COMPONENTS, name)), log: () => {} });
  toolRuntime = await fs.readFile(path.join(BUILD, "js-program-tool.wasm"));
  loopRuntime = await fs.readFile(path.join(BUILD, "js-program-agent-loop.wasm"));
  service = await startTestService();
}, 600_000);
afterAll(() => service?.close());

const newClient = () => createServiceClient(createNodeTransport({ baseUrl: service.url, apiKey: KEY_A }));
const procedures = (from: number) => service.logs.slice(from).map((line) => JSON.parse(line).procedure as string | undefined);

describe("program({ runtime, source })", () => {
  it("performs no I/O until resolved", async () => {
    const unreachable = program({ runtime: "0".repeat(64), source: new URL("http://127.0.0.1:1/never") });
    expect(unreachable.configuration).toBeUndefined();
    await expect(newClient().env.resolve(unreachable)).rejects.toThrow();
  });

  it("resolves to a service_program, admitting the source and a 12 MB runtime (through the assets upload)", async () => {
    const before = service.logs.length;
    const resolved = await newClient().env.resolve(
      program({ runtime: { kind: "tool", bytes: toolRuntime }, source: new TextEncoder().encode(SOURCE), configuration: { unit: "cm" } }),
    );
    expect(resolved).toMatchObject({ type: "service_program", entrypoint: "run", configuration: { unit: "cm" } });
    expect(resolved.id).toMatch(/^[0-9a-f]{64}$/);
    const called = procedures(before);
    expect(called).toContain("skillenv.env.v1.ArtifactService/AdmitProgram");
    expect(called).toContain("skillenv.env.v1.ArtifactService/AdmitTool");
    expect(called).toContain("skillenv.assets.v1.AssetService/Finalize");
  }, 60_000);

  it("checks admission first: a fresh client uploads nothing the server already has", async () => {
    const before = service.logs.length;
    const resolved = await newClient().env.resolve(program({ runtime: { kind: "tool", bytes: toolRuntime }, source: new TextEncoder().encode(SOURCE) }));
    expect(resolved.entrypoint).toBe("run");
    const called = procedures(before);
    expect(called.filter((name) => name?.includes("/Admit"))).toEqual([]);
    expect(service.logs.slice(before).some((line) => JSON.parse(line).protocol === "object-store")).toBe(false);
  });

  it("reads the source from a file URL and resolves an admitted agent-loop runtime digest to turn", async () => {
    const client = newClient();
    const runtime = await client.env.admitComponent({ kind: "agentloop", bytes: loopRuntime });
    const file = path.join(await fs.mkdtemp(path.join(os.tmpdir(), "skillenv-program-")), "loop.js");
    await fs.writeFile(file, "async function turn(input, configuration, host) { return { echoed: input }; }");
    const resolved = await client.env.resolve(program({ runtime, source: pathToFileURL(file) }));
    expect(resolved).toMatchObject({ type: "service_program", entrypoint: "turn", runtime });
  }, 60_000);

  it("prepares the runtime on every worker, and the program runs there with its configuration", async () => {
    const source = new TextEncoder().encode(SOURCE);
    const resolved = await newClient().env.prepare(program({ runtime: { kind: "tool", bytes: toolRuntime }, source, configuration: { unit: "cm" } }));
    const pool = service.serviceEnv.pool!;
    expect(pool.isPrepared(resolved.runtime)).toBe(true);
    const receipt = await pool.invoke({
      component: { id: resolved.runtime, load: async () => toolRuntime },
      entrypoint: resolved.entrypoint,
      program: { source: SOURCE },
      input: JSON.stringify({ n: 21 }),
      configuration: JSON.stringify(resolved.configuration),
      deadlineMs: Date.now() + 20_000,
      grants: { filesystem: {}, network: [], secrets: [] },
    });
    expect(receipt.outcome).toBe("returned");
    expect(JSON.parse((receipt as { output: string }).output)).toEqual({ doubled: 42, unit: "cm" });
  }, 60_000);

  it("refuses a runtime digest that is not admitted", async () => {
    await expect(newClient().env.resolve(program({ runtime: "f".repeat(64), source: new TextEncoder().encode(SOURCE) }))).rejects.toThrow(/not admitted/);
  });
});
