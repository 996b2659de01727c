// wasi:filesystem error codes, and the one conversion from whatever a host call threw into one.
// A guest only ever sees a code: never a Node error, whose message names host paths.

const CODES = [
  "access",
  "would-block",
  "already",
  "bad-descriptor",
  "busy",
  "deadlock",
  "quota",
  "exist",
  "file-too-large",
  "illegal-byte-sequence",
  "in-progress",
  "interrupted",
  "invalid",
  "io",
  "is-directory",
  "loop",
  "too-many-links",
  "message-size",
  "name-too-long",
  "no-device",
  "no-entry",
  "no-lock",
  "insufficient-memory",
  "insufficient-space",
  "not-directory",
  "not-empty",
  "not-recoverable",
  "unsupported",
  "no-tty",
  "no-such-device",
  "overflow",
  "not-permitted",
  "pipe",
  "read-only",
  "invalid-seek",
  "text-file-busy",
  "cross-device",
] as const;

export type ErrorCode = (typeof CODES)[number];

const KNOWN: ReadonlySet<string> = new Set(CODES);

/** errno names (Node's `error.code`) to WASI codes, as preview2-shim maps them, plus the fd limits. */
const ERRNO: Readonly<Record<string, ErrorCode>> = {
  EACCES: "access",
  EAGAIN: "would-block",
  EWOULDBLOCK: "would-block",
  EALREADY: "already",
  EBADF: "bad-descriptor",
  EBUSY: "busy",
  EDEADLK: "deadlock",
  EDQUOT: "quota",
  EEXIST: "exist",
  EFBIG: "file-too-large",
  EILSEQ: "illegal-byte-sequence",
  EINPROGRESS: "in-progress",
  EINTR: "interrupted",
  EINVAL: "invalid",
  EIO: "io",
  EISDIR: "is-directory",
  ELOOP: "loop",
  EMLINK: "too-many-links",
  EMSGSIZE: "message-size",
  ENAMETOOLONG: "name-too-long",
  ENODEV: "no-device",
  ENOENT: "no-entry",
  ENOLCK: "no-lock",
  ENOMEM: "insufficient-memory",
  EMFILE: "insufficient-memory",
  ENFILE: "insufficient-memory",
  ENOSPC: "insufficient-space",
  ENOTDIR: "not-directory",
  ENOTEMPTY: "not-empty",
  ENOTRECOVERABLE: "not-recoverable",
  ENOTSUP: "unsupported",
  EOPNOTSUPP: "unsupported",
  ENOSYS: "unsupported",
  ENOTTY: "no-tty",
  ENXIO: "no-such-device",
  EOVERFLOW: "overflow",
  EPERM: "not-permitted",
  EPIPE: "pipe",
  EROFS: "read-only",
  ESPIPE: "invalid-seek",
  ETXTBSY: "text-file-busy",
  EXDEV: "cross-device",
};

/** The errno name of a Node system error, if it is one. */
export function errnoOf(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : undefined;
}

/**
 * The code a guest gets for `error`: a code thrown as such passes through; a Node system error is
 * mapped from its errno; Node's argument errors (`ERR_*`, e.g. a NUL byte) are `invalid`; anything
 * else is `io`. The error's message is dropped.
 */
export function errorCode(error: unknown): ErrorCode {
  if (typeof error === "string" && KNOWN.has(error)) return error as ErrorCode;
  const errno = errnoOf(error);
  if (errno !== undefined) {
    const mapped = ERRNO[errno];
    if (mapped) return mapped;
    if (errno.startsWith("ERR_")) return "invalid";
  }
  return "io";
}

/** Runs `action`, turning whatever it throws into a guest's error code. */
export function asGuestError<T>(action: () => T): T {
  try {
    return action();
  } catch (error) {
    throw errorCode(error);
  }
}
