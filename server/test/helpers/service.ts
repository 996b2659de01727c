import { randomUUID } from "node:crypto";
import * as fs from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import pg from "pg";
import { inject } from "vitest";
import { startService, type RunningService } from "../../src/app.ts";
import { sandboxFromEnvironment } from "./process.ts";
import { loadSettings } from "../../src/config/index.ts";
import { parseS3Url, S3BlobStore } from "../../src/storage/index.ts";

export const KEY_A = "key-for-workspace-a-0001";
export const KEY_B = "key-for-workspace-b-0002";

export interface TestService extends RunningService {
  dataDir: string;
  logs: string[];
  /** Resolves with the first log line, written already or later, that `matches`. */
  logged(matches: (line: string) => boolean): Promise<string>;
}

/**
 * A real service on an ephemeral loopback port with two workspaces, a temp data dir and captured
 * logs. In the `postgres-s3` test project (vitest.config.ts) its metadata is in a PostgreSQL
 * database and its blobs under an S3 key prefix of its own, kept with its data directory, so a
 * service started again on that directory finds them.
 */
export async function startTestService(env: Record<string, string> = {}): Promise<TestService> {
  const dataDir = env.SERVICE_DATA_DIR ?? (await fs.mkdtemp(path.join(os.tmpdir(), "skillenv-test-")));
  const settings = loadSettings({
    SERVICE_LISTEN: "127.0.0.1:0",
    SERVICE_DATA_DIR: dataDir,
    SERVICE_API_KEYS: `a=${KEY_A},b=${KEY_B}`,
    SERVICE_SHUTDOWN_GRACE_SECS: "2",
    // A machine where bubblewrap cannot run (a nested container) says so in the tests' environment.
    ...(process.env.SERVICE_ENV_SANDBOX ? { SERVICE_ENV_SANDBOX: process.env.SERVICE_ENV_SANDBOX } : {}),
    ...(await sharedBackends(dataDir)),
    ...sandboxFromEnvironment(),
    ...env,
  });
  const logs: string[] = [];
  const waiting = new Set<{ matches: (line: string) => boolean; resolve: (line: string) => void }>();
  const log = (line: string) => {
    logs.push(line);
    for (const waiter of waiting) {
      if (!waiter.matches(line)) continue;
      waiting.delete(waiter);
      waiter.resolve(line);
    }
  };
  const logged = (matches: (line: string) => boolean) =>
    new Promise<string>((resolve) => {
      const found = logs.find(matches);
      if (found !== undefined) resolve(found);
      else waiting.add({ matches, resolve });
    });
  const service = await startService(settings, { log });
  return { ...service, dataDir, logs, logged, close: () => service.close() };
}

/**
 * Whether services keep their metadata and blobs in the data directory (the `default` test
 * project) rather than in the postgres-s3 project's PostgreSQL and S3. Tests that look at the
 * embedded layout itself (files under the data directory, the embedded upload endpoint) run with
 * `it.runIf(onEmbeddedStorage)`: in the default project, so in every CI run.
 */
export const onEmbeddedStorage = inject("sharedBackends") === undefined;

/** The shared backends of a data directory, by directory, for services started on it again. */
const backendsOfDataDir = new Map<string, Record<string, string>>();

/** `SERVICE_DATABASE_URL` and `SERVICE_BLOB_URL` of the data directory, in the postgres-s3 project; none otherwise. */
async function sharedBackends(dataDir: string): Promise<Record<string, string>> {
  const shared = inject("sharedBackends");
  if (!shared) return {};
  // The S3 client finds its credentials through the SDK's default chain, as in production.
  Object.assign(process.env, shared.s3Env);
  let backends = backendsOfDataDir.get(dataDir);
  if (!backends) {
    const prefix = `t${randomUUID().replaceAll("-", "")}`;
    backends = { SERVICE_DATABASE_URL: await createDatabase(shared.databaseAdminUrl, prefix), SERVICE_BLOB_URL: withKeyPrefix(shared.blobUrl, prefix) };
    backendsOfDataDir.set(dataDir, backends);
  }
  return backends;
}

/** A fresh database on the shared server; its URL. */
async function createDatabase(adminUrl: string, name: string): Promise<string> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    await client.query(`CREATE DATABASE ${name} ENCODING 'UTF8' TEMPLATE template0`);
  } finally {
    await client.end();
  }
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

/** `s3://bucket?...` with `/prefix` as its key prefix. */
function withKeyPrefix(blobUrl: string, prefix: string): string {
  const url = new URL(blobUrl);
  url.pathname = `${url.pathname.replace(/\/$/, "")}/${prefix}`;
  return url.toString();
}

/**
 * Whether the service's blob store holds the bytes `sha256`: a file of its data directory
 * (blobs/sha256/<2>/<hash>), or an object under its S3 prefix in the postgres-s3 project.
 */
export async function blobExists(service: TestService, sha256: string): Promise<boolean> {
  const blobUrl = backendsOfDataDir.get(service.dataDir)?.SERVICE_BLOB_URL;
  if (blobUrl !== undefined) return (await (await S3BlobStore.open(parseS3Url(blobUrl))).stat(sha256)) !== undefined;
  return fs.stat(path.join(service.dataDir, "blobs", "sha256", sha256.slice(0, 2), sha256)).then(
    () => true,
    () => false,
  );
}

/**
 * The skill snapshots the service keeps for `runId`, by SHA-256: files under its data directory
 * (runs/<runId>/assets/<hash>), or objects in its bucket (runs/<runId>/<hash>) in the postgres-s3 project.
 */
export async function runSnapshots(service: TestService, runId: string): Promise<Map<string, Buffer>> {
  const snapshots = new Map<string, Buffer>();
  const blobUrl = backendsOfDataDir.get(service.dataDir)?.SERVICE_BLOB_URL;
  if (blobUrl !== undefined) {
    const bucket = await S3BlobStore.open(parseS3Url(blobUrl));
    for (const { name } of await bucket.listPrivate(`${runId}/`)) snapshots.set(name.slice(runId.length + 1), Buffer.from((await bucket.readPrivate(name))!));
    return snapshots;
  }
  const dir = path.join(service.dataDir, "runs", runId, "assets");
  for (const name of await fs.readdir(dir).catch(() => [])) snapshots.set(name, await fs.readFile(path.join(dir, name)));
  return snapshots;
}

/** The runs that have skill snapshots, sorted (see runSnapshots). */
export async function snapshottedRuns(service: TestService): Promise<string[]> {
  const blobUrl = backendsOfDataDir.get(service.dataDir)?.SERVICE_BLOB_URL;
  if (blobUrl !== undefined) {
    const names = await (await S3BlobStore.open(parseS3Url(blobUrl))).listPrivate("");
    return [...new Set(names.map(({ name }) => name.slice(0, name.indexOf("/"))))].sort();
  }
  return (await fs.readdir(path.join(service.dataDir, "runs")).catch(() => [])).sort();
}

const SENTINEL_PATH = "/test-log-sentinel/";

/**
 * The request log lines written since `mark` (an earlier `service.logs.length`), parsed, with every
 * request the caller has had its answer to among them. A line is written once its response is over,
 * which may be just after the client has read it; so this sends a request of its own and waits for
 * its line: a response the client had read before that request left was over before the server
 * read it. Its own lines (and those of earlier calls) are left out.
 */
export async function requestLogSince(service: TestService, mark: number): Promise<any[]> {
  const path = `${SENTINEL_PATH}${randomUUID()}`;
  const line = service.logged((each) => each.includes(path));
  await (await fetch(service.url + path)).arrayBuffer();
  await line;
  return service.logs
    .slice(mark)
    .map((each) => JSON.parse(each))
    .filter((entry) => typeof entry.path !== "string" || !entry.path.startsWith(SENTINEL_PATH));
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
