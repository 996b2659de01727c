// The server's two sandbox modes, through its real entry point (docs/operations.md, "The
// sandbox"): without a way to run bubblewrap it serves everything but the service environment,
// which it refuses with sandbox_unavailable and explains in its log; with SERVICE_ENV_SANDBOX=off
// it runs guests without OS isolation, and says so loudly.
import * as fs from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { buildComponents } from "../../scripts/build-components.ts";
import { runUntilExit, spawnService } from "./helpers/process.ts";
import { KEY_A, postJson } from "./helpers/service.ts";

const BUILD = path.resolve(import.meta.dirname, "../../build/components");
const KEYS = `a=${KEY_A}`;
/** A PATH on which no bubblewrap can be found: the host where the sandbox cannot start. */
const NO_BUBBLEWRAP = "/nonexistent";

let echo: Uint8Array<ArrayBuffer>;

beforeAll(async () => {
  await buildComponents({ dirs: [path.resolve(import.meta.dirname, "../../components/echo-wat")], log: () => {} });
  echo = new Uint8Array(await fs.readFile(path.join(BUILD, "echo-wat.wasm")));
}, 600_000);

const dataDir = () => fs.mkdtemp(path.join(os.tmpdir(), "skillenv-sandbox-mode-"));

async function admit(url: string): Promise<string> {
  const response = await fetch(`${url}/v1/tools`, {
    method: "POST",
    headers: { authorization: `Bearer ${KEY_A}`, "content-type": "application/wasm" },
    body: echo,
  });
  expect(response.status).toBe(200);
  return ((await response.json()) as { id: string }).id;
}

function createSession(url: string, tool: string) {
  return postJson(
    url,
    "/v1/sessions",
    { environments: [{ name: "sandbox", service: {} }], tools: [{ name: "echo", environment: "sandbox", implementation: { tool } }] },
    KEY_A,
  );
}

describe("a host where the sandbox cannot start", () => {
  it("serves, says in its log why the service environment is not running, and refuses it with sandbox_unavailable", async () => {
    const service = await spawnService({ SERVICE_DATA_DIR: await dataDir(), SERVICE_API_KEYS: KEYS, PATH: NO_BUBBLEWRAP });
    try {
      expect(service.stderr()).toContain("WARNING: the service environment is not running");
      expect(service.stderr()).toContain("bubblewrap");
      expect(service.stderr()).toContain("SERVICE_ENV_SANDBOX=off");
      // Everything else serves: assets, admission.
      expect((await postJson(service.url, "/assets/presign", { sha256: "0".repeat(64), sizeBytes: 1 }, KEY_A)).status).toBe(200);
      const tool = await admit(service.url);
      const refused = await createSession(service.url, tool);
      expect(refused.status).toBe(503);
      expect(refused.body.code).toBe("sandbox_unavailable");
      // Nothing was created.
      const listed = await fetch(`${service.url}/v1/sessions`, { headers: { authorization: `Bearer ${KEY_A}` } });
      expect(((await listed.json()) as { sessions?: unknown[] }).sessions ?? []).toEqual([]);
      const prepare = await postJson(service.url, "/v1/service-env/prepare", { tools: [tool] }, KEY_A);
      expect(prepare.status).toBe(503);
      expect(prepare.body.code).toBe("sandbox_unavailable");
    } finally {
      service.child.kill("SIGTERM");
      await service.exited;
    }
  });

  it("stops at startup when a preparation file needs the workers", async () => {
    const dir = await dataDir();
    await fs.writeFile(path.join(dir, "echo.wasm"), echo);
    await fs.writeFile(path.join(dir, "prepare.json"), JSON.stringify({ tools: ["echo.wasm"] }));
    const result = await runUntilExit({
      SERVICE_DATA_DIR: path.join(dir, "data"),
      SERVICE_API_KEYS: KEYS,
      SERVICE_ENV_PREPARATION: path.join(dir, "prepare.json"),
      SERVICE_LISTEN: "127.0.0.1:0",
      PATH: NO_BUBBLEWRAP,
    });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain("bubblewrap");
  });
});

describe("SERVICE_ENV_SANDBOX=off", () => {
  it("warns loudly at startup, and runs guests as plain processes", async () => {
    const service = await spawnService({ SERVICE_DATA_DIR: await dataDir(), SERVICE_API_KEYS: KEYS, SERVICE_ENV_SANDBOX: "off", PATH: NO_BUBBLEWRAP });
    try {
      expect(service.stderr()).toContain("WARNING: SERVICE_ENV_SANDBOX=off");
      const created = await createSession(service.url, await admit(service.url));
      expect(created.status).toBe(200);
      const called = await postJson(service.url, `/v1/sessions/${created.body.session.id}/tools/echo:call`, { input: { v: 1, text: "unsandboxed" } }, KEY_A);
      expect(called.body.receipt).toEqual({ returned: { output: { v: 1, text: "unsandboxed" } } });
    } finally {
      service.child.kill("SIGTERM");
      await service.exited;
    }
  });

  it("accepts only on or off", async () => {
    const result = await runUntilExit({ SERVICE_DATA_DIR: await dataDir(), SERVICE_ENV_SANDBOX: "false" });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain("SERVICE_ENV_SANDBOX: expected on or off");
  });
});
