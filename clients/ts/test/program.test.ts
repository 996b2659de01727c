import { createHash } from "node:crypto";
import * as fs from "node:fs/promises";
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildComponents } from "../../../scripts/build-components.ts";
import { KEY_A, requestLogSince, startTestService, type TestService } from "../../../server/test/helpers/service.ts";
import { createNodeTransport, createServiceClient, program, type FetchFunction } from "../src/node.ts";

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

const newClient = (fetch?: FetchFunction) => createServiceClient(createNodeTransport({ baseUrl: service.url, apiKey: KEY_A }), fetch ? { fetch } : {});
const procedures = async (from: number) => (await requestLogSince(service, from)).map((line) => line.procedure as string | undefined);

describe("program({ runtime, source })", () => {
  it("performs no I/O until resolved (spec §4.3 rule 2)", async () => {
    // Every way out is watched: the server holding the source, the client's fetch, the global
    // fetch, and the service's request log. Resolving goes out each way the factory did not.
    const LOOP = "function turn(input) { return { v: 1, message: input.message }; }";
    const served: string[] = [];
    const sourceServer = http.createServer((request, response) => {
      served.push(request.url ?? "");
      response.end(LOOP);
    });
    await new Promise<void>((resolve) => sourceServer.listen(0, "127.0.0.1", resolve));
    const url = new URL(`http://127.0.0.1:${(sourceServer.address() as AddressInfo).port}/loop.js`);
    const fetched: string[] = [];
    const client = newClient((input, init) => (fetched.push(input), fetch(input, init)));
    const runtime = await newClient().env.admitComponent({ kind: "agentloop", bytes: loopRuntime });
    const before = service.logs.length;
    const globalFetch = globalThis.fetch;
    const globallyFetched: unknown[] = [];
    globalThis.fetch = (input, init) => (globallyFetched.push(input), globalFetch(input, init));
    try {
      const made = program({ runtime, source: url });
      const fromBytes = program({ runtime: { kind: "tool", bytes: toolRuntime }, source: new TextEncoder().encode(SOURCE) });
      expect([made.configuration, fromBytes.configuration]).toEqual([undefined, undefined]);
      expect({ fetched, globallyFetched, served }).toEqual({ fetched: [], globallyFetched: [], served: [] });
    } finally {
      globalThis.fetch = globalFetch;
    }
    expect(await requestLogSince(service, before)).toEqual([]);

    try {
      const resolved = await client.env.resolve(program({ runtime, source: url }));
      expect(resolved).toMatchObject({ type: "service_program", entrypoint: "turn", runtime, id: createHash("sha256").update(LOOP).digest("hex") });
      expect({ fetched, served }).toEqual({ fetched: [url.href], served: ["/loop.js"] });
      expect(await procedures(before)).toContain("skillenv.env.v1.ArtifactService/AdmitProgram");
    } finally {
      sourceServer.close();
    }
  });

  it("resolves to a service_program, admitting the source and a 12 MB runtime (through the assets upload)", async () => {
    const before = service.logs.length;
    const resolved = await newClient().env.resolve(
      program({ runtime: { kind: "tool", bytes: toolRuntime }, source: new TextEncoder().encode(SOURCE), configuration: { unit: "cm" } }),
    );
    expect(resolved).toMatchObject({ type: "service_program", entrypoint: "run", configuration: { unit: "cm" } });
    expect(resolved.id).toMatch(/^[0-9a-f]{64}$/);
    const called = await procedures(before);
    expect(called).toContain("skillenv.env.v1.ArtifactService/AdmitProgram");
    expect(called).toContain("skillenv.env.v1.ArtifactService/AdmitTool");
    expect(called).toContain("skillenv.assets.v1.AssetService/Finalize");
  }, 60_000);

  it("checks admission first: a fresh client uploads nothing the server already has", async () => {
    const before = service.logs.length;
    const resolved = await newClient().env.resolve(program({ runtime: { kind: "tool", bytes: toolRuntime }, source: new TextEncoder().encode(SOURCE) }));
    expect(resolved.entrypoint).toBe("run");
    const lines = await requestLogSince(service, before);
    expect(lines.filter((line) => line.procedure?.includes("/Admit"))).toEqual([]);
    expect(lines.some((line) => line.protocol === "object-store")).toBe(false);
  });

  it("reads the source from a file URL and resolves an admitted agent-loop runtime digest to turn", async () => {
    const client = newClient();
    const runtime = await newClient().env.admitComponent({ kind: "agentloop", bytes: loopRuntime });
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
