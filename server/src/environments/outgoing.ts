/** What the adapters that call out over HTTP (extension, MCP) share about their requests. */

/**
 * Error codes of a request that never left this process (carried as the `cause.code` of a
 * fetch or Connect error): the peer cannot have seen it, so its operation is a failure, never
 * `unknown`.
 */
const NOT_SENT = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH", "ENETUNREACH", "ERR_INVALID_URL"]);

/** Whether an error code (a `cause.code`) says the request never left. */
export function isNotSentCode(code: unknown): code is string {
  return typeof code === "string" && NOT_SENT.has(code);
}

/** A signal that aborts at the deadline; `cancel` stops its timer, `timedOut` says whether it fired. */
export function deadlineSignal(deadlineMs: number): { signal: AbortSignal; cancel(): void; timedOut(): boolean } {
  const controller = new AbortController();
  let expired = false;
  const timer = setTimeout(
    () => {
      expired = true;
      controller.abort(new Error("the operation's deadline passed"));
    },
    Math.max(0, deadlineMs - Date.now()),
  );
  return { signal: controller.signal, cancel: () => clearTimeout(timer), timedOut: () => expired };
}
