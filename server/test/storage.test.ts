import * as fs from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import { Code, ConnectError, createClient, createRouterTransport } from "@connectrpc/connect";
import { Level } from "level";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ErrorInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { Health } from "../../gen/grpc/health/v1/health_pb.js";
import { LevelStore, readModifyWrite, StorageError, storageErrorInterceptor, WriteConflict, type Store } from "../src/storage/index.ts";

describe("the LevelDB adapter of the store port", () => {
  let dir: string;
  let db: Level<string, string>;
  let store: Store;

  beforeEach(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), "skillenv-store-"));
    db = new Level<string, string>(dir);
    await db.open();
    store = new LevelStore(db);
  });
  afterEach(async () => {
    await store.close().catch(() => undefined);
    await fs.rm(dir, { recursive: true, force: true });
  });

  it("reads ranges in key order, backwards and with a limit, one table apart from another", async () => {
    const a = store.table<number>("a");
    const b = store.table<number>("b");
    await Promise.all(["k3", "k1", "k2"].map((key, i) => a.put(key, i)));
    await b.put("k1", 99);
    expect((await a.entries({})).map(([key]) => key)).toEqual(["k1", "k2", "k3"]);
    expect((await a.entries({ reverse: true, limit: 2 })).map(([key]) => key)).toEqual(["k3", "k2"]);
    expect(await a.values({ gt: "k1", lt: "k3" })).toEqual([2]);
    expect(await b.values({})).toEqual([99]);
    expect(await a.get("missing")).toBeUndefined();
  });

  it("applies a batch across tables atomically, and concurrent writes in the order they were issued", async () => {
    const a = store.table<string>("a");
    const b = store.table<string>("b");
    await store.write([a.putOp("x", "1"), b.putOp("y", "2"), a.deleteOp("x")]);
    expect(await a.get("x")).toBeUndefined();
    expect(await b.get("y")).toBe("2");
    // Many writes issued at once share syncs (group commit) but land in issue order.
    await Promise.all(Array.from({ length: 200 }, (_, i) => a.put("same", String(i))));
    expect(await a.get("same")).toBe("199");
  });

  it("refuses a value that is not JSON to its caller alone", async () => {
    const a = store.table<unknown>("a");
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    const good = a.put("good", 1);
    expect(() => a.putOp("bad", cyclic)).toThrow();
    await good;
    expect(await a.get("good")).toBe(1);
  });

  it("keeps acknowledged writes across a reopen", async () => {
    await store.table<string>("t").put("k", "kept");
    await store.close();
    db = new Level<string, string>(dir);
    await db.open();
    store = new LevelStore(db);
    expect(await store.table<string>("t").get("k")).toBe("kept");
  });

  it("retries a read-modify-write that lost to another writer, on fresh reads", async () => {
    const counter = store.table<number>("counter");
    await counter.put("n", 0);
    let attempts = 0;
    const result = await readModifyWrite(store, async (reads) => {
      const n = (await reads.get(counter, "n"))!;
      attempts++;
      // Another writer gets in between the first attempt's read and its write.
      if (attempts === 1) await counter.put("n", 10);
      return { ops: [counter.putOp("n", n + 1)], result: n + 1 };
    });
    expect({ result, attempts, stored: await counter.get("n") }).toEqual({ result: 11, attempts: 2, stored: 11 });
  });

  it("checks a decision to write nothing taken on several reads, which another writer may have come between", async () => {
    const assets = store.table<string>("assets");
    const receipts = store.table<string>("receipts");
    await receipts.put("k", "receipt");
    let attempts = 0;
    const found = await readModifyWrite(store, async (reads) => {
      attempts++;
      const asset = await reads.get(assets, "k");
      // A finalize elsewhere turns the receipt into the asset between this attempt's two reads.
      if (attempts === 1) await store.write([assets.putOp("k", "asset"), receipts.deleteOp("k")]);
      const receipt = await reads.get(receipts, "k");
      return { ops: [], result: asset ?? receipt ?? "neither" };
    });
    expect({ found, attempts }).toEqual({ found: "asset", attempts: 2 });
  });

  it("gives up with WriteConflict, having written nothing, when every attempt loses", async () => {
    const counter = store.table<number>("counter");
    await counter.put("n", 0);
    let attempts = 0;
    const update = readModifyWrite(store, async (reads) => {
      const n = (await reads.get(counter, "n"))!;
      attempts++;
      await counter.put("n", -attempts);
      return { ops: [counter.putOp("n", n + 1), store.table<string>("side").putOp("effect", "written")], result: n };
    });
    await expect(update).rejects.toBeInstanceOf(WriteConflict);
    expect(attempts).toBe(32);
    expect(await counter.get("n")).toBe(-32);
    expect(await store.table<string>("side").get("effect")).toBeUndefined();
  });

  it("reports a failed write as a StorageError", async () => {
    await db.close();
    await expect(store.table<string>("t").put("k", "v")).rejects.toBeInstanceOf(StorageError);
  });
});

describe("storage failures at the API edge", () => {
  it("become storage_unavailable without the database's internals", async () => {
    const transport = createRouterTransport(
      (router) =>
        router.service(Health, {
          check: () => {
            throw new StorageError("metadata write failed (LEVEL_IO_ERROR) /var/lib/secret/path", { cause: new Error("disk full") });
          },
          watch: async function* () {},
        }),
      { router: { interceptors: [storageErrorInterceptor()] } },
    );
    const error = await createClient(Health, transport)
      .check({})
      .catch((thrown: unknown) => ConnectError.from(thrown));
    expect(error).toBeInstanceOf(ConnectError);
    expect((error as ConnectError).code).toBe(Code.Unavailable);
    expect((error as ConnectError).findDetails(ErrorInfoSchema)[0]?.reason).toBe("storage_unavailable");
    expect((error as ConnectError).rawMessage).not.toContain("/var/lib");
  });

  it("a read-modify-write that kept losing becomes write_conflict", async () => {
    const transport = createRouterTransport(
      (router) =>
        router.service(Health, {
          check: () => {
            throw new WriteConflict("a record this write expected has changed (skills)");
          },
          watch: async function* () {},
        }),
      { router: { interceptors: [storageErrorInterceptor()] } },
    );
    const error = await createClient(Health, transport)
      .check({})
      .catch((thrown: unknown) => ConnectError.from(thrown));
    expect((error as ConnectError).code).toBe(Code.Aborted);
    expect((error as ConnectError).findDetails(ErrorInfoSchema)[0]?.reason).toBe("write_conflict");
  });
});
