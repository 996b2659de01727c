// The records of wasi:filesystem/types@0.2 as jco's glue passes them (camelCase fields, flags as
// objects of booleans, variants as { tag, val }).

export type DescriptorType = "unknown" | "block-device" | "character-device" | "directory" | "fifo" | "symbolic-link" | "regular-file" | "socket";

export interface DescriptorFlags {
  read?: boolean;
  write?: boolean;
  fileIntegritySync?: boolean;
  dataIntegritySync?: boolean;
  requestedWriteSync?: boolean;
  mutateDirectory?: boolean;
}

export interface PathFlags {
  symlinkFollow?: boolean;
}

export interface OpenFlags {
  create?: boolean;
  directory?: boolean;
  exclusive?: boolean;
  truncate?: boolean;
}

export interface Datetime {
  seconds: bigint;
  nanoseconds: number;
}

export interface DescriptorStat {
  type: DescriptorType;
  linkCount: bigint;
  size: bigint;
  dataAccessTimestamp?: Datetime;
  dataModificationTimestamp?: Datetime;
  statusChangeTimestamp?: Datetime;
}

export type NewTimestamp = { tag: "no-change" } | { tag: "now" } | { tag: "timestamp"; val: Datetime };

export interface DirectoryEntry {
  type: DescriptorType;
  name: string;
}

export type Advice = "normal" | "sequential" | "random" | "will-need" | "dont-need" | "no-reuse";

export interface MetadataHashValue {
  lower: bigint;
  upper: bigint;
}
