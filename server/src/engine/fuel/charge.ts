import {
  EMPTY_BLOCK_TYPE,
  END,
  GLOBAL_GET,
  GLOBAL_SET,
  I64_CONST,
  I64_EXTEND_I32_U,
  I64_LT_S,
  I64_SHL,
  I64_SHR_U,
  I64_SUB,
  IF,
  LOCAL_GET,
  LOCAL_SET,
  LOCAL_TEE,
  UNREACHABLE,
  type Writer,
} from "../wasm/index.ts";

/**
 * The code the instrumenter inserts. `counter` is the function's i64 counter local, `fuelGlobal`
 * the imported fuel global. Everything here is stack-neutral and adds no branch targets around
 * original code, so the original branch depths stay valid.
 */

/** Segment flag: take the counter from the global (entry, catch handlers) instead of the local. */
export const F_LOAD = 1;
/** Segment flag: trap if the counter went negative (entry and loop heads, so every cycle is checked). */
export const F_CHECK = 2;

/** counter -> global: before calls, returns, throws and exits. */
export function encodeSync(w: Writer, counter: number, fuelGlobal: number): void {
  w.u8(LOCAL_GET);
  w.u32(counter);
  w.u8(GLOBAL_SET);
  w.u32(fuelGlobal);
}

/** global -> counter: after calls. */
export function encodeLoad(w: Writer, counter: number, fuelGlobal: number): void {
  w.u8(GLOBAL_GET);
  w.u32(fuelGlobal);
  w.u8(LOCAL_SET);
  w.u32(counter);
}

/**
 * Emits one segment's charge: counter -= cost, then (at checks) trap when negative. The global is
 * written before the trap so the host can tell fuel exhaustion (global < 0) from other traps.
 * Only for segments with something to do: a cost or a flag.
 */
export function encodeCharge(w: Writer, cost: number, flags: number, counter: number, fuelGlobal: number): void {
  const load = flags & F_LOAD;
  const check = flags & F_CHECK;
  w.u8(load ? GLOBAL_GET : LOCAL_GET);
  w.u32(load ? fuelGlobal : counter);
  if (cost > 0) {
    w.u8(I64_CONST);
    w.sleb(cost);
    w.u8(I64_SUB);
  }
  // With neither a load nor a charge the value on the stack is the counter itself; nothing to store.
  if (load || cost > 0) {
    w.u8(check ? LOCAL_TEE : LOCAL_SET);
    w.u32(counter);
  }
  if (check) encodeCheck(w, counter, fuelGlobal);
}

/**
 * Emits the charge of a bulk operator, inserted just before it: its size operand (the i32 on top
 * of the stack) is set aside in `scratch`, the counter is charged `size << shift` (or
 * `size >> -shift`) units and checked, and the size is pushed back. Stack-neutral, so the
 * operator then runs as written, and only when the fuel covered it.
 */
export function encodeBulkCharge(w: Writer, shift: number, counter: number, scratch: number, fuelGlobal: number): void {
  w.u8(LOCAL_SET);
  w.u32(scratch);
  w.u8(LOCAL_GET);
  w.u32(counter);
  w.u8(LOCAL_GET);
  w.u32(scratch);
  w.u8(I64_EXTEND_I32_U);
  if (shift !== 0) {
    w.u8(I64_CONST);
    w.sleb(Math.abs(shift));
    w.u8(shift > 0 ? I64_SHL : I64_SHR_U);
  }
  w.u8(I64_SUB);
  w.u8(LOCAL_TEE);
  w.u32(counter);
  encodeCheck(w, counter, fuelGlobal);
  w.u8(LOCAL_GET);
  w.u32(scratch);
}

/** Traps when the counter (on the stack) is negative, writing it to the global first. */
function encodeCheck(w: Writer, counter: number, fuelGlobal: number): void {
  w.u8(I64_CONST);
  w.u8(0);
  w.u8(I64_LT_S);
  w.u8(IF);
  w.u8(EMPTY_BLOCK_TYPE);
  encodeSync(w, counter, fuelGlobal);
  w.u8(UNREACHABLE);
  w.u8(END);
}
