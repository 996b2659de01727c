import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import * as fs from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import pg from "pg";
import { freePort } from "./ports.ts";

const BIN = "/usr/lib/postgresql/15/bin";
/** Attempts at a free port: another process may take the one picked before postgres binds it. */
const PORT_ATTEMPTS = 5;

/** A private PostgreSQL server for one test file (or a whole run, from a globalSetup). */
export interface TestPostgres {
  /** `postgres://postgres@127.0.0.1:PORT/postgres`; no password (trust authentication). */
  url: string;
  /** A fresh, empty database, by its URL. */
  createDatabase(): Promise<string>;
  /** Fast shutdown (open sessions are ended), then the cluster's directory is removed. */
  stop(): Promise<void>;
}

/**
 * Starts PostgreSQL 15 (Debian's `postgresql-15`) in a temp directory: initdb (UTF8, locale C),
 * then `postgres` on a free loopback port, ready once it logged that it accepts connections and a
 * connection succeeded. initdb and postgres refuse to run as root, so when we are root both run
 * as the `postgres` user, which owns the directory: spawned with its uid (not through runuser,
 * which would stand between the server and the signal that stops it).
 */
export async function startPostgres(): Promise<TestPostgres> {
  const root = await fs.mkdtemp(path.join(os.tmpdir(), "skillenv-pg-"));
  const dataDir = path.join(root, "data");
  const user: RunAs = process.getuid?.() === 0 ? postgresUser() : {};
  if (user.uid !== undefined && user.gid !== undefined) await fs.chown(root, user.uid, user.gid);
  try {
    const init = spawnSync(`${BIN}/initdb`, ["-D", dataDir, "-A", "trust", "-E", "UTF8", "--locale=C", "-U", "postgres"], { ...user, encoding: "utf8" });
    if (init.status !== 0) throw new Error(`initdb failed (${init.status}): ${init.stderr}`);
    for (let attempt = 1; ; attempt++) {
      const port = await freePort();
      try {
        const server = await runServer(user, dataDir, root, port);
        return handle(server, root, port);
      } catch (error) {
        if (!(error instanceof PortTaken) || attempt >= PORT_ATTEMPTS) throw error;
      }
    }
  } catch (error) {
    await fs.rm(root, { recursive: true, force: true });
    throw error;
  }
}

class PortTaken extends Error {}

function handle(server: ChildProcess, root: string, port: number): TestPostgres {
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  let databases = 0;
  const exited = new Promise<void>((resolve) => (server.exitCode !== null ? resolve() : server.once("exit", () => resolve())));
  return {
    url,
    async createDatabase() {
      const name = `test_${++databases}`;
      const client = new pg.Client(url);
      await client.connect();
      try {
        await client.query(`CREATE DATABASE ${name}`);
      } finally {
        await client.end();
      }
      return `postgres://postgres@127.0.0.1:${port}/${name}`;
    },
    async stop() {
      // SIGINT: fast shutdown, which ends open sessions instead of waiting for them.
      server.kill("SIGINT");
      await exited;
      await fs.rm(root, { recursive: true, force: true });
    },
  };
}

/** Starts postgres and resolves once it accepts connections; rejects with PortTaken when the port was not free. */
async function runServer(user: RunAs, dataDir: string, socketDir: string, port: number): Promise<ChildProcess> {
  const args = ["-D", dataDir, "-p", String(port), "-k", socketDir, "-c", "listen_addresses=127.0.0.1"];
  const server = spawn(`${BIN}/postgres`, args, { ...user, stdio: ["ignore", "ignore", "pipe"] });
  let log = "";
  await new Promise<void>((resolve, reject) => {
    const onExit = (code: number | null) =>
      reject(/could not bind|already in use/.test(log) ? new PortTaken(log) : new Error(`postgres exited (${code}) before it was ready:\n${log}`));
    server.once("exit", onExit);
    server.stderr!.on("data", (chunk: Buffer) => {
      log += chunk.toString();
      if (log.includes("ready to accept connections")) {
        server.off("exit", onExit);
        resolve();
      }
    });
  });
  // Drain its log from now on, so that a full pipe never blocks the server.
  server.stderr!.resume();
  await connectOnce(`postgres://postgres@127.0.0.1:${port}/postgres`);
  return server;
}

async function connectOnce(url: string): Promise<void> {
  const client = new pg.Client(url);
  await client.connect();
  await client.end();
}

/** The user the server runs as: the `postgres` user when we are root, else ourselves. */
interface RunAs {
  uid?: number;
  gid?: number;
}

function postgresUser(): Required<RunAs> {
  const id = (flag: string) => Number(spawnSync("id", [flag, "postgres"], { encoding: "utf8" }).stdout.trim());
  return { uid: id("-u"), gid: id("-g") };
}
