import * as fs from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import { startService, type RunningService } from "../../src/app.ts";
import { loadSettings } from "../../src/config/index.ts";

export const KEY_A = "key-for-workspace-a-0001";
export const KEY_B = "key-for-workspace-b-0002";

export interface TestService extends RunningService {
  dataDir: string;
  logs: string[];
}

/** A real service on an ephemeral loopback port with two workspaces, a temp data dir and captured logs. */
export async function startTestService(env: Record<string, string> = {}): Promise<TestService> {
  const dataDir = env.SERVICE_DATA_DIR ?? (await fs.mkdtemp(path.join(os.tmpdir(), "skillenv-test-")));
  const settings = loadSettings({
    SERVICE_LISTEN: "127.0.0.1:0",
    SERVICE_DATA_DIR: dataDir,
    SERVICE_API_KEYS: `a=${KEY_A},b=${KEY_B}`,
    SERVICE_SHUTDOWN_GRACE_SECS: "2",
    ...env,
  });
  const logs: string[] = [];
  const service = await startService(settings, { log: (line) => logs.push(line) });
  return { ...service, dataDir, logs, close: () => service.close() };
}

export function bearer(key: string): Record<string, string> {
  return { authorization: `Bearer ${key}` };
}

/** POSTs JSON to a REST path and returns status and parsed body. */
export async function postJson(base: string, route: string, body: unknown, key?: string): Promise<{ status: number; body: any }> {
  const response = await fetch(base + route, {
    method: "POST",
    headers: { "content-type": "application/json", ...(key ? bearer(key) : {}) },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: await response.json() };
}
