import { maxCanonicalArchiveBytes } from "@skillenv/client/bundle";
import type { AssetRecord } from "../assets/index.ts";
import { serviceError } from "../errors/index.ts";
import type { BlobStore } from "../storage/index.ts";
import {
  inspectBundle,
  readBundle,
  SkillMdParsers,
  type BundleLimits,
  type BundleSource,
  type BundleSummary,
  type ReadBundle,
  type SkillMdParser,
} from "./bundle/index.ts";

/** What the skills need of the blob store: ranged reads, from either adapter. */
export type RangedBlobs = Pick<BlobStore, "openRanges">;

/**
 * The bundles skills are bound to, read from the blob store. Reading one is bounded in every
 * resource: the asset's recorded size is checked before a byte is read, the archive is read in
 * ranges and entries are streamed (only SKILL.md is held, or the files when asked for), at most
 * `maxConcurrent` reads run at once, and SKILL.md is parsed on worker threads.
 */
export class StoredBundles {
  readonly #blobs: RangedBlobs;
  readonly #limits: BundleLimits;
  readonly #slots: Slots;
  readonly #parsers: SkillMdParsers;

  constructor(blobs: RangedBlobs, limits: BundleLimits, maxConcurrent: number) {
    this.#blobs = blobs;
    this.#limits = limits;
    this.#slots = new Slots(maxConcurrent);
    this.#parsers = new SkillMdParsers(maxConcurrent);
  }

  /** Validates the bundle, keeping none of its files. */
  inspect(asset: AssetRecord): Promise<BundleSummary> {
    return this.#read(asset, (source, parse) => inspectBundle(source, this.#limits, parse));
  }

  /** Validates the bundle and returns its files. */
  files(asset: AssetRecord): Promise<ReadBundle> {
    return this.#read(asset, (source, parse) => readBundle(source, this.#limits, parse));
  }

  /** readBundle of bytes in memory (a run's snapshot), within the same limits and slots. */
  filesOf(bytes: Uint8Array): Promise<ReadBundle> {
    return this.#slots.run(() => readBundle(bytes, this.#limits, (skillMd) => this.#parsers.parse(skillMd)));
  }

  close(): Promise<void> {
    return this.#parsers.close();
  }

  async #read<T>(asset: AssetRecord, read: (source: BundleSource, parse: SkillMdParser) => Promise<T>): Promise<T> {
    const maxBytes = maxCanonicalArchiveBytes(this.#limits);
    if (asset.sizeBytes > maxBytes) {
      throw serviceError("bundle_too_large", `the archive has ${asset.sizeBytes} bytes; a bundle within the limits has at most ${maxBytes}`);
    }
    return this.#slots.run(async () => {
      const source = await this.#blobs.openRanges(asset.sha256);
      try {
        return await read(source, (bytes) => this.#parsers.parse(bytes));
      } finally {
        await source.close();
      }
    });
  }
}

/** A counting semaphore: at most `count` runs at once, the rest in arrival order. */
class Slots {
  #free: number;
  readonly #waiting: (() => void)[] = [];

  constructor(count: number) {
    this.#free = count;
  }

  async run<T>(work: () => Promise<T>): Promise<T> {
    if (this.#free > 0) this.#free--;
    else await new Promise<void>((resolve) => this.#waiting.push(resolve));
    try {
      return await work();
    } finally {
      // Hand the slot straight to the next in line, or give it back.
      const next = this.#waiting.shift();
      if (next) next();
      else this.#free++;
    }
  }
}
