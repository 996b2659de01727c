// What a guest's files cost against a quota: the one definition of usage, used by every
// operation that changes it and by measureUsage, so that an account and a measurement agree.
//
// Usage of a tree = the apparent size of each regular file, counted once per inode (hard links
// share it), + ENTRY_BYTES for every directory entry in it (file, directory, symlink, each hard
// link). The directory at its root is not an entry of the tree.

/** What one directory entry costs, whatever it is. */
export const ENTRY_BYTES = 4096;

/** The fields of an lstat this definition reads (Node's Stats or BigIntStats). */
export interface EntryFacts {
  isFile(): boolean;
  size: number | bigint;
  nlink: number | bigint;
  dev: number | bigint;
  ino: number | bigint;
}

/** What an existing entry adds to a measurement: its size only if its inode is not counted yet. */
export function entryUsage(facts: EntryFacts, countedInodes: Set<string>): number {
  if (!facts.isFile()) return ENTRY_BYTES;
  const inode = `${facts.dev}:${facts.ino}`;
  if (countedInodes.has(inode)) return ENTRY_BYTES;
  countedInodes.add(inode);
  return ENTRY_BYTES + Number(facts.size);
}

/** What removing an entry frees: its size goes with the last link of a file. */
export function removedUsage(facts: EntryFacts): number {
  return ENTRY_BYTES + (facts.isFile() && Number(facts.nlink) <= 1 ? Number(facts.size) : 0);
}

/**
 * What an entry costs in another account it moves into: all of it (the size even when another link
 * stays behind, since the destination measures the file on its own).
 */
export function movedUsage(facts: EntryFacts): number {
  return ENTRY_BYTES + (facts.isFile() ? Number(facts.size) : 0);
}

/** What a file's growth from `before` to `after` bytes costs (shrinking is a release of the rest). */
export function growth(before: number, after: number): number {
  return Math.max(0, after - before);
}
