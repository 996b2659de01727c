export { DEFAULT_MAX_OPEN_FILES, GuestFilesystem, SECRETS_PATH } from "./guest-filesystem.ts";
export type { GuestFilesystemOptions, PreopenDirectory } from "./guest-filesystem.ts";
export type { Descriptor, DirectoryEntryStream } from "./descriptor.ts";
export { filesystemTypes, ioStreams, Pollable } from "./namespaces.ts";
export { LocalQuota } from "./quota.ts";
export type { QuotaAccount } from "./quota.ts";
export { ENTRY_BYTES } from "./usage.ts";
export { measureUsage } from "./measure-usage.ts";
export type { ErrorCode } from "./error-code.ts";
