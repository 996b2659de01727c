import { ConnectError } from "@connectrpc/connect";
import { serviceError } from "../errors/index.ts";
import type { BodyBudget } from "./body-budget.ts";
import type { NodeRequest, NodeResponse } from "./node-types.ts";

/**
 * What the server reads of a body nobody read, so that its HTTP/1.1 connection can carry the next
 * request. A larger (or unannounced) rest closes the connection instead: reading it would let
 * anyone without a key make the server read at line rate.
 */
const DRAIN_MAX_BYTES = 256 * 1024;

/** What a handler's reading of the body is held to. */
export interface ReadLimits {
  /** Abandon the request when no body bytes arrive for this long while they are awaited; undefined: wait as long as it takes. */
  idleMs: number | undefined;
  /** Charge the bytes read until the response is done; undefined for bodies not held in memory. */
  budget: BodyBudget | undefined;
}

/**
 * The body of one request. Handlers read it only through `read`, so the server can bound what a
 * slow or hostile sender makes it spend:
 * - a body that stalls while it is awaited abandons the request (request_timeout), closing the
 *   HTTP/1.1 connection or resetting the HTTP/2 stream;
 * - the bytes read count against a budget until the response is done (a declared Content-Length
 *   is taken at once, so a request that cannot fit is refused before it is read);
 * - a reader that stops early (size limit, refusal) does not destroy the request, so the refusal
 *   can still be answered; after the response, up to DRAIN_MAX_BYTES of an HTTP/1.1 body nobody
 *   read are drained, under the idle timeout, so the connection can carry its next request; with
 *   more left, the response says Connection: close (see prepareResponse). (HTTP/2 resets a stream
 *   whose body was left unread by itself.)
 * A client that goes away mid-body ends the reading with `canceled`.
 */
export class RequestBody {
  readonly #req: NodeRequest;
  readonly #drainIdleMs: number;
  /** What the budget charges: the HTTP/1.1 socket or the HTTP/2 session. */
  readonly #connection: object;
  #budget: BodyBudget | undefined;
  #received = 0;
  #taken = 0;
  #reading = false;
  #responded = false;

  constructor(req: NodeRequest, res: NodeResponse, drainIdleMs: number) {
    this.#req = req;
    this.#drainIdleMs = drainIdleMs;
    this.#connection = "stream" in req ? (req.stream.session ?? req.stream) : req.socket;
    // Reading nothing marks an HTTP/1.1 body as taken, so that Node does not discard it on its own
    // after the response (read to the end at line rate, with no timeout): the drain below does.
    if (!("stream" in req)) req.read(0);
    res.once("close", () => this.#afterResponse(res.writableFinished));
  }

  /**
   * To call before the response head is written: a response that leaves more of an HTTP/1.1 body
   * unread than the drain would read closes the connection, so the client does not reuse it.
   */
  prepareResponse(res: NodeResponse): void {
    if (this.#unreadHttp1Body() && !this.#drainable()) res.setHeader("connection", "close");
  }

  /** The body's bytes for one reader, held to `limits`. */
  read(limits: ReadLimits): AsyncIterable<Uint8Array> {
    return { [Symbol.asyncIterator]: () => this.#chunks(limits) };
  }

  async *#chunks({ idleMs, budget }: ReadLimits): AsyncGenerator<Uint8Array> {
    this.#reading = true;
    this.#budget = budget;
    const chunks: AsyncIterator<Buffer> = this.#req.iterator({ destroyOnReturn: false });
    try {
      this.#take(declaredLength(this.#req));
      for (let next = await this.#next(chunks, idleMs); next.done !== true; next = await this.#next(chunks, idleMs)) {
        this.#received += next.value.byteLength;
        this.#take(this.#received - this.#taken);
        yield next.value;
      }
    } catch (error) {
      // Our own refusals pass as they are; anything else the stream reports means the client left.
      throw error instanceof ConnectError ? error : serviceError("canceled", "the client closed the request before its body was complete");
    } finally {
      this.#reading = false;
      await chunks.return?.();
    }
  }

  #take(bytes: number): void {
    if (bytes <= 0 || this.#budget === undefined || this.#responded) return;
    this.#budget.take(this.#connection, bytes);
    this.#taken += bytes;
  }

  /** The next chunk, abandoning the request if none arrives within `idleMs`. */
  #next(chunks: AsyncIterator<Buffer>, idleMs: number | undefined): Promise<IteratorResult<Buffer>> {
    if (idleMs === undefined) return chunks.next();
    const abandon = () => this.#req.destroy(serviceError("request_timeout", `no body bytes arrived for ${idleMs / 1000} s; the request is abandoned`));
    const timer = setTimeout(abandon, idleMs);
    return chunks.next().finally(() => clearTimeout(timer));
  }

  #afterResponse(finished: boolean): void {
    this.#responded = true;
    this.#budget?.giveBack(this.#connection, this.#taken);
    this.#taken = 0;
    if (finished && this.#unreadHttp1Body() && this.#drainable()) void this.#drain();
  }

  #unreadHttp1Body(): boolean {
    return !("stream" in this.#req) && hasHttp1Body(this.#req) && !this.#req.complete && !this.#reading;
  }

  /** A Content-Length body (the HTTP/1.1 parser holds it to that length) with little left to read. */
  #drainable(): boolean {
    const declared = declaredLength(this.#req);
    return declared > 0 && declared - this.#received <= DRAIN_MAX_BYTES;
  }

  /** Reads and drops what nobody read, so the HTTP/1.1 connection can carry its next request. */
  async #drain(): Promise<void> {
    const chunks: AsyncIterator<Buffer> = this.#req.iterator({ destroyOnReturn: false });
    try {
      let next: IteratorResult<Buffer>;
      do next = await this.#next(chunks, this.#drainIdleMs);
      while (next.done !== true);
    } catch {
      // The client left, or stalled and the request was abandoned: there is nothing left to drain.
    }
  }
}

/**
 * An HTTP/1.1 request has a body only when it says so (RFC 9112 6.3): a GET answered before the
 * parser marked it complete has nothing unread, and its connection stays open for the next one.
 */
function hasHttp1Body(req: NodeRequest): boolean {
  return declaredLength(req) > 0 || req.headers["transfer-encoding"] !== undefined;
}

function declaredLength(req: NodeRequest): number {
  const length = Number(req.headers["content-length"]);
  return Number.isSafeInteger(length) && length > 0 ? length : 0;
}
