import { spawn } from "node:child_process";
import * as fs from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import { Level } from "level";
import pg from "pg";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { MIGRATIONS } from "../../src/storage/postgres-migrations.ts";
import { LevelStore, openPostgresStore, prefixEnd, readModifyWrite, StorageError, WriteConflict, type Store, type WriteOp } from "../../src/storage/index.ts";
import { startPostgres, type TestPostgres } from "../helpers/postgres.ts";

const POSTGRES_STORE = path.resolve(import.meta.dirname, "../../src/storage/postgres-store.ts");

/** A fresh, empty store, and how to reach it the way another replica would. */
interface Opened {
  store: Store;
  /** Another writer on the same data: another process's handle where the adapter allows one (its own pool), else the same store. */
  peer(): Promise<Store>;
  close(): Promise<void>;
}

/** Keys in UTF-8 byte order, the order every adapter must return; UTF-16 order (JS `<`) differs for "😀" and "\uffff". */
const KEYS_IN_BYTE_ORDER = ["B", "a", "z", "é", "ő", "中", "\uffff", "😀"];

function byUtf8(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a), Buffer.from(b));
}

/** The store port's guarantees (server/src/storage/store.ts), whatever the adapter. */
function storeContract(open: () => Promise<Opened>): void {
  let opened: Opened;
  let store: Store;
  beforeEach(async () => {
    opened = await open();
    store = opened.store;
  });
  afterEach(() => opened.close());

  it("gets, puts, overwrites and deletes JSON values, one table apart from another", async () => {
    const a = store.table<{ n: number; s?: string }>("a");
    const b = store.table<{ n: number }>("b");
    await a.put("k", { n: 1, s: "é\u0000\uffff" });
    await b.put("k", { n: 2 });
    expect(await a.get("k")).toEqual({ n: 1, s: "é\u0000\uffff" });
    await a.put("k", { n: 3 });
    expect(await a.get("k")).toEqual({ n: 3 });
    await a.delete("k");
    expect(await a.get("k")).toBeUndefined();
    expect(await b.get("k")).toEqual({ n: 2 });
    expect(await a.get("missing")).toBeUndefined();
  });

  it("applies a batch across tables atomically, and writes in the order they were issued", async () => {
    const a = store.table<number>("a");
    const b = store.table<number>("b");
    await a.put("gone", 0);
    await store.write([a.putOp("x", 1), b.putOp("y", 2), a.deleteOp("gone"), a.putOp("x", 3)]);
    expect([await a.get("x"), await b.get("y"), await a.get("gone")]).toEqual([3, 2, undefined]);
    // Issued together without waiting: the last one issued is what stays, and each read after its write sees it.
    await Promise.all([a.put("k", 1), a.delete("k"), a.put("k", 2), store.write([a.putOp("k", 3), a.deleteOp("k"), a.putOp("k", 4)])]);
    expect(await a.get("k")).toBe(4);
  });

  it("reads ranges in UTF-8 byte order: bounds, reverse, limit, and a prefix up to prefixEnd", async () => {
    const t = store.table<string>("t");
    const shuffled = [...KEYS_IN_BYTE_ORDER].reverse();
    await store.write(shuffled.flatMap((key) => [t.putOp(key, key), t.putOp(`p/${key}`, key)]));
    await store.table<string>("u").put("a", "other table");
    expect([...KEYS_IN_BYTE_ORDER].sort(byUtf8)).toEqual(KEYS_IN_BYTE_ORDER);
    const keys = async (range: Parameters<typeof t.entries>[0]) => (await t.entries(range)).map(([key]) => key);
    expect(await keys({ lt: "p" })).toEqual(KEYS_IN_BYTE_ORDER.slice(0, 2));
    expect(await keys({ gt: "p/\uffff" })).toEqual(["p/😀", ...KEYS_IN_BYTE_ORDER.slice(2)]);
    expect(await keys({ gte: "é", lte: "\uffff" })).toEqual(["é", "ő", "中", "\uffff"]);
    expect(await keys({ gt: "é", lt: "\uffff", reverse: true })).toEqual(["中", "ő"]);
    expect(await keys({ gte: "é", reverse: true, limit: 2 })).toEqual(["😀", "\uffff"]);
    expect(await keys({ limit: 0 })).toEqual([]);
    expect(await t.values({ gte: "a", lte: "a" })).toEqual(["a"]);
    // A prefix range ends at prefix + U+FFFF: it holds every key whose next character is in the
    // BMP (U+FFFF itself too, by lte), but "😀" encodes above U+FFFF (F0 > EF) and falls outside.
    expect(await keys({ gt: "p/", lt: prefixEnd("p/") })).toEqual(KEYS_IN_BYTE_ORDER.slice(0, 6).map((key) => `p/${key}`));
    expect(await keys({ gt: "p/", lte: prefixEnd("p/") })).toEqual(KEYS_IN_BYTE_ORDER.slice(0, 7).map((key) => `p/${key}`));
  });

  it("pages by a byte budget of the values' JSON text: the first entry always, more when entries remain", async () => {
    const t = store.table<string>("t");
    // JSON text sizes: "é" is 2 bytes in UTF-8, plus 2 quotes.
    const values: Array<[string, string]> = [
      ["a", "x".repeat(8)], // 10 bytes
      ["b", "é".repeat(4)], // 10 bytes
      ["c", "x".repeat(28)], // 30 bytes
      ["d", "x".repeat(3)], // 5 bytes
    ];
    await store.write(values.map(([key, value]) => t.putOp(key, value)));
    const page = async (limit: number, maxBytes: number, reverse = false) => {
      const { entries, more } = await t.page({ limit, reverse }, maxBytes);
      return { keys: entries.map(([key]) => key), more };
    };
    expect(await page(10, 20)).toEqual({ keys: ["a", "b"], more: true });
    expect(await page(10, 19)).toEqual({ keys: ["a"], more: true });
    expect(await page(10, 1)).toEqual({ keys: ["a"], more: true });
    expect(await page(10, 55)).toEqual({ keys: ["a", "b", "c", "d"], more: false });
    expect(await page(4, 1000)).toEqual({ keys: ["a", "b", "c", "d"], more: false });
    expect(await page(3, 1000)).toEqual({ keys: ["a", "b", "c"], more: true });
    expect(await page(10, 35, true)).toEqual({ keys: ["d", "c"], more: true });
    expect(await t.page({ gt: "b", limit: 10 }, 1)).toEqual({ entries: [["c", "x".repeat(28)]], more: true });
    expect(await t.page({ gt: "d", limit: 10 }, 1)).toEqual({ entries: [], more: false });
  });

  it("applies a conditional batch only when every expected key holds exactly the expected JSON text, or is absent", async () => {
    const t = store.table<Record<string, number>>("t");
    const other = store.table<number>("other");
    await t.put("k", { a: 1, b: 2 });
    await store.write([t.expectOp("k", { a: 1, b: 2 }), t.putOp("k", { a: 2, b: 2 }), t.expectOp("new", undefined), t.putOp("new", { a: 0 })]);
    expect([await t.get("k"), await t.get("new")]).toEqual([{ a: 2, b: 2 }, { a: 0 }]);

    const refused: WriteOp[][] = [
      [t.expectOp("k", { a: 1, b: 2 }), t.putOp("k", { a: 9 }), other.putOp("x", 1)], // stale value
      [t.expectOp("k", { b: 2, a: 2 }), t.putOp("k", { a: 9 }), other.putOp("x", 1)], // same object, other JSON text
      [t.expectOp("new", undefined), other.putOp("x", 1)], // present, expected absent
      [t.expectOp("never", { a: 0 }), other.putOp("x", 1)], // absent, expected present
    ];
    for (const ops of refused) await expect(store.write(ops)).rejects.toBeInstanceOf(WriteConflict);
    expect([await t.get("k"), await other.get("x")]).toEqual([{ a: 2, b: 2 }, undefined]);
  });

  it("rejects a write whose condition fails within a group, and commits the group's others", async () => {
    const t = store.table<string>("t");
    // Issued in one turn: one group. The second expects what the first changes, as checked in order.
    const results = await Promise.allSettled([
      store.write([t.expectOp("k", undefined), t.putOp("k", "first")]),
      store.write([t.expectOp("k", undefined), t.putOp("k", "second"), t.putOp("side", "second")]),
      store.write([t.expectOp("k", "first"), t.putOp("after", "third")]),
      t.put("plain", "fourth"),
    ]);
    expect(results.map((result) => result.status)).toEqual(["fulfilled", "rejected", "fulfilled", "fulfilled"]);
    expect((results[1] as PromiseRejectedResult).reason).toBeInstanceOf(WriteConflict);
    expect(await t.entries({})).toEqual([
      ["after", "third"],
      ["k", "first"],
      ["plain", "fourth"],
    ]);
  });

  it("lets one of two writers create a key both found absent, and never both of two that each expect the other's key absent", async () => {
    const peer = await opened.peer();
    const rounds = 20;
    const t = store.table<string>("t");
    const create = (writer: Store, key: string, name: string) => writer.write([t.expectOp(key, undefined), t.putOp(key, name)]);
    // Write skew: each expects absent the key the other creates.
    const skew = (writer: Store, expected: string, created: string) => writer.write([t.expectOp(expected, undefined), t.putOp(created, "skew")]);
    for (let round = 0; round < rounds; round++) {
      const created = await Promise.allSettled([create(store, `c${round}`, "store"), create(peer, `c${round}`, "peer")]);
      expect(created.filter((result) => result.status === "fulfilled")).toHaveLength(1);
      const skewed = await Promise.allSettled([skew(store, `x${round}`, `y${round}`), skew(peer, `y${round}`, `x${round}`)]);
      expect(skewed.filter((result) => result.status === "fulfilled").length).toBeGreaterThanOrEqual(1);
      expect([await t.get(`x${round}`), await t.get(`y${round}`)]).toContain(undefined);
    }
  });

  it("applies a batch of many keys, with conditions on them, as one", async () => {
    const t = store.table<number>("t");
    const keys = Array.from({ length: 1000 }, (_, i) => `k${String(i).padStart(4, "0")}`);
    await store.write(keys.map((key, i) => t.putOp(key, i)));
    const results = await Promise.allSettled([
      store.write(keys.flatMap((key, i) => [t.expectOp(key, i), t.putOp(key, i + 1)])),
      store.write(keys.flatMap((key, i) => [t.expectOp(key, i), t.putOp(key, -1)])),
    ]);
    expect(results.map((result) => result.status)).toEqual(["fulfilled", "rejected"]);
    expect(await t.values({})).toEqual(keys.map((_, i) => i + 1));
  });

  it("keeps a counter exact under readModifyWrite from two concurrent writers", async () => {
    const peer = await opened.peer();
    const increments = 100;
    const increment = (writer: Store) =>
      readModifyWrite(writer, async (reads) => {
        const counters = writer.table<number>("counters");
        const value = (await reads.get(counters, "c")) ?? 0;
        return { ops: [counters.putOp("c", value + 1)], result: value + 1 };
      });
    const run = async (writer: Store) => {
      for (let i = 0; i < increments; i++) await increment(writer);
    };
    await Promise.all([run(store), run(peer)]);
    expect(await store.table<number>("counters").get("c")).toBe(2 * increments);
  });
}

describe("the store contract on LevelDB", () => {
  storeContract(async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), "skillenv-store-"));
    const db = new Level<string, string>(dir);
    await db.open();
    const store = new LevelStore(db);
    // LevelDB admits one process: its second writer is another caller in the same one.
    return {
      store,
      peer: async () => store,
      close: async () => {
        await store.close();
        await fs.rm(dir, { recursive: true, force: true });
      },
    };
  });
});

describe("the store contract on PostgreSQL", () => {
  let server: TestPostgres;
  beforeAll(async () => {
    server = await startPostgres();
  });
  afterAll(() => server?.stop());

  storeContract(async () => {
    const url = await server.createDatabase();
    const stores = [await openPostgresStore(url)];
    return {
      store: stores[0]!,
      // Its own pool: another replica.
      peer: async () => {
        const peer = await openPostgresStore(url);
        stores.push(peer);
        return peer;
      },
      close: async () => {
        await Promise.all(stores.map((store) => store.close()));
      },
    };
  });

  describe("opening", () => {
    it("migrates once when replicas open a fresh database together", async () => {
      const url = await server.createDatabase();
      const stores = await Promise.all([openPostgresStore(url), openPostgresStore(url), openPostgresStore(url)]);
      await Promise.all(stores.map((store) => store.close()));
      const { rows } = await query(url, "SELECT version, count(*)::int AS times FROM skillenv_schema_migrations GROUP BY version ORDER BY version");
      expect(rows).toEqual(MIGRATIONS.map((migration) => ({ version: migration.version, times: 1 })));
    });

    it("refuses a database a newer server migrated", async () => {
      const url = await server.createDatabase();
      await (await openPostgresStore(url)).close();
      await query(url, "INSERT INTO skillenv_schema_migrations (version) VALUES (1000)");
      await expect(openPostgresStore(url)).rejects.toThrow(/schema version 1000, newer than this server knows/);
    });

    it("refuses a database whose encoding is not UTF8", async () => {
      await query(server.url, "CREATE DATABASE ascii ENCODING 'SQL_ASCII' TEMPLATE template0");
      await expect(openPostgresStore(server.url.replace(/\/postgres$/, "/ascii"))).rejects.toThrow(/encoding is SQL_ASCII; the store needs UTF8/);
    });
  });

  it("has committed every write it acknowledged when its process is killed", async () => {
    const url = await server.createDatabase();
    const script = `
      const { openPostgresStore } = await import(${JSON.stringify(POSTGRES_STORE)});
      const table = (await openPostgresStore(${JSON.stringify(url)})).table("durable");
      for (let i = 0; ; i++) {
        await table.put(String(i).padStart(6, "0"), i);
        process.stdout.write(i + "\\n");
      }`;
    const child = spawn(process.execPath, ["--input-type=module", "-e", script], { stdio: ["ignore", "pipe", "inherit"] });
    const exited = new Promise((resolve) => child.once("exit", resolve));
    let out = "";
    const acked = await new Promise<number>((resolve, reject) => {
      child.once("exit", (code) => reject(new Error(`the writer exited (${code}): ${out}`)));
      child.stdout.on("data", (chunk: Buffer) => {
        out += chunk.toString();
        const lines = out.split("\n").slice(0, -1);
        if (lines.length < 20) return;
        // Killed between an acknowledgement and the next: the next write is in flight.
        child.kill("SIGKILL");
        resolve(Number(lines.at(-1)));
      });
    });
    await exited;
    const store = await openPostgresStore(url);
    try {
      const values = await store.table<number>("durable").values({ limit: acked + 1 });
      expect(values).toEqual(Array.from({ length: acked + 1 }, (_, i) => i));
    } finally {
      await store.close();
    }
  });
});

describe("PostgreSQL going away", () => {
  it("fails reads and writes with a StorageError that names no password", async () => {
    const server = await startPostgres();
    let store: Store | undefined;
    try {
      const url = (await server.createDatabase()).replace("postgres@", "postgres:hunter2-secret@");
      store = await openPostgresStore(url);
      const table = store.table<number>("t");
      await table.put("k", 1);
      await server.stop();
      const failures = await Promise.allSettled([table.get("k"), table.put("k", 2), table.entries({}), openPostgresStore(url)]);
      for (const failure of failures) {
        expect(failure.status).toBe("rejected");
        const error = (failure as PromiseRejectedResult).reason as Error;
        expect(error).toBeInstanceOf(StorageError);
        expect(error.message).toMatch(/^metadata (read|write|connection) failed/);
        expect(error.message).not.toMatch(/hunter2/);
      }
    } finally {
      await store?.close();
      await server.stop();
    }
  });
});

async function query(url: string, sql: string) {
  const client = new pg.Client(url);
  await client.connect();
  try {
    return await client.query(sql);
  } finally {
    await client.end();
  }
}
