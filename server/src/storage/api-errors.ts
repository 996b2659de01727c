import type { Interceptor } from "@connectrpc/connect";
import { serviceError } from "../errors/index.ts";
import { StorageError } from "./store.ts";

/**
 * The API edge of storage failures: a StorageError escaping a handler (a full disk, an I/O
 * error) becomes `storage_unavailable`, whose message carries none of the database's internals,
 * instead of an opaque `internal`. Streams are covered up to their first message.
 */
export function storageErrorInterceptor(): Interceptor {
  return (next) => async (request) => {
    try {
      return await next(request);
    } catch (error) {
      throw error instanceof StorageError ? serviceError("storage_unavailable", "the metadata store failed; nothing was acknowledged") : error;
    }
  };
}
