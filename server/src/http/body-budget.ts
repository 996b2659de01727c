import { serviceError } from "../errors/index.ts";

export interface BodyBudgetLimits {
  /** Bytes all requests together may hold. */
  total: number;
  /** Bytes the requests of one connection may hold (HTTP/2 multiplexes many on one). */
  perConnection: number;
}

/**
 * The request body bytes the server holds in memory, in all and per connection. A request takes
 * its share as its body arrives and gives it back when its response is done. A request that would
 * pass either budget is refused (server_busy) instead of being buffered, so many large bodies at
 * once cost a refusal, not the server's memory.
 */
export class BodyBudget {
  readonly #limits: BodyBudgetLimits;
  #used = 0;
  #refusals = 0;
  readonly #usedBy = new WeakMap<object, number>();

  constructor(limits: BodyBudgetLimits) {
    this.#limits = limits;
  }

  /** Takes `bytes` for `connection`, or throws server_busy and takes nothing. */
  take(connection: object, bytes: number): void {
    const connectionUsed = this.#usedBy.get(connection) ?? 0;
    if (connectionUsed + bytes > this.#limits.perConnection) {
      this.#refusals++;
      throw serviceError(
        "server_busy",
        `this connection's requests already hold ${connectionUsed} body bytes of the ${this.#limits.perConnection} allowed; retry when they are done`,
      );
    }
    if (this.#used + bytes > this.#limits.total) {
      this.#refusals++;
      throw serviceError("server_busy", `the server holds as many request body bytes as it allows (${this.#limits.total}); retry shortly`);
    }
    this.#used += bytes;
    this.#usedBy.set(connection, connectionUsed + bytes);
  }

  /** Bytes held now, and requests refused (server_busy) since the server started: the metrics. */
  stats(): { bytes: number; refusals: number } {
    return { bytes: this.#used, refusals: this.#refusals };
  }

  giveBack(connection: object, bytes: number): void {
    this.#used -= bytes;
    this.#usedBy.set(connection, (this.#usedBy.get(connection) ?? 0) - bytes);
  }
}
