/**
 * The collection of content bytes (BundleCollector) against writes of the same bytes, step by
 * step: a collection's delete is held at a gate while another "replica" (a second collector on
 * its own connection, on PostgreSQL) writes, so every interleaving the protocol must survive is
 * reached on purpose, not by chance. On LevelDB and on PostgreSQL, with real file blobs.
 */
import { createHash } from "node:crypto";
import * as fs from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import { Level } from "level";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BundleCollector } from "../../src/assets/bundle-holders.ts";
import { FileBlobStore, LevelStore, openPostgresStore, readModifyWrite, type BlobStore, type Store, type Table } from "../../src/storage/index.ts";
import { startPostgres, type TestPostgres } from "../helpers/postgres.ts";

const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

async function* once(bytes: Uint8Array): AsyncGenerator<Uint8Array> {
  yield bytes;
}

/** A blob store whose deletes wait at a gate the test opens, and say when they reach it. */
class GatedBlobs {
  readonly inner: BlobStore;
  #open = Promise.resolve();
  #release = () => {};
  reached: Promise<void> = Promise.resolve();
  #reached = () => {};

  constructor(inner: BlobStore) {
    this.inner = inner;
  }

  close(): void {
    this.#open = new Promise((resolve) => (this.#release = resolve));
    this.reached = new Promise((resolve) => (this.#reached = resolve));
  }

  open(): void {
    this.#release();
  }

  stat = (hash: string) => this.inner.stat(hash);
  delete = async (hash: string) => {
    this.#reached();
    await this.#open;
    await this.inner.delete(hash);
  };
}

/** A store that counts reads of one table's key, to know that a waiter has looked again. */
function countingReads(store: Store, table: string): { store: Store; reads: (key: string) => number } {
  const counts = new Map<string, number>();
  return {
    reads: (key) => counts.get(key) ?? 0,
    store: {
      write: (ops) => store.write(ops),
      observeCommits: (observer) => store.observeCommits(observer),
      close: () => store.close(),
      table<V>(name: string): Table<V> {
        const inner = store.table<V>(name);
        if (name !== table) return inner;
        const get = (key: string) => {
          counts.set(key, (counts.get(key) ?? 0) + 1);
          return inner.get(key);
        };
        return new Proxy(inner, {
          get(target, property) {
            if (property === "get") return get;
            const value = Reflect.get(target, property, target);
            return typeof value === "function" ? value.bind(target) : value;
          },
        });
      },
    },
  };
}

interface Replicas {
  stores: [Store, Store];
  close(): Promise<void>;
}

function collectorContract(open: () => Promise<Replicas>) {
  let replicas: Replicas;
  let blobDir: string;
  let files: FileBlobStore;
  beforeAll(async () => {
    replicas = await open();
    blobDir = await fs.mkdtemp(path.join(os.tmpdir(), "skillenv-collector-"));
    files = await FileBlobStore.open(blobDir);
  });
  afterAll(async () => {
    await replicas?.close();
    if (blobDir) await fs.rm(blobDir, { recursive: true, force: true });
  });

  const options = { writeHoldMs: 60 * 60 * 1000, staleCollectionMs: 10 * 60 * 1000, pollMs: 1 };

  /** Writes the bytes as a workspace's upload does: held, written, then finalized into a holder. */
  async function upload(collector: BundleCollector, store: Store, workspace: string, bytes: Uint8Array): Promise<boolean> {
    const hash = sha256(bytes);
    await collector.beforeWrite(workspace, hash);
    await files.write({ sha256: hash, sizeBytes: bytes.length }, once(bytes));
    return finalize(collector, store, workspace, hash);
  }

  async function finalize(collector: BundleCollector, store: Store, workspace: string, hash: string): Promise<boolean> {
    return readModifyWrite(store, async (reads) => {
      const ops = await collector.holdOps(reads, workspace, hash);
      return { ops: ops ?? [], result: ops !== undefined };
    });
  }

  /** The workspace's last use of the bytes goes; true when nobody holds them then. */
  async function release(collector: BundleCollector, store: Store, workspace: string, hash: string): Promise<boolean> {
    return readModifyWrite(store, async (reads) => {
      const { ops, collect } = await collector.releaseOps(reads, workspace, hash);
      return { ops, result: collect };
    });
  }

  it("collects bytes nobody holds, and only then", async () => {
    const [store] = replicas.stores;
    const collector = new BundleCollector(store, files, options);
    const bytes = new TextEncoder().encode(`plain ${Math.random()}`);
    const hash = sha256(bytes);
    expect(await upload(collector, store, "a", bytes)).toBe(true);
    expect(await upload(collector, store, "b", bytes)).toBe(true);
    expect(await release(collector, store, "a", hash)).toBe(false);
    expect(await collector.collect(hash)).toBe(false);
    expect(await files.stat(hash)).toBe(bytes.length);
    expect(await release(collector, store, "b", hash)).toBe(true);
    expect(await collector.collect(hash)).toBe(true);
    expect(await files.stat(hash)).toBeUndefined();
  });

  it("a write that meets a collection under way waits for its delete, then stores the bytes again: nothing is lost", async () => {
    const [storeA, storeB] = replicas.stores;
    const gated = new GatedBlobs(files);
    const counted = countingReads(storeB, "blob-collections");
    const collecting = new BundleCollector(storeA, gated, options);
    const writing = new BundleCollector(counted.store, files, options);
    const bytes = new TextEncoder().encode(`raced ${Math.random()}`);
    const hash = sha256(bytes);
    await upload(collecting, storeA, "a", bytes);
    expect(await release(collecting, storeA, "a", hash)).toBe(true);

    gated.close();
    const order: string[] = [];
    const collected = collecting.collect(hash).then((deleted) => order.push(`collected:${deleted}`));
    await gated.reached;
    // The claim is made and the delete is about to run: another replica starts writing the same bytes.
    const held = writing.beforeWrite("b", hash).then(() => order.push("held"));
    // It has looked at the claim twice (so it is waiting, not done), and is still not through.
    while (counted.reads(hash) < 2 && order.length === 0) await new Promise((resolve) => setImmediate(resolve));
    expect(order).toEqual([]);
    gated.open();
    await Promise.all([collected, held]);
    expect(order).toEqual(["collected:true", "held"]);

    await files.write({ sha256: hash, sizeBytes: bytes.length }, once(bytes));
    expect(await finalize(writing, counted.store, "b", hash)).toBe(true);
    expect(await collecting.collect(hash)).toBe(false);
    expect(await files.stat(hash)).toBe(bytes.length);
  });

  it("a collection that starts after a write's hold deletes nothing", async () => {
    const [storeA, storeB] = replicas.stores;
    const a = new BundleCollector(storeA, files, options);
    const b = new BundleCollector(storeB, files, options);
    const bytes = new TextEncoder().encode(`held first ${Math.random()}`);
    const hash = sha256(bytes);
    await upload(a, storeA, "a", bytes);
    // B holds the bytes for its upload (not finalized yet) when A's last use goes.
    await b.beforeWrite("b", hash);
    expect(await release(a, storeA, "a", hash)).toBe(false);
    expect(await a.collect(hash)).toBe(false);
    expect(await a.sweep()).toBe(0);
    expect(await files.stat(hash)).toBe(bytes.length);
    expect(await finalize(b, storeB, "b", hash)).toBe(true);
  });

  it("a finalize after the bytes were collected records nothing (the upload is asked for again)", async () => {
    const [store] = replicas.stores;
    const collector = new BundleCollector(store, files, options);
    const bytes = new TextEncoder().encode(`collected before finalize ${Math.random()}`);
    const hash = sha256(bytes);
    await upload(collector, store, "a", bytes);
    await release(collector, store, "a", hash);
    expect(await collector.collect(hash)).toBe(true);
    expect(await finalize(collector, store, "b", hash)).toBe(false);
  });

  it("bytes stored before holders were kept are never collected", async () => {
    const [store] = replicas.stores;
    const collector = new BundleCollector(store, files, options);
    const bytes = new TextEncoder().encode(`legacy ${Math.random()}`);
    const hash = sha256(bytes);
    await files.write({ sha256: hash, sizeBytes: bytes.length }, once(bytes));
    expect(await finalize(collector, store, "a", hash)).toBe(true);
    await release(collector, store, "a", hash);
    expect(await collector.collect(hash)).toBe(false);
    expect(await files.stat(hash)).toBe(bytes.length);
  });

  it("bytes an artifact stores under the same hash are kept for good, even after every workspace released them", async () => {
    const [store] = replicas.stores;
    const collector = new BundleCollector(store, files, options);
    const bytes = new TextEncoder().encode(`admitted too ${Math.random()}`);
    const hash = sha256(bytes);
    await upload(collector, store, "a", bytes);
    await collector.keepForGood(hash);
    expect(await release(collector, store, "a", hash)).toBe(false);
    expect(await collector.collect(hash)).toBe(false);
    expect(await files.stat(hash)).toBe(bytes.length);
  });

  it("the sweep finishes a collection whose collector died, and collects a write that never finalized", async () => {
    const [store] = replicas.stores;
    const failing = new BundleCollector(
      store,
      {
        stat: (hash) => files.stat(hash),
        delete: async () => {
          throw new Error("the process died here");
        },
      },
      options,
    );
    const bytes = new TextEncoder().encode(`died ${Math.random()}`);
    const hash = sha256(bytes);
    await upload(failing, store, "a", bytes);
    await release(failing, store, "a", hash);
    await expect(failing.collect(hash)).rejects.toThrow("the process died here");
    expect(await files.stat(hash)).toBe(bytes.length);
    // Not stale yet: the sweep leaves the claim alone.
    const patient = new BundleCollector(store, files, options);
    await patient.sweep();
    expect(await files.stat(hash)).toBe(bytes.length);
    const sweeper = new BundleCollector(store, files, { ...options, staleCollectionMs: -1, writeHoldMs: -1 });
    const orphan = new TextEncoder().encode(`never finalized ${Math.random()}`);
    await sweeper.beforeWrite("a", sha256(orphan));
    await files.write({ sha256: sha256(orphan), sizeBytes: orphan.length }, once(orphan));
    expect(await sweeper.sweep()).toBeGreaterThanOrEqual(2);
    expect(await files.stat(hash)).toBeUndefined();
    expect(await files.stat(sha256(orphan))).toBeUndefined();
  });
}

describe("the bundle collector on LevelDB", () => {
  collectorContract(async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), "skillenv-collector-store-"));
    const db = new Level<string, string>(dir);
    await db.open();
    const store = new LevelStore(db);
    // LevelDB admits one process: its second writer is another caller in the same one.
    return {
      stores: [store, store],
      close: async () => {
        await store.close();
        await fs.rm(dir, { recursive: true, force: true });
      },
    };
  });
});

describe("the bundle collector on PostgreSQL, two replicas", () => {
  let server: TestPostgres;
  beforeAll(async () => {
    server = await startPostgres();
  });
  afterAll(() => server?.stop());

  collectorContract(async () => {
    const url = await server.createDatabase();
    const stores: [Store, Store] = [await openPostgresStore(url), await openPostgresStore(url)];
    return { stores, close: async () => void (await Promise.all(stores.map((store) => store.close()))) };
  });
});
