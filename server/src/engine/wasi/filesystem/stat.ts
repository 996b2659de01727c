// Host metadata as WASI records, and WASI timestamps as what Node's utimes calls take.
import type { BigIntStats, Dirent } from "node:fs";
import type { Datetime, DescriptorStat, DescriptorType, MetadataHashValue, NewTimestamp } from "./types.ts";

const NS_PER_SECOND = 1_000_000_000n;

type Typed = Pick<Dirent, "isFile" | "isDirectory" | "isSymbolicLink" | "isFIFO" | "isSocket" | "isCharacterDevice" | "isBlockDevice">;

export function descriptorType(entry: Typed): DescriptorType {
  if (entry.isFile()) return "regular-file";
  if (entry.isDirectory()) return "directory";
  if (entry.isSymbolicLink()) return "symbolic-link";
  if (entry.isFIFO()) return "fifo";
  if (entry.isSocket()) return "socket";
  if (entry.isCharacterDevice()) return "character-device";
  if (entry.isBlockDevice()) return "block-device";
  return "unknown";
}

export function datetime(ns: bigint): Datetime {
  let seconds = ns / NS_PER_SECOND;
  let rest = ns % NS_PER_SECOND;
  if (rest < 0n) {
    rest += NS_PER_SECOND;
    seconds -= 1n;
  }
  return { seconds, nanoseconds: Number(rest) };
}

export function descriptorStat(stats: BigIntStats): DescriptorStat {
  return {
    type: descriptorType(stats),
    linkCount: stats.nlink,
    size: stats.size,
    dataAccessTimestamp: datetime(stats.atimeNs),
    dataModificationTimestamp: datetime(stats.mtimeNs),
    statusChangeTimestamp: datetime(stats.ctimeNs),
  };
}

/** As preview2-shim computes it: the modification time and the inode. */
export function metadataHash(stats: BigIntStats): MetadataHashValue {
  return { upper: stats.mtimeNs, lower: stats.ino };
}

/**
 * Access and modification times in seconds (what Node's utimes family takes). Node cannot leave
 * one unchanged, so `no-change` re-applies the current value from `current` (read only if needed).
 */
export function utimes(access: NewTimestamp, modification: NewTimestamp, current: () => BigIntStats): [number, number] {
  let stats: BigIntStats | undefined;
  const now = Date.now() / 1000;
  const seconds = (timestamp: NewTimestamp, field: "atimeNs" | "mtimeNs"): number => {
    switch (timestamp?.tag) {
      case "no-change":
        stats ??= current();
        return Number(stats[field]) / 1e9;
      case "now":
        return now;
      case "timestamp": {
        const { seconds: whole, nanoseconds } = timestamp.val;
        if (typeof whole !== "bigint" || !Number.isInteger(nanoseconds) || nanoseconds < 0 || nanoseconds >= 1e9) throw "invalid";
        return Number(whole) + nanoseconds / 1e9;
      }
      default:
        throw "invalid";
    }
  };
  return [seconds(access, "atimeNs"), seconds(modification, "mtimeNs")];
}
