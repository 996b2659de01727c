import type { Interceptor } from "@connectrpc/connect";
import { serviceError } from "../errors/index.ts";
import { StorageError, WriteConflict } from "./store.ts";

/**
 * The API edge of storage failures: a StorageError escaping a handler (a full disk, an I/O
 * error) becomes `storage_unavailable`, whose message carries none of the database's internals,
 * instead of an opaque `internal`; a read-modify-write that kept losing to other writers
 * (`readModifyWrite` gave up) becomes `write_conflict`. Streams are covered up to their first message.
 */
export function storageErrorInterceptor(onStorageError?: () => void): Interceptor {
  return (next) => async (request) => {
    try {
      return await next(request);
    } catch (error) {
      if (error instanceof StorageError) onStorageError?.();
      if (error instanceof StorageError) throw serviceError("storage_unavailable", "the metadata store failed; nothing was acknowledged");
      if (error instanceof WriteConflict) throw serviceError("write_conflict", "the record kept changing under concurrent writers; nothing was written, retry");
      throw error;
    }
  };
}
