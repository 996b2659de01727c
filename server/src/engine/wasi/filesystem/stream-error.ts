// wasi:io/streams errors of this filesystem's streams, and filesystem-error-code for every stream
// a guest has (ours and preview2-shim's).
import type { ErrorCode } from "./error-code.ts";
import { IoError, shimFilesystemErrorCode } from "./shim.ts";

export type StreamError = { tag: "closed" } | { tag: "last-operation-failed"; val: object };

/** End of file, or a stream that can say no more. */
export const CLOSED: StreamError = Object.freeze({ tag: "closed" });

/** The filesystem codes of the wasi:io/error objects made here (their payload is the bare code: no host detail). */
const codes = new WeakMap<object, ErrorCode>();

/** A failed stream operation whose filesystem-error-code is `code`. */
export function failed(code: ErrorCode): StreamError {
  const error = new IoError(code);
  codes.set(error, code);
  return { tag: "last-operation-failed", val: error };
}

/**
 * wasi:filesystem/types#filesystem-error-code: the code of one of our stream errors, else
 * whatever preview2-shim makes of one of its own (none when it knows none: it throws on errors
 * that are not filesystem errors, e.g. an HTTP body's, and none is the right answer then).
 */
export function filesystemErrorCode(error: unknown): ErrorCode | undefined {
  const own = typeof error === "object" && error !== null ? codes.get(error) : undefined;
  if (own !== undefined) return own;
  try {
    return shimFilesystemErrorCode(error) as ErrorCode | undefined;
  } catch {
    return undefined;
  }
}
