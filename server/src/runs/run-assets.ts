import { randomUUID } from "node:crypto";
import * as fs from "node:fs/promises";
import * as path from "node:path";

/**
 * Run asset storage (SPEC 3.8): copies of what a run was submitted with, at
 * `<dataDir>/runs/<runId>/assets/<sha256>`, so that re-uploading or deleting a workspace skill
 * after submit changes nothing for the run. Removed with the run (DeleteRun, retention).
 */
export class RunAssets {
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

  read(runId: string, sha256: string): Promise<Uint8Array> {
    return fs.readFile(path.join(this.#root, runId, "assets", sha256));
  }

  async has(runId: string, sha256: string): Promise<boolean> {
    return fs.stat(path.join(this.#root, runId, "assets", sha256)).then(
      () => true,
      () => false,
    );
  }

  remove(runId: string): Promise<void> {
    return fs.rm(path.join(this.#root, runId), { recursive: true, force: true });
  }
}
