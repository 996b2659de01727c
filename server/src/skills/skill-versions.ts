import { prefixEnd, readPage, type ConditionalReads, type Page, type PageRequest, type Store, type Table, type WriteOp } from "../storage/index.ts";
import type { BundleFile } from "./bundle/index.ts";

/** One immutable version of a skill: what a binding of the name to a hash was. */
export interface SkillVersionRecord {
  name: string;
  version: number;
  contentHash: string;
  description: string;
  bundleBytes: number;
  fileCount: number;
  totalFileBytes: number;
  createdAt: string;
  /** The version a rollback copied; absent for a PutSkill. */
  restoredFrom?: number;
  /**
   * Retention is removing it (SkillRetention): a run may not start using it meanwhile. The only
   * change a version record ever sees, and taken back when a run turns out to use it.
   */
  retiring?: true;
}

/** Version numbers in keys: fixed width, so key order is number order. */
const VERSION_DIGITS = 10;
const VERSION_KEY = /^\d{10}$/;

const versionPart = (version: number) => String(version).padStart(VERSION_DIGITS, "0");

/** `<workspace>/<name>/`: names hold no "/", so one skill's range never reaches another's. */
const skillPrefix = (workspace: string, name: string) => `${workspace}/${name}/`;

/**
 * The versions of every skill and what refers to them, keyed under the workspace so that no range
 * read of one workspace reaches another:
 * - `skill-versions` and `skill-version-files` (`<ws>/<name>/<version>`): the version and its file listing;
 * - `skill-bindings` (`<ws>/<hash>`): the versions of the workspace bound to a hash, so the last one
 *   to go releases the workspace's asset (and so maybe the bytes);
 * - `skill-version-runs` (`<ws>/<name>/<version>/<runId>`): the runs that used a version; retention
 *   keeps a version while one of them is retained.
 */
export class SkillVersions {
  readonly #versions: Table<SkillVersionRecord>;
  readonly #files: Table<BundleFile[]>;
  readonly #bindings: Table<string[]>;
  readonly #runs: Table<{ at: string }>;
  readonly #store: Store;

  constructor(store: Store) {
    this.#store = store;
    this.#versions = store.table<SkillVersionRecord>("skill-versions");
    this.#files = store.table<BundleFile[]>("skill-version-files");
    this.#bindings = store.table<string[]>("skill-bindings");
    this.#runs = store.table<{ at: string }>("skill-version-runs");
  }

  get(workspace: string, name: string, version: number): Promise<SkillVersionRecord | undefined> {
    return this.#versions.get(this.#key(workspace, name, version));
  }

  getIn(reads: ConditionalReads, workspace: string, name: string, version: number): Promise<SkillVersionRecord | undefined> {
    return reads.get(this.#versions, this.#key(workspace, name, version));
  }

  files(workspace: string, name: string, version: number): Promise<BundleFile[] | undefined> {
    return this.#files.get(this.#key(workspace, name, version));
  }

  /** Every version of the skill, oldest first (metadata only: a few hundred bytes each). */
  async all(workspace: string, name: string): Promise<SkillVersionRecord[]> {
    const prefix = skillPrefix(workspace, name);
    return this.#versions.values({ gt: prefix, lt: prefixEnd(prefix) });
  }

  /** The highest version number stored for the name, 0 when none (numbers are never reused while versions remain). */
  async highest(workspace: string, name: string): Promise<number> {
    const prefix = skillPrefix(workspace, name);
    const [last] = await this.#versions.values({ gt: prefix, lt: prefixEnd(prefix), reverse: true, limit: 1 });
    return last?.version ?? 0;
  }

  /** A page of the skill's versions, newest first; a page token carries the last version's number. */
  page(workspace: string, name: string, request: PageRequest, maxBytes: number): Promise<Page<SkillVersionRecord>> {
    return readPage(this.#versions, request, { prefix: skillPrefix(workspace, name), reverse: true, isCursor: (cursor) => VERSION_KEY.test(cursor), maxBytes });
  }

  /** Ops that store a new version, its listing and its binding (read as a condition of the batch). */
  async createOps(reads: ConditionalReads, workspace: string, record: SkillVersionRecord, files: BundleFile[]): Promise<WriteOp[]> {
    const key = this.#key(workspace, record.name, record.version);
    const bindingKey = `${workspace}/${record.contentHash}`;
    const bound = (await reads.get(this.#bindings, bindingKey)) ?? [];
    const binding = `${record.name}/${versionPart(record.version)}`;
    return [
      this.#versions.putOp(key, record),
      this.#files.putOp(key, files),
      this.#bindings.putOp(bindingKey, bound.includes(binding) ? bound : [...bound, binding]),
    ];
  }

  /** Ops that mark the version as retiring, or take the mark back. */
  markOp(workspace: string, record: SkillVersionRecord, retiring: boolean): WriteOp {
    const { retiring: _mark, ...rest } = record;
    return this.#versions.putOp(this.#key(workspace, record.name, record.version), retiring ? { ...rest, retiring: true } : rest);
  }

  /**
   * Ops that remove the version, its listing and its binding; `unbound`: no version of the
   * workspace is bound to its hash any more.
   */
  async removeOps(reads: ConditionalReads, workspace: string, record: SkillVersionRecord): Promise<{ ops: WriteOp[]; unbound: boolean }> {
    const key = this.#key(workspace, record.name, record.version);
    const bindingKey = `${workspace}/${record.contentHash}`;
    const binding = `${record.name}/${versionPart(record.version)}`;
    const bound = ((await reads.get(this.#bindings, bindingKey)) ?? []).filter((entry) => entry !== binding);
    const ops = [this.#versions.deleteOp(key), this.#files.deleteOp(key)];
    ops.push(bound.length === 0 ? this.#bindings.deleteOp(bindingKey) : this.#bindings.putOp(bindingKey, bound));
    return { ops, unbound: bound.length === 0 };
  }

  /** Whether any run records that it used the version. */
  async usedByRuns(workspace: string, name: string, version: number): Promise<boolean> {
    const prefix = `${this.#key(workspace, name, version)}/`;
    return (await this.#runs.entries({ gt: prefix, lt: prefixEnd(prefix), limit: 1 })).length > 0;
  }

  /** The op recording that a run used the version. */
  useOp(workspace: string, name: string, version: number, runId: string): WriteOp {
    return this.#runs.putOp(`${this.#key(workspace, name, version)}/${runId}`, { at: new Date().toISOString() });
  }

  /** Forgets that the run used the version. */
  forgetRun(workspace: string, name: string, version: number, runId: string): Promise<void> {
    return this.#runs.delete(`${this.#key(workspace, name, version)}/${runId}`);
  }

  /** Forgets every run's use of a version that is gone. */
  async forgetVersion(workspace: string, name: string, version: number): Promise<void> {
    const prefix = `${this.#key(workspace, name, version)}/`;
    const keys = (await this.#runs.entries({ gt: prefix, lt: prefixEnd(prefix) })).map(([key]) => key);
    if (keys.length > 0) await this.#store.write(keys.map((key) => this.#runs.deleteOp(key)));
  }

  #key(workspace: string, name: string, version: number): string {
    return `${skillPrefix(workspace, name)}${versionPart(version)}`;
  }
}
