import { PAGE_BYTES } from "../wasm/index.ts";
import { TABLE_ENTRY_BYTES, WORD_BYTES } from "./footprint.ts";

/**
 * Opcode tables for the function-body decoder: what immediates follow each opcode, and its fuel cost.
 * Kind 0 means "not an opcode we know": the decoder throws instead of guessing its length.
 */

export const OP_UNKNOWN = 0;
/** No immediates, no effect on control flow. */
export const OP_PLAIN = 1;
/** One LEB128 immediate (index, s32/s64 constant, heap type, memory index). */
export const OP_LEB = 2;
export const OP_MEMARG = 3;
export const OP_F32 = 4;
export const OP_F64 = 5;
/** global.get / global.set: the index must be renumbered. */
export const OP_GLOBAL = 6;
/** select with explicit result types. */
export const OP_SELECT_T = 7;
export const OP_PREFIX_FC = 8;
export const OP_PREFIX_FD = 9;
/** Control flow, calls, throws: handled one by one by the instrumenter. */
export const OP_CONTROL = 10;
/** local.get / local.set / local.tee: renumbered when the counter becomes a parameter. */
export const OP_LOCAL = 11;
/** memory.grow: charged by its size, like the bulk operators of FC_BULK_SHIFT. */
export const OP_MEMORY_GROW = 12;

export const OP_KIND = new Uint8Array(256);
/** Fuel per opcode, wasmtime's model: 1 each, except operators that generate no code or only mark structure. */
export const OP_COST = new Uint8Array(256).fill(1);

function setKind(from: number, to: number, kind: number): void {
  OP_KIND.fill(kind, from, to + 1);
}

setKind(0x00, 0x0f, OP_CONTROL); // unreachable .. return (0x06-0x0a: legacy try/catch, throw, rethrow, throw_ref)
setKind(0x10, 0x15, OP_CONTROL); // call, call_indirect, return_call*, call_ref, return_call_ref
setKind(0x18, 0x19, OP_CONTROL); // delegate, catch_all
OP_KIND[0x1f] = OP_CONTROL; // try_table
OP_KIND[0x01] = OP_PLAIN; // nop
setKind(0x1a, 0x1b, OP_PLAIN); // drop, select
OP_KIND[0x1c] = OP_SELECT_T;
setKind(0x20, 0x22, OP_LOCAL); // local.get/set/tee
setKind(0x23, 0x24, OP_GLOBAL);
setKind(0x25, 0x26, OP_LEB); // table.get/set
setKind(0x28, 0x3e, OP_MEMARG); // loads and stores
setKind(0x3f, 0x42, OP_LEB); // memory.size/grow (memory index), i32.const, i64.const
OP_KIND[0x40] = OP_MEMORY_GROW;
OP_KIND[0x43] = OP_F32;
OP_KIND[0x44] = OP_F64;
setKind(0x45, 0xc4, OP_PLAIN); // numeric, conversions, sign extension
OP_KIND[0xd0] = OP_LEB; // ref.null heaptype
OP_KIND[0xd1] = OP_PLAIN; // ref.is_null
OP_KIND[0xd2] = OP_LEB; // ref.func
setKind(0xd3, 0xd4, OP_PLAIN); // ref.eq, ref.as_non_null
setKind(0xd5, 0xd6, OP_CONTROL); // br_on_null, br_on_non_null
OP_KIND[0xfc] = OP_PREFIX_FC;
OP_KIND[0xfd] = OP_PREFIX_FD;

for (const op of [0x00, 0x01, 0x02, 0x03, 0x05, 0x0b, 0x0f, 0x1a]) OP_COST[op] = 0; // unreachable nop block loop else end return drop

/** 0xFC sub-opcodes 0..17: number of LEB immediates (trunc_sat 0-7, then bulk memory and table ops). */
export const FC_LEBS: readonly number[] = [0, 0, 0, 0, 0, 0, 0, 0, 2, 1, 2, 1, 2, 1, 2, 1, 1, 1];

/**
 * Operators whose work grows with their size operand (the i32 on top of the stack) cost, on top
 * of their 1, one unit per 8 bytes (a machine word) they may write or add: `size << shift`, or
 * `size >> -shift`. Memory sizes are bytes (>> 3); a table entry counts as TABLE_ENTRY_BYTES
 * (<< 2); memory.grow's size is 64 KiB pages (<< 13).
 */
export const MEMORY_GROW_SHIFT = Math.log2(PAGE_BYTES / WORD_BYTES);
const B = -Math.log2(WORD_BYTES);
const E = Math.log2(TABLE_ENTRY_BYTES / WORD_BYTES);
const _ = undefined;
/** Per 0xFC sub-opcode, as FC_LEBS: memory.init, memory.copy, memory.fill (B); table.init, table.copy, table.grow, table.fill (E). */
export const FC_BULK_SHIFT: readonly (number | undefined)[] = [_, _, _, _, _, _, _, _, B, _, B, B, E, _, E, E, _, E];

export const SIMD_UNKNOWN = 0;
export const SIMD_PLAIN = 1;
export const SIMD_MEMARG = 2;
export const SIMD_MEMARG_LANE = 3;
export const SIMD_LANE = 4;
/** v128.const and i8x16.shuffle: 16 raw bytes. */
export const SIMD_BYTES16 = 5;

/** Immediate kind for 0xFD sub-opcodes 0x00..0x113 (SIMD plus relaxed SIMD). */
export const SIMD_KIND = new Uint8Array(0x114).fill(SIMD_PLAIN);
SIMD_KIND.fill(SIMD_MEMARG, 0x00, 0x0c); // v128.load*, load*_splat, v128.store
SIMD_KIND.fill(SIMD_BYTES16, 0x0c, 0x0e);
SIMD_KIND.fill(SIMD_LANE, 0x15, 0x23); // extract_lane / replace_lane
SIMD_KIND.fill(SIMD_MEMARG_LANE, 0x54, 0x5c); // load*_lane / store*_lane
SIMD_KIND.fill(SIMD_MEMARG, 0x5c, 0x5e); // load32_zero / load64_zero
// Holes in the opcode space left by instructions removed before standardisation.
for (const op of [0x9a, 0xa2, 0xa5, 0xa6, 0xaf, 0xb0, 0xb2, 0xb3, 0xb4, 0xbb, 0xc2, 0xc5, 0xc6, 0xcf, 0xd0, 0xd2, 0xd3, 0xd4, 0xe2, 0xee]) {
  SIMD_KIND[op] = SIMD_UNKNOWN;
}
