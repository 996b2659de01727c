import { randomUUID } from "node:crypto";
import * as fs from "node:fs/promises";
import * as path from "node:path";
import { Readable } from "node:stream";
import { verifiedChunks, type BlobRanges, type BlobStore, type ExpectedContent, type Sha256Hex } from "./blob-store.ts";

/**
 * Blobs as files: blobs/sha256/ab/<hash>. A write goes to blobs/tmp, is hashed and counted as
 * it streams, fsynced, then renamed into place, so a crash leaves either nothing or a complete,
 * verified file. Leftover temp files from a crash are removed at open.
 */
export class FileBlobStore implements BlobStore {
  readonly #root: string;
  readonly #tmp: string;

  private constructor(root: string) {
    this.#root = path.join(root, "sha256");
    this.#tmp = path.join(root, "tmp");
  }

  static async open(dataDir: string): Promise<FileBlobStore> {
    const store = new FileBlobStore(path.join(dataDir, "blobs"));
    await fs.rm(store.#tmp, { recursive: true, force: true });
    await fs.mkdir(store.#tmp, { recursive: true });
    await fs.mkdir(store.#root, { recursive: true });
    return store;
  }

  async stat(sha256: Sha256Hex): Promise<number | undefined> {
    try {
      return (await fs.stat(this.#pathOf(sha256))).size;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
      throw error;
    }
  }

  async read(sha256: Sha256Hex): Promise<Uint8Array> {
    return fs.readFile(this.#pathOf(sha256));
  }

  async openRanges(sha256: Sha256Hex): Promise<BlobRanges> {
    const handle = await fs.open(this.#pathOf(sha256), "r");
    const { size } = await handle.stat();
    const read = async (start: number, end: number): Promise<Buffer> => {
      const buffer = Buffer.alloc(Math.max(0, Math.min(end, size) - start));
      if (buffer.length === 0) return buffer;
      const { bytesRead } = await handle.read(buffer, 0, buffer.length, start);
      return buffer.subarray(0, bytesRead);
    };
    async function* chunks(start: number, end: number): AsyncGenerator<Buffer> {
      for (let position = start; position < end; ) {
        const chunk = await read(position, Math.min(end, position + RANGE_CHUNK_BYTES));
        if (chunk.length === 0) return;
        yield chunk;
        position += chunk.length;
      }
    }
    // Not handle.createReadStream: destroying such a stream closes the handle, which later ranges still need.
    return { size, read, stream: (start, end) => Readable.from(chunks(start, end), { objectMode: false }), close: () => handle.close() };
  }

  /**
   * Writes even when the blob exists, which costs the same either way: skipping the write and its
   * fsync for bytes another workspace stored would answer measurably faster, telling this one so.
   * Blobs are immutable, so the new copy of existing content is then dropped, not renamed over it.
   */
  async write(expected: ExpectedContent, source: AsyncIterable<Uint8Array>): Promise<void> {
    const tmpPath = path.join(this.#tmp, randomUUID());
    const file = await fs.open(tmpPath, "wx", 0o600);
    try {
      for await (const chunk of verifiedChunks(source, expected)) await file.write(chunk);
      await file.sync();
      await file.close();
      const finalPath = this.#pathOf(expected.sha256);
      await fs.mkdir(path.dirname(finalPath), { recursive: true });
      if ((await this.stat(expected.sha256)) === undefined) await fs.rename(tmpPath, finalPath);
      else await fs.rm(tmpPath);
      await syncDirectory(path.dirname(finalPath));
    } catch (error) {
      await file.close().catch(() => {});
      await fs.rm(tmpPath, { force: true });
      throw error;
    }
  }

  async delete(sha256: Sha256Hex): Promise<void> {
    const file = this.#pathOf(sha256);
    await fs.rm(file, { force: true });
    await syncDirectory(path.dirname(file)).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== "ENOENT") throw error;
    });
  }

  #pathOf(sha256: Sha256Hex): string {
    return path.join(this.#root, sha256.slice(0, 2), sha256);
  }
}

const RANGE_CHUNK_BYTES = 64 * 1024;

/** Makes the rename durable: on Linux a directory entry survives a crash only once its directory is synced. */
async function syncDirectory(dir: string): Promise<void> {
  const handle = await fs.open(dir, "r");
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}
