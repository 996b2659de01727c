/**
 * What changed between two versions of a skill, for people: which files were added, removed or
 * changed (by path, size and the zip's CRC-32), and a line diff of SKILL.md. No dependencies.
 */

/** One line of a diff: in both texts, only in the newer, or only in the older. */
export interface DiffLine {
  kind: "same" | "added" | "removed";
  text: string;
}

/**
 * Beyond this many cells (lines of the older part times lines of the newer, once the common
 * start and end are set aside) the middle is shown as removed then added, not aligned: the
 * alignment's table would hold that many numbers.
 */
export const MAX_DIFF_CELLS = 4_000_000;

/**
 * The lines of `before` and `after` in order, each marked same, removed or added, so that the
 * same lines are a longest common subsequence of the two (the common start and end first, then
 * a dynamic-programming alignment of the rest). Removed lines come before the added lines that
 * replace them. A final newline does not make an empty last line.
 */
export function lineDiff(before: string, after: string): DiffLine[] {
  const a = lines(before);
  const b = lines(after);
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) start++;
  let endA = a.length;
  let endB = b.length;
  while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) {
    endA--;
    endB--;
  }
  const same = (text: string): DiffLine => ({ kind: "same", text });
  return [...a.slice(0, start).map(same), ...alignMiddle(a.slice(start, endA), b.slice(start, endB)), ...a.slice(endA).map(same)];
}

function lines(text: string): string[] {
  if (text === "") return [];
  const split = text.split("\n");
  if (split.at(-1) === "") split.pop();
  return split;
}

function alignMiddle(a: string[], b: string[]): DiffLine[] {
  const removed = (text: string): DiffLine => ({ kind: "removed", text });
  const added = (text: string): DiffLine => ({ kind: "added", text });
  if (a.length === 0 || b.length === 0 || a.length * b.length > MAX_DIFF_CELLS) return [...a.map(removed), ...b.map(added)];
  // common[i][j]: the longest common subsequence of a[i..] and b[j..], in one flat array.
  const width = b.length + 1;
  const common = new Uint32Array((a.length + 1) * width);
  for (let i = a.length - 1; i >= 0; i--) {
    for (let j = b.length - 1; j >= 0; j--) {
      common[i * width + j] = a[i] === b[j] ? common[(i + 1) * width + j + 1]! + 1 : Math.max(common[(i + 1) * width + j]!, common[i * width + j + 1]!);
    }
  }
  const out: DiffLine[] = [];
  let i = 0;
  let j = 0;
  while (i < a.length && j < b.length) {
    if (a[i] === b[j]) {
      out.push({ kind: "same", text: a[i]! });
      i++;
      j++;
    } else if (common[(i + 1) * width + j]! >= common[i * width + j + 1]!) out.push(removed(a[i++]!));
    else out.push(added(b[j++]!));
  }
  while (i < a.length) out.push(removed(a[i++]!));
  while (j < b.length) out.push(added(b[j++]!));
  return out;
}

/** A file of a version's listing. `crc32` 0: not kept (listings stored before it was). */
export interface ListedFile {
  path: string;
  sizeBytes: number;
  crc32: number;
}

export interface FileChanges {
  added: ListedFile[];
  removed: ListedFile[];
  /** The file in the newer version, with its size in the older. */
  changed: Array<ListedFile & { sizeBeforeBytes: number }>;
}

/** Files only in `after` (added), only in `before` (removed), and in both with other bytes (changed), each by path. */
export function fileChanges(before: readonly ListedFile[], after: readonly ListedFile[]): FileChanges {
  const older = new Map(before.map((file) => [file.path, file]));
  const newer = new Set(after.map((file) => file.path));
  const changes: FileChanges = { added: [], removed: before.filter((file) => !newer.has(file.path)), changed: [] };
  for (const file of after) {
    const old = older.get(file.path);
    if (!old) changes.added.push(file);
    else if (old.sizeBytes !== file.sizeBytes || (old.crc32 !== 0 && file.crc32 !== 0 && old.crc32 !== file.crc32)) {
      changes.changed.push({ ...file, sizeBeforeBytes: old.sizeBytes });
    }
  }
  return changes;
}
