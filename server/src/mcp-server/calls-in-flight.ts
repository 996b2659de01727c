/** A JSON-RPC request id, as the client chose it. */
export type RequestId = string | number;

/**
 * The tools/calls in flight on this process's session endpoints, by workspace, session and
 * JSON-RPC request id, so that a `notifications/cancelled` reaches the call it names: the
 * endpoints are stateless, so the notification is a request of its own, answered by another
 * server instance than the call's. A session's endpoint is always answered by the replica that
 * owns the session (forwarded otherwise), so the call and its cancellation meet here.
 *
 * Request ids are each client's own and, with no MCP session, two clients may use one id on one
 * session at the same time: a cancellation naming an id that two calls share is ignored (MCP lets
 * a receiver ignore a cancellation) rather than stopping another client's call.
 */
export class CallsInFlight {
  readonly #calls = new Map<string, Set<AbortController>>();

  /** Tracks a call until the function it answers is called; `withdrawn` aborts when the call is cancelled. */
  track(workspace: string, sessionId: string, requestId: RequestId, withdrawn: AbortController): () => void {
    const key = keyOf(workspace, sessionId, requestId);
    const calls = this.#calls.get(key) ?? new Set();
    calls.add(withdrawn);
    this.#calls.set(key, calls);
    return () => {
      calls.delete(withdrawn);
      if (calls.size === 0 && this.#calls.get(key) === calls) this.#calls.delete(key);
    };
  }

  /** Cancels the one call in flight under this id; false when there is none, or more than one. */
  cancel(workspace: string, sessionId: string, requestId: RequestId, reason: string): boolean {
    const calls = this.#calls.get(keyOf(workspace, sessionId, requestId));
    if (calls?.size !== 1) return false;
    for (const call of calls) call.abort(reason);
    return true;
  }
}

/** 1 and "1" are different ids. */
function keyOf(workspace: string, sessionId: string, requestId: RequestId): string {
  return JSON.stringify([workspace, sessionId, requestId]);
}
