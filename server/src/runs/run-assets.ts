import { randomUUID } from "node:crypto";
import * as fs from "node:fs/promises";
import * as path from "node:path";
import { isId } from "../ids/index.ts";
import type { S3BlobStore } from "../storage/index.ts";

/** Where runs' skill snapshots are kept: the data directory (RunAssets), or the shared bucket (S3RunAssets). */
export interface RunSnapshots {
  put(runId: string, sha256: string, bytes: Uint8Array): Promise<void>;
  read(runId: string, sha256: string): Promise<Uint8Array | undefined>;
  remove(runId: string): Promise<void>;
  sweep(isRecorded: (runId: string) => boolean): Promise<number>;
}

/**
 * Run asset storage (SPEC 3.8): copies of what a run was submitted with, at
 * `<dataDir>/runs/<runId>/assets/<sha256>`, so that re-uploading or deleting a workspace skill
 * after submit changes nothing for the run. Removed with the run (DeleteRun, retention), or,
 * when the run was never recorded, by `sweep` at start-up.
 *
 * A turn stages the bundles it resolved at submit, held in memory, the same bytes (same content
 * hash) the snapshot holds; a run that resumes after a restart reads them from here (docs/runs.md).
 */
export class RunAssets implements RunSnapshots {
  readonly #root: string;

  constructor(dataDir: string) {
    this.#root = path.join(dataDir, "runs");
  }

  /** Stores the bytes durably (written aside, synced, renamed into place). */
  async put(runId: string, sha256: string, bytes: Uint8Array): Promise<void> {
    const dir = path.join(this.#root, runId, "assets");
    await fs.mkdir(dir, { recursive: true, mode: 0o700 });
    const target = path.join(dir, sha256);
    const temporary = `${target}.${randomUUID()}.tmp`;
    const file = await fs.open(temporary, "wx", 0o600);
    try {
      await file.writeFile(bytes);
      await file.sync();
    } finally {
      await file.close();
    }
    await fs.rename(temporary, target);
  }

  /** The snapshot's bytes, or undefined when the run has none of that hash. */
  async read(runId: string, sha256: string): Promise<Uint8Array | undefined> {
    if (!isId("run", runId) || !/^[0-9a-f]{64}$/.test(sha256)) return undefined;
    return fs.readFile(path.join(this.#root, runId, "assets", sha256)).catch((error: NodeJS.ErrnoException) => {
      if (error.code === "ENOENT") return undefined;
      throw error;
    });
  }

  remove(runId: string): Promise<void> {
    return fs.rm(path.join(this.#root, runId), { recursive: true, force: true });
  }

  /**
   * Removes the snapshots of runs that were never recorded (a submission whose record batch
   * failed, or a crash between the snapshot and the batch): every run directory `isRecorded`
   * does not know. Call it before runs are taken: a submission in progress is not recorded yet.
   */
  async sweep(isRecorded: (runId: string) => boolean): Promise<number> {
    const names = await fs.readdir(this.#root).catch((error: NodeJS.ErrnoException) => {
      if (error.code === "ENOENT") return [];
      throw error;
    });
    const orphans = names.filter((name) => isId("run", name) && !isRecorded(name));
    for (const runId of orphans) await this.remove(runId);
    return orphans.length;
  }
}

/** A snapshot left by a submission that was never recorded is removed once it is this old: no submission takes that long. */
const ORPHAN_AGE_MS = 24 * 60 * 60 * 1000;

/**
 * Run snapshots in the shared bucket (`runs/<runId>/<sha256>`), so that a replica that takes a
 * session over resumes its run from the same snapshot (docs/operations.md, "Scaling"). Several
 * replicas submit runs at once, so the start-up sweep removes only snapshots of unrecorded runs
 * older than a day, never one whose submission may still be under way elsewhere.
 */
export class S3RunAssets implements RunSnapshots {
  readonly #bucket: S3BlobStore;

  constructor(bucket: S3BlobStore) {
    this.#bucket = bucket;
  }

  put(runId: string, sha256: string, bytes: Uint8Array): Promise<void> {
    return this.#bucket.putPrivate(`${runId}/${sha256}`, bytes);
  }

  async read(runId: string, sha256: string): Promise<Uint8Array | undefined> {
    if (!isId("run", runId) || !/^[0-9a-f]{64}$/.test(sha256)) return undefined;
    return this.#bucket.readPrivate(`${runId}/${sha256}`);
  }

  async remove(runId: string): Promise<void> {
    for (const { name } of await this.#bucket.listPrivate(`${runId}/`)) await this.#bucket.deletePrivate(name);
  }

  async sweep(isRecorded: (runId: string) => boolean): Promise<number> {
    const before = Date.now() - ORPHAN_AGE_MS;
    const orphans = (await this.#bucket.listPrivate("")).filter(({ name, modified }) => {
      const runId = name.slice(0, name.indexOf("/"));
      return isId("run", runId) && !isRecorded(runId) && modified !== undefined && modified.getTime() < before;
    });
    for (const { name } of orphans) await this.#bucket.deletePrivate(name);
    return new Set(orphans.map(({ name }) => name.slice(0, name.indexOf("/")))).size;
  }
}
