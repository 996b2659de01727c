// The pollable of this filesystem's streams. File I/O here is synchronous, so a stream is always
// ready: there is nothing to wait for.

/**
 * jco's glue files a host resource under `obj[Symbol.for("cabiRep")]` when it has one, else under a
 * counter of its own starting at 1. preview2-shim's pollables carry their io-worker id there
 * (counting up from 1), so ours carry distinct numbers counting down from the top of the glue's
 * range (below its 1 << 30 flag bit): one instance can hold both kinds without two sharing a slot.
 */
const REP = Symbol.for("cabiRep");
const TOP_REP = (1 << 30) - 1;
const BOTTOM_REP = 1 << 29;
let nextRep = TOP_REP;

export class ReadyPollable {
  constructor() {
    (this as unknown as Record<symbol, number>)[REP] = nextRep;
    nextRep = nextRep > BOTTOM_REP ? nextRep - 1 : TOP_REP;
  }

  ready(): boolean {
    return true;
  }

  block(): void {}

  [Symbol.dispose](): void {}
}
