import { BundleFormatError, canonicalZip, decodeSkillMd, parseSkillMd, resolveSkillName, sha256Hex, SKILL_MD_PATH } from "../bundle/index.ts";
import type { FetchFunction } from "../assets.ts";
import { SkillSourceError } from "./skill-source-error.ts";
import { unzip } from "./unzip.ts";

/** A skill ready to upload: resolved name and canonical bytes. */
export interface SkillBundle {
  name: string;
  description: string;
  zip: Uint8Array;
  contentHash: string;
  /** Path -> bytes of every file: what the bundle limits are checked against before an upload. */
  fileSizes: ReadonlyMap<string, number>;
}

interface LoadedFiles {
  files: Map<string, Uint8Array>;
  directoryBasename?: string;
}

type Loader = () => Promise<LoadedFiles>;

export interface FromUrlOptions {
  name?: string;
  /** Expected SHA-256 (hex) of the downloaded archive; a mismatch refuses it. */
  sha256?: string;
  /** Download timeout; default 30 s. */
  timeoutMs?: number;
  /** Default: the global fetch. */
  fetch?: FetchFunction;
}

export type FileContents = Uint8Array | string;

/**
 * A skill to upload. Factories only record where the skill comes from; reading, zipping and
 * hashing happen on first use (bundle()), once, and every source yields canonical bytes.
 */
export class Skill {
  readonly #load: Loader;
  readonly #name: string | undefined;
  #bundle: Promise<SkillBundle> | undefined;

  private constructor(load: Loader, name: string | undefined) {
    this.#load = load;
    this.#name = name;
  }

  /** A folder with SKILL.md at its root (filesystem runtimes only). */
  static fromDir(rootDir: string, options: { name?: string } = {}): Skill {
    return new Skill(async () => {
      const { readSkillDirectory } = await import("./read-directory.ts");
      return readSkillDirectory(rootDir);
    }, options.name);
  }

  /** A zip archive (SKILL.md at its root) behind a URL, e.g. a signed object-store URL. */
  static fromUrl(url: string | URL, options: FromUrlOptions = {}): Skill {
    return new Skill(async () => ({ files: await unzip(await download(String(url), options)) }), options.name);
  }

  static fromFiles(options: { name?: string; files: Readonly<Record<string, FileContents>> | ReadonlyMap<string, FileContents> }): Skill {
    const entries = options.files instanceof Map ? [...options.files] : Object.entries(options.files);
    return new Skill(async () => ({ files: new Map(entries.map(([path, data]) => [path, toBytes(data)])) }), options.name);
  }

  /** A skill that is only its SKILL.md. */
  static fromContent(skillMd: string, options: { name?: string } = {}): Skill {
    return Skill.fromFiles({ name: options.name, files: { [SKILL_MD_PATH]: skillMd } });
  }

  /** A pre-zipped bundle in any zip layout; it is re-emitted in canonical form. */
  static fromBytes(options: { name?: string; zip: Uint8Array }): Skill {
    return new Skill(async () => ({ files: await unzip(options.zip) }), options.name);
  }

  /** Reads, validates, zips and hashes the skill, once; a failure is not cached, so a retry reads again. */
  bundle(): Promise<SkillBundle> {
    this.#bundle ??= this.#build().catch((error: unknown) => {
      this.#bundle = undefined;
      throw error;
    });
    return this.#bundle;
  }

  async #build(): Promise<SkillBundle> {
    const { files, directoryBasename } = await this.#load();
    const skillMd = files.get(SKILL_MD_PATH);
    if (!skillMd) throw new BundleFormatError("bundle_missing_skill_md", "the skill has no SKILL.md at its root");
    const parsed = parseSkillMd(decodeSkillMd(skillMd));
    const name = resolveSkillName({ name: this.#name, frontmatterName: parsed.name, directoryBasename });
    const zip = canonicalZip(files);
    const fileSizes = new Map(Array.from(files, ([path, data]) => [path, data.byteLength]));
    return { name, description: parsed.description, zip, contentHash: await sha256Hex(zip), fileSizes };
  }
}

/** The body of a 2xx answer; anything else (a refused connection, a timeout, an error status) throws. */
async function fetchBytes(fetchFn: FetchFunction, url: string, timeoutMs: number): Promise<Uint8Array> {
  const response = await fetchFn(url, { signal: AbortSignal.timeout(timeoutMs) });
  if (!response.ok) throw new Error(`HTTP ${response.status}`);
  return new Uint8Array(await response.arrayBuffer());
}

function toBytes(data: FileContents): Uint8Array {
  return typeof data === "string" ? new TextEncoder().encode(data) : data;
}

async function download(url: string, options: FromUrlOptions): Promise<Uint8Array> {
  const fetchFn = options.fetch ?? (globalThis.fetch as FetchFunction | undefined);
  if (!fetchFn) throw new Error("Skill.fromUrl needs a global fetch or a fetch option");
  const bytes = await fetchBytes(fetchFn, url, options.timeoutMs ?? 30_000).catch((error: unknown) => {
    throw new SkillSourceError("download_failed", `downloading the skill failed: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  });
  if (options.sha256 !== undefined) {
    const actual = await sha256Hex(bytes);
    if (actual !== options.sha256.toLowerCase()) {
      throw new SkillSourceError("download_failed", `the downloaded skill hashes to ${actual}, expected ${options.sha256}`);
    }
  }
  return bytes;
}
