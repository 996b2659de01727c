import { createHash } from "node:crypto";
import type { Assets } from "../assets/index.ts";
import { checkSha256 } from "../assets/index.ts";
import { serviceError } from "../errors/index.ts";
import { KeyedLock, type BlobStore, type Sha256Hex } from "../storage/index.ts";
import type { ArtifactRecord, ArtifactRecords } from "./artifact-records.ts";
import { checkComponent } from "./component-world.ts";
import { KIND_LABELS, type ArtifactKind, type ComponentKind } from "./kinds.ts";

export interface AdmissionLimits {
  /** Largest component, inline or by asset reference. */
  maxComponentBytes: number;
  /** Largest component carried in the request itself (REST body or gRPC/Connect field). */
  maxInlineComponentBytes: number;
  maxSourceBytes: number;
}

/** Where a component's bytes come from; each source has its size limit. */
export type ComponentSource =
  /** Carried in the request (REST body or gRPC/Connect field): the inline limit. */
  | { inline: Uint8Array }
  /** A finalized asset of the workspace: the component limit. */
  | { assetSha256: string }
  /** Read by the server itself, e.g. from the preparation file: the component limit. */
  | { local: Uint8Array };

/**
 * Admission of artifacts into a workspace. Validation happens before any write, so a refused
 * artifact leaves nothing behind; the same bytes admitted again change nothing.
 */
export class Admission {
  readonly #records: ArtifactRecords;
  readonly #blobs: BlobStore;
  readonly #assets: Assets;
  readonly #limits: AdmissionLimits;
  readonly #lock = new KeyedLock();

  constructor(records: ArtifactRecords, blobs: BlobStore, assets: Assets, limits: AdmissionLimits) {
    this.#records = records;
    this.#blobs = blobs;
    this.#assets = assets;
    this.#limits = limits;
  }

  async admitComponent(workspace: string, kind: ComponentKind, source: ComponentSource): Promise<ArtifactRecord> {
    const bytes = await this.#componentBytes(workspace, source);
    return this.#admit(workspace, kind, bytes, () => checkComponent(bytes, kind));
  }

  async admitProgram(workspace: string, source: Uint8Array): Promise<ArtifactRecord> {
    if (source.byteLength > this.#limits.maxSourceBytes) {
      throw serviceError("source_too_large", `the program source has ${source.byteLength} bytes, the limit is ${this.#limits.maxSourceBytes}`, {
        maxBytes: String(this.#limits.maxSourceBytes),
      });
    }
    if (source.byteLength === 0) throw serviceError("invalid_argument", "the program source is empty");
    decodeUtf8(source);
    return this.#admit(workspace, "program", source, () => ({}));
  }

  /** The workspace's admission record; not_found for ids it did not admit (whoever else did). */
  async get(workspace: string, kind: ArtifactKind, id: string): Promise<ArtifactRecord> {
    const record = await this.#records.get(workspace, kind, checkSha256(id));
    if (!record) throw serviceError("not_found", `no ${KIND_LABELS[kind]} with id ${id} is admitted in this workspace`);
    return record;
  }

  /** An artifact's bytes. Callers resolve the id through get() first, which checks the workspace. */
  async bytes(id: Sha256Hex): Promise<Uint8Array> {
    return this.#blobs.read(checkSha256(id));
  }

  async source(workspace: string, programId: string): Promise<string> {
    await this.get(workspace, "program", programId);
    return decodeUtf8(await this.bytes(programId));
  }

  async #componentBytes(workspace: string, source: ComponentSource): Promise<Uint8Array> {
    const { maxComponentBytes, maxInlineComponentBytes } = this.#limits;
    if ("assetSha256" in source) return this.#assetComponent(workspace, source.assetSha256);
    if ("local" in source) {
      checkComponentSize(source.local.byteLength, maxComponentBytes);
      return source.local;
    }
    const advice = `; upload it as an asset and admit it by assetSha256 (up to ${maxComponentBytes} bytes)`;
    checkComponentSize(source.inline.byteLength, Math.min(maxInlineComponentBytes, maxComponentBytes), advice);
    return source.inline;
  }

  async #assetComponent(workspace: string, assetSha256: string): Promise<Uint8Array> {
    const notFound = () => serviceError("asset_not_found", `this workspace has no finalized asset ${assetSha256}; upload the component first`);
    const asset = await this.#assets.finalized(workspace, checkSha256(assetSha256));
    if (!asset) throw notFound();
    // Checked on the record, so an oversized asset is refused without being read.
    checkComponentSize(asset.sizeBytes, this.#limits.maxComponentBytes);
    const bytes = await this.#assets.read(workspace, asset.sha256);
    if (!bytes) throw notFound();
    return bytes;
  }

  /**
   * Records the admission unless the workspace already has it. Checks run only for new
   * admissions, and a new admission always writes the bytes, even when another workspace stored
   * them before: skipping the write and its fsync would answer measurably faster, telling this
   * workspace that someone else has the bytes.
   */
  async #admit(workspace: string, kind: ArtifactKind, bytes: Uint8Array, check: () => Pick<ArtifactRecord, "world" | "imports">): Promise<ArtifactRecord> {
    const id = createHash("sha256").update(bytes).digest("hex");
    // The lock spares this process's concurrent admissions the checks and the write; putIfAbsent
    // keeps admissions by several processes to one record.
    return this.#lock.run(`${workspace}/${kind}/${id}`, async () => {
      const existing = await this.#records.get(workspace, kind, id);
      if (existing) return existing;
      const record: ArtifactRecord = { kind, id, sizeBytes: bytes.byteLength, admittedAt: new Date().toISOString(), ...check() };
      // Artifacts read their bytes by id and hold no asset record: the collection must never take them.
      await this.#assets.keepForGood(id);
      await this.#blobs.write({ sha256: id, sizeBytes: bytes.byteLength }, once(bytes));
      return this.#records.putIfAbsent(workspace, record);
    });
  }
}

function checkComponentSize(sizeBytes: number, limit: number, advice = ""): void {
  if (sizeBytes > limit) {
    throw serviceError("component_too_large", `the component has ${sizeBytes} bytes, the limit is ${limit}${advice}`, { maxBytes: String(limit) });
  }
}

function decodeUtf8(bytes: Uint8Array): string {
  try {
    return new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch {
    throw serviceError("source_not_utf8", "the program source is not valid UTF-8");
  }
}

async function* once(bytes: Uint8Array): AsyncIterable<Uint8Array> {
  yield bytes;
}
