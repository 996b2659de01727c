import { createHash } from "node:crypto";
import type { SkillContent, SkillRegistry } from "../skills/index.ts";
import { SKILL_MD, skillFileUri } from "./skill-uris.ts";

/** One file of a skill in its entry (the extension's SkillResource). */
export interface SkillResourceEntry {
  uri: string;
  /** `sha256:<64 lowercase hex>` of the file's bytes, as the canonical bundle holds them. */
  digest: string;
  size: number;
}

/** The skills extension's `Skill` entry of `skills/list` and `skills/get`. */
export interface SkillEntry {
  uri: string;
  frontmatter: Record<string, unknown>;
  resources: SkillResourceEntry[];
}

/**
 * What the remembered entries may hold, counted as the characters of their URIs, digests and
 * frontmatter: a skill may have 1000 files with long paths, so a count of entries would not bound it.
 */
const REMEMBERED_CHARS = 8 * 1024 * 1024;

/**
 * Skill entries with their files' digests. The digests come from the bytes of the canonical
 * bundle the skill is bound to (read and checked as any bundle is), never from what a client said;
 * a bundle's hash fixes its files, so an entry is remembered by (workspace, name, content hash)
 * and a skill bound to new content gets a new entry. The workspace is part of the key so that how
 * fast an answer comes tells nothing of another workspace's skills.
 */
export class SkillEntries {
  readonly #registry: SkillRegistry;
  /** In the order they were remembered, oldest first, with their size. */
  readonly #remembered = new Map<string, { entry: SkillEntry; chars: number }>();
  #chars = 0;

  constructor(registry: SkillRegistry) {
    this.#registry = registry;
  }

  /** The entry of the skill's current content (throws the registry's skill_not_found, invalid_skill_name). */
  async entry(workspace: string, name: string): Promise<SkillEntry> {
    const { contentHash } = await this.#registry.get(workspace, name);
    const remembered = this.#remembered.get(`${workspace}/${name}/${contentHash}`);
    if (remembered) return remembered.entry;
    return this.#entryOf(workspace, await this.#registry.content(workspace, name));
  }

  #entryOf(workspace: string, content: SkillContent): SkillEntry {
    const key = `${workspace}/${content.record.name}/${content.record.contentHash}`;
    const remembered = this.#remembered.get(key);
    if (remembered) return remembered.entry;
    const entry = entryOf(content);
    const chars = key.length + JSON.stringify(entry).length;
    if (chars > REMEMBERED_CHARS) return entry;
    for (const [oldest, { chars: size }] of this.#remembered) {
      if (this.#chars + chars <= REMEMBERED_CHARS) break;
      this.#remembered.delete(oldest);
      this.#chars -= size;
    }
    this.#remembered.set(key, { entry, chars });
    this.#chars += chars;
    return entry;
  }
}

/**
 * The frontmatter is SKILL.md's, verbatim as JSON, except `name`: the extension requires it to
 * equal the URI's last segment, which is the name the skill is bound under; a skill bound under a
 * name its frontmatter does not carry gets that name here (docs/mcp.md).
 */
function entryOf({ record, files, frontmatter }: SkillContent): SkillEntry {
  const resources = Array.from(files, ([path, bytes]) => ({
    uri: skillFileUri(record.name, path),
    digest: `sha256:${createHash("sha256").update(bytes).digest("hex")}`,
    size: bytes.byteLength,
  }));
  return { uri: skillFileUri(record.name, SKILL_MD), frontmatter: { ...frontmatter, name: record.name }, resources };
}
