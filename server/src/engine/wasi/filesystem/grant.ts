import type { FileTable } from "./file-table.ts";
import type { QuotaAccount } from "./quota.ts";

/** What a preopen grants: every descriptor opened through it inherits it. */
export interface Grant {
  /** Every write, create, truncate, removal, rename, link, symlink and time change is `read-only`. */
  readOnly: boolean;
  /** Where growth is reserved (UNLIMITED when the preopen has no quota). */
  account: QuotaAccount;
  /** The invocation's fds and open objects. */
  table: FileTable;
}

/** Throws `read-only` unless the grant allows changes. */
export function mutable(grant: Grant): void {
  if (grant.readOnly) throw "read-only";
}
