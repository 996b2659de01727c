export { GuestFilesystem } from "./guest-filesystem.ts";
export type { GuestFilesystemOptions, PreopenDirectory } from "./guest-filesystem.ts";
export type { Descriptor } from "./descriptor.ts";
export { filesystemTypes, ioStreams, Pollable } from "./namespaces.ts";
export { LocalQuota } from "./quota.ts";
export type { QuotaAccount } from "./quota.ts";
export { ENTRY_BYTES } from "./usage.ts";
export { measureUsage } from "./measure-usage.ts";
