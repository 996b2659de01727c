import * as fs from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildComponents } from "../../scripts/build-components.ts";
import { runUntilExit, spawnService } from "./helpers/process.ts";
import { KEY_A, KEY_B, postJson, startTestService, type TestService } from "./helpers/service.ts";

const BUILD = path.resolve(import.meta.dirname, "../../build/components");
const KEYS = `a=${KEY_A},b=${KEY_B}`;

beforeAll(async () => {
  const sources = path.resolve(import.meta.dirname, "../../components");
  await buildComponents({ dirs: [path.join(sources, "echo-wat")], log: () => {} });
}, 600_000);

async function preparationDir(manifest: object, files: Record<string, Uint8Array | string> = {}): Promise<string> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), "skillenv-prep-"));
  for (const [name, bytes] of Object.entries(files)) await fs.writeFile(path.join(dir, name), bytes);
  await fs.writeFile(path.join(dir, "prepare.json"), JSON.stringify(manifest));
  return path.join(dir, "prepare.json");
}

describe("the service environment in the server", () => {
  let service: TestService;
  afterAll(() => service?.close());

  it("prepares admitted components on the pool and runs them", async () => {
    service = await startTestService();
    const echo = await fs.readFile(path.join(BUILD, "echo-wat.wasm"));
    const admitted = await fetch(`${service.url}/v1/tools`, {
      method: "POST",
      headers: { authorization: `Bearer ${KEY_A}`, "content-type": "application/wasm" },
      body: echo,
    });
    const { id } = (await admitted.json()) as { id: string };
    expect(service.serviceEnv.pool!.isPrepared(id)).toBe(false);

    const prepared = await postJson(service.url, "/v1/service-env/prepare", { tools: [id] }, KEY_A);
    expect(prepared.status).toBe(200);
    expect(service.serviceEnv.pool!.isPrepared(id)).toBe(true);

    const receipt = await service.serviceEnv.pool!.invoke({
      component: { id, load: async () => echo },
      entrypoint: "run",
      input: '{"v":1,"hello":"pool"}',
      configuration: "{}",
      deadlineMs: Date.now() + 10_000,
      grants: { filesystem: {}, network: [], secrets: [] },
    });
    expect(receipt).toMatchObject({ outcome: "returned", output: '{"v":1,"hello":"pool"}' });
  });
});

describe("SERVICE_ENV_PREPARATION at startup", () => {
  it("admits the listed artifacts into every workspace and prepares them before serving", async () => {
    const echo = await fs.readFile(path.join(BUILD, "echo-wat.wasm"));
    const file = await preparationDir(
      { tools: ["echo.wasm"], programs: ["hello.js"] },
      { "echo.wasm": echo, "hello.js": "function run(input) { return input; }" },
    );
    const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "skillenv-prep-data-"));
    const service = await spawnService({ SERVICE_DATA_DIR: dataDir, SERVICE_API_KEYS: KEYS, SERVICE_ENV_PREPARATION: file });
    try {
      const { createHash } = await import("node:crypto");
      const id = createHash("sha256").update(echo).digest("hex");
      for (const key of [KEY_A, KEY_B]) {
        const response = await fetch(`${service.url}/v1/tools/${id}`, { headers: { authorization: `Bearer ${key}` } });
        expect(response.status).toBe(200);
      }
      expect(await fs.readdir(path.join(dataDir, "prepared"))).toHaveLength(1);
    } finally {
      service.child.kill("SIGTERM");
      expect(await service.exited).toBe(0);
    }
  });

  it.each([
    ["an unknown field", { tools: [], extras: [] }, {}, 'unknown field "extras"'],
    ["a missing file", { tools: ["absent.wasm"] }, {}, "cannot read absent.wasm"],
    ["a path that is not a string", { tools: [7] }, {}, "tools must be an array of paths"],
    ["an invalid component", { tools: ["bad.wasm"] }, { "bad.wasm": "not wasm at all" }, "not a WebAssembly"],
  ])("stops startup on %s", async (_, manifest, files, message) => {
    const file = await preparationDir(manifest, files);
    const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "skillenv-prep-data-"));
    const result = await runUntilExit({ SERVICE_DATA_DIR: dataDir, SERVICE_API_KEYS: KEYS, SERVICE_ENV_PREPARATION: file, SERVICE_LISTEN: "127.0.0.1:0" });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain("startup failed:");
    expect(result.stderr).toContain(message);
    expect(result.stderr).not.toContain("listening on");
  });

  it("stops startup when the workers fail to load a listed component that admission accepted", async () => {
    const echo = await fs.readFile(path.join(BUILD, "echo-wat.wasm"));
    const file = await preparationDir({ tools: ["echo.wasm"] }, { "echo.wasm": echo });
    const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "skillenv-prep-data-"));
    const env = { SERVICE_DATA_DIR: dataDir, SERVICE_API_KEYS: KEYS, SERVICE_ENV_PREPARATION: file };
    const first = await spawnService(env);
    first.child.kill("SIGTERM");
    expect(await first.exited).toBe(0);
    // The persisted preparation is what a restart loads on the workers: make its glue throw there.
    const [toolchain] = await fs.readdir(path.join(dataDir, "prepared"));
    const [component] = await fs.readdir(path.join(dataDir, "prepared", toolchain!));
    const glue = path.join(dataDir, "prepared", toolchain!, component!, "glue.mjs");
    await fs.writeFile(glue, 'throw new Error("this glue cannot load");\n');

    const result = await runUntilExit({ ...env, SERVICE_LISTEN: "127.0.0.1:0" });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain("startup failed:");
    expect(result.stderr).toContain("this glue cannot load");
    expect(result.stderr).not.toContain("listening on");
  });

  it("stops startup when the preparation file itself is missing", async () => {
    const result = await runUntilExit({
      SERVICE_DATA_DIR: await fs.mkdtemp(path.join(os.tmpdir(), "skillenv-prep-data-")),
      SERVICE_API_KEYS: KEYS,
      SERVICE_ENV_PREPARATION: "/nonexistent/prepare.json",
      SERVICE_LISTEN: "127.0.0.1:0",
    });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain("cannot read the preparation file");
  });
});
