import { BLOCK, CALL, END, GLOBAL_GET, IF, lebEnd, LOCAL_GET, LOCAL_SET, Reader, RETURN_CALL, UNREACHABLE, Writer } from "../wasm/index.ts";
import { CounterCannotPass, type CallPlan } from "./calls.ts";
import { encodeBulkCharge, encodeCharge, encodeLoad, encodeSync, F_CHECK, F_LOAD } from "./charge.ts";
import {
  FC_BULK_SHIFT,
  FC_LEBS,
  MEMORY_GROW_SHIFT,
  OP_COST,
  OP_CONTROL,
  OP_F32,
  OP_F64,
  OP_GLOBAL,
  OP_KIND,
  OP_LEB,
  OP_LOCAL,
  OP_MEMARG,
  OP_MEMORY_GROW,
  OP_PLAIN,
  OP_PREFIX_FC,
  OP_PREFIX_FD,
  OP_SELECT_T,
  SIMD_BYTES16,
  SIMD_KIND,
  SIMD_LANE,
  SIMD_MEMARG,
  SIMD_MEMARG_LANE,
  SIMD_PLAIN,
} from "./opcodes.ts";

const FRAME_FUNC = 0;
const FRAME_BLOCK = 1;
const FRAME_LOOP = 2;

/**
 * Rewrites one function body at a time. Instances are reused across a module's functions so the
 * scratch buffers and stacks are allocated once.
 *
 * Single pass: input bytes are copied lazily (`copyFrom`) and flushed only where code is inserted.
 * Segment charges depend on the segment's length, which is known only at its end, so each segment
 * start is recorded as a slot in the scratch output and `writeTo` splices the charges in.
 *
 * With a call plan (calls.ts) the counter is the function's last parameter and last result: the
 * parameter is inserted after the original ones, so every later local index moves up by one, and
 * the body is wrapped in a block of the function's results, after which the counter is pushed.
 * Branches to the function's own label then land on that block, and the results stay in order.
 * Without a plan the counter is an extra local, loaded from the global at entry and written back
 * at every exit (the convention of modules whose tail calls cannot pass it on).
 */
export class BodyInstrumenter {
  /** Over the body being instrumented; the hot loop keeps its position in a local meanwhile. */
  private reader = new Reader(new Uint8Array(0), 0, 0);
  private copyFrom = 0;
  private readonly out = new Writer(1 << 16);

  private slotPos = new Int32Array(256);
  private slotCost = new Int32Array(256);
  private slotFlags = new Uint8Array(256);
  private slots = 0;
  private cost = 0;

  private frameKind = new Uint8Array(64);
  /** 1 when the global must be current on every path into the frame's continuation. */
  private frameSync = new Uint8Array(64);
  private frameOrdinal = new Int32Array(64);
  private depth = 0;
  private ordinals = 0;

  /** Ordinals of blocks that a try_table catch clause branches to (found by a first pass). */
  private readonly catchTargets = new Set<number>();
  private foundNewCatchTarget = false;

  private counter = 0;
  /** An i32 local after every other, where a bulk operator's size waits while it is charged. */
  private scratch = 0;
  /** Whether this function's body needed the scratch local (the caller then declares it). */
  usesScratch = false;
  /** Local indices from here up move by one (the counter parameter); unused without a call plan. */
  private shiftLocalsFrom = 0;
  /** The block type of the function's results (with a call plan). */
  private resultBlock: Uint8Array = new Uint8Array(0);
  /** The global already equals the counter: no charge since the last write-back or reload. */
  private synced = false;
  private readonly importedGlobals: number;
  /** The fuel global is appended after the imported globals, so its index is their count. */
  private readonly fuelGlobal: number;
  private readonly calls: CallPlan | undefined;

  constructor(importedGlobals: number, calls: CallPlan | undefined) {
    this.importedGlobals = importedGlobals;
    this.fuelGlobal = importedGlobals;
    this.calls = calls;
  }

  /**
   * Instruments the expression code[start, end) of a function with `params` parameters; with a
   * call plan `resultBlock` is the block type of its results. `writeTo` emits the result.
   */
  instrument(code: Uint8Array, start: number, end: number, params: number, locals: number, resultBlock?: Uint8Array): void {
    this.reader = new Reader(code, start, end);
    this.counter = this.calls ? params : locals;
    // Either way the locals now number locals + 1: the counter parameter, or the counter local.
    this.scratch = locals + 1;
    this.usesScratch = false;
    this.shiftLocalsFrom = params;
    if (resultBlock) this.resultBlock = resultBlock;
    this.catchTargets.clear();
    this.pass(start);
    // A catch target seen only after earlier branches to it were emitted needs a second pass.
    if (this.foundNewCatchTarget) this.pass(start);
    if (this.foundNewCatchTarget) throw new Error(`internal: catch targets unstable in body at offset ${start}`);
  }

  /** Emits the instrumented expression, splicing each segment's charge in at its start. */
  writeTo(w: Writer): void {
    let from = 0;
    for (let i = 0; i < this.slots; i++) {
      const cost = this.slotCost[i]!;
      const flags = this.slotFlags[i]!;
      if (cost === 0 && flags === 0) continue; // nothing to charge: keep copying in one run
      const at = this.slotPos[i]!;
      w.copy(this.out.buf, from, at);
      encodeCharge(w, cost, flags, this.counter, this.fuelGlobal);
      from = at;
    }
    w.copy(this.out.buf, from, this.out.len);
  }

  private pass(start: number): void {
    this.reader.pos = start;
    this.copyFrom = start;
    this.out.len = 0;
    this.slots = 0;
    this.cost = 0;
    this.depth = 0;
    this.ordinals = 0;
    this.foundNewCatchTarget = false;
    if (this.calls) {
      // The block around the body, where branches to the function's label now land (see above).
      this.out.u8(BLOCK);
      this.out.copy(this.resultBlock, 0, this.resultBlock.length);
      this.pushFrame(FRAME_BLOCK, 0);
      this.startSegment(F_CHECK);
    } else {
      this.pushFrame(FRAME_FUNC, 1);
      this.startSegment(F_LOAD | F_CHECK);
    }
    this.decodeLoop();
  }

  /**
   * The hot loop: position and segment cost live in locals, and the common immediates are skipped
   * inline; only opcodes that may rewrite or split go through the methods (which read with the reader).
   */
  private decodeLoop(): void {
    const reader = this.reader;
    const code = reader.bytes;
    const end = reader.end;
    // Imports copied to locals: module runners (vitest) turn each imported binding into a property read.
    const costs = OP_COST;
    const kinds = OP_KIND;
    const plain = OP_PLAIN;
    const leb = OP_LEB;
    const local = OP_LOCAL;
    const shiftLocals = this.calls !== undefined;
    const memarg = OP_MEMARG;
    const f32 = OP_F32;
    const f64 = OP_F64;
    let pos = reader.pos;
    let cost = this.cost;
    for (;;) {
      if (pos >= end) throw new Error(`function body ending at offset ${end} has no final end`);
      const at = pos;
      const op = code[pos++]!;
      cost += costs[op]!;
      const kind = kinds[op]!;
      if (kind === plain) continue;
      if (kind === local) {
        if (shiftLocals) {
          reader.pos = pos;
          this.renumberLocal();
          pos = reader.pos;
        } else {
          pos = lebEnd(code, pos);
        }
        continue;
      }
      if (kind === leb) {
        pos = lebEnd(code, pos);
        continue;
      }
      if (kind === memarg) {
        pos = skipMemarg(code, pos);
        continue;
      }
      if (kind === f32 || kind === f64) {
        pos += kind === f32 ? 4 : 8;
        continue;
      }
      reader.pos = pos;
      this.cost = cost;
      if (this.slowOp(kind, op, at)) return;
      pos = reader.pos;
      cost = this.cost;
    }
  }

  /** Opcodes that rewrite, insert or split; returns true at the function's final `end`. */
  private slowOp(kind: number, op: number, at: number): boolean {
    switch (kind) {
      case OP_CONTROL:
        return this.control(op, at);
      case OP_GLOBAL:
        this.renumberGlobal();
        return false;
      case OP_SELECT_T:
        for (let n = this.reader.u32(); n > 0; n--) this.reader.skipValType();
        return false;
      case OP_PREFIX_FC:
        this.skipMiscOp(at);
        return false;
      case OP_MEMORY_GROW:
        this.chargeBySize(at, MEMORY_GROW_SHIFT);
        this.reader.skipLeb(); // memory index
        return false;
      case OP_PREFIX_FD:
        this.skipSimdOp(at);
        return false;
      default:
        throw unknownOpcode(at, op);
    }
  }

  /** Handles one control-flow opcode; returns true at the function's final `end`. */
  private control(op: number, at: number): boolean {
    switch (op) {
      case BLOCK:
      case 0x06: // try (legacy)
        this.reader.skipBlockType();
        this.pushFrame(FRAME_BLOCK, 0);
        return false;
      case 0x03:
        this.loop(at);
        return false;
      case IF: // the then-arm runs only when taken
        // When false without an else arm, `if` branches straight to its continuation.
        if (this.catchTargets.has(this.ordinals)) this.syncBefore(at);
        this.reader.skipBlockType();
        this.pushFrame(FRAME_BLOCK, 0);
        this.startSegment(0);
        return false;
      case 0x05: // else
        this.leaveArm(at);
        this.startSegment(0);
        return false;
      case 0x07: // catch tag (legacy): handler entered by an exception; the thrower wrote the global
        this.reader.skipLeb();
        this.leaveArm(at);
        this.startSegment(F_LOAD);
        return false;
      case 0x19: // catch_all (legacy)
        this.leaveArm(at);
        this.startSegment(F_LOAD);
        return false;
      case END:
        return this.endFrame(at);
      case 0x18: // delegate: closes a legacy try like end
        this.reader.skipLeb();
        return this.endFrame(at);
      case 0x1f:
        this.tryTable();
        return false;
      case 0x0c: // br
        if (this.labelNeedsSync(this.reader.u32())) this.syncBefore(at);
        this.startSegment(0);
        return false;
      case 0x0d: // br_if
      case 0xd5: // br_on_null
      case 0xd6: // br_on_non_null
        if (this.labelNeedsSync(this.reader.u32())) this.syncBefore(at);
        return false;
      case 0x0e:
        this.brTable(at);
        return false;
      case CALL:
        this.call(at);
        return false;
      case 0x14: // call_ref
        this.reader.skipLeb();
        this.aroundCall(at);
        return false;
      case 0x11: // call_indirect
        this.reader.skipLeb();
        this.reader.skipLeb();
        this.aroundCall(at);
        return false;
      case RETURN_CALL:
        this.returnCall(at);
        return false;
      case 0x15: // return_call_ref
        this.refuseTailCallWithCounter(at);
        this.reader.skipLeb();
        this.syncAndSplit(at);
        return false;
      case 0x08: // throw
      case 0x09: // rethrow
        this.reader.skipLeb();
        this.syncAndSplit(at);
        return false;
      case 0x13: // return_call_indirect
        this.refuseTailCallWithCounter(at);
        this.reader.skipLeb();
        this.reader.skipLeb();
        this.syncAndSplit(at);
        return false;
      case 0x0f: // return
        if (this.calls) this.returnCounter(at);
        else this.syncAndSplit(at);
        return false;
      case 0x0a: // throw_ref
        this.syncAndSplit(at);
        return false;
      case UNREACHABLE: // what follows is dead until the next structural boundary
        this.startSegment(0);
        return false;
      default:
        throw unknownOpcode(at, op);
    }
  }

  private loop(at: number): void {
    const ordinal = this.ordinals;
    const isCatchTarget = this.catchTargets.has(ordinal) ? 1 : 0;
    // A catch clause may land on this loop head, which reloads the counter; entering it must sync first.
    if (isCatchTarget) this.syncBefore(at);
    this.reader.skipBlockType();
    this.pushFrame(FRAME_LOOP, isCatchTarget);
    this.startSegment(F_CHECK | (isCatchTarget ? F_LOAD : 0));
  }

  /** Leaving a then-arm, try body or catch handler flows to the frame's continuation. */
  private leaveArm(at: number): void {
    if (this.frameSync[this.depth - 1]) this.syncBefore(at);
  }

  private endFrame(at: number): boolean {
    const top = this.depth - 1;
    if (top === 0) {
      if (this.calls) this.closeBodyBlock(at);
      else this.syncBefore(at);
      this.depth = 0;
      this.closeSegment();
      this.flush(this.reader.pos);
      if (this.reader.pos !== this.reader.end) throw new Error(`function body has trailing bytes after final end at offset ${this.reader.pos}`);
      return true;
    }
    // Continuation of a catch-target block: reached by fallthrough, branches and catches; reload.
    const reload = this.frameSync[top] && this.frameKind[top] !== FRAME_LOOP;
    if (reload) this.syncBefore(at);
    this.depth = top;
    this.startSegment(reload ? F_LOAD : 0);
    return false;
  }

  private tryTable(): void {
    this.reader.skipBlockType();
    for (let n = this.reader.u32(); n > 0; n--) {
      const kind = this.reader.u8();
      if (kind > 3) throw new Error(`unknown try_table catch kind ${kind} at offset ${this.reader.pos - 1}`);
      if (kind < 2) this.reader.skipLeb(); // catch / catch_ref carry a tag index
      this.markCatchTarget(this.reader.u32());
    }
    this.pushFrame(FRAME_BLOCK, 0);
  }

  /** Catch labels are relative to the frames enclosing the try_table (it is not yet pushed). */
  private markCatchTarget(label: number): void {
    const index = this.frameIndex(label);
    // Landing on the function frame returns to the caller, which reloads after its call. With a
    // call plan it lands on the block around the body, a catch target like any other.
    if ((index === 0 && !this.calls) || this.frameSync[index]) return;
    this.catchTargets.add(this.frameOrdinal[index]!);
    this.foundNewCatchTarget = true;
  }

  private brTable(at: number): void {
    let sync = false;
    for (let n = this.reader.u32() + 1; n > 0; n--) sync = this.labelNeedsSync(this.reader.u32()) || sync;
    if (sync) this.syncBefore(at);
    this.startSegment(0);
  }

  /** A direct call: with a call plan a defined callee takes the counter along (calls.ts). */
  private call(at: number): void {
    const callee = this.reader.u32();
    const target = this.calls ? this.calls.target(callee) : -1;
    if (target < 0) {
      this.aroundCall(at);
      return;
    }
    this.passCounterTo(at, CALL, target);
    emitLocal(this.out, LOCAL_SET, this.counter);
    this.synced = false;
  }

  /** return_call: with a call plan only a defined callee can return the counter for this function. */
  private returnCall(at: number): void {
    const callee = this.reader.u32();
    if (!this.calls) {
      this.syncAndSplit(at);
      return;
    }
    const target = this.calls.target(callee);
    if (target < 0) throw new CounterCannotPass(`return_call of imported function ${callee} at offset ${at}`);
    this.passCounterTo(at, RETURN_CALL, target);
    this.startSegment(0);
  }

  /** Replaces the call at `at` (already decoded) by one to `target` with the counter as last argument. */
  private passCounterTo(at: number, opcode: number, target: number): void {
    this.flush(at);
    emitLocal(this.out, LOCAL_GET, this.counter);
    this.out.u8(opcode);
    this.out.u32(target);
    this.copyFrom = this.reader.pos;
  }

  /** A tail call whose callee returns no counter cannot end a function that must return one. */
  private refuseTailCallWithCounter(at: number): void {
    if (this.calls) throw new CounterCannotPass(`indirect tail call at offset ${at}`);
  }

  /** return with a call plan: the counter joins the results. */
  private returnCounter(at: number): void {
    this.flush(at);
    emitLocal(this.out, LOCAL_GET, this.counter);
    this.startSegment(0);
  }

  /**
   * The final end with a call plan: close the block around the body and push the counter. When
   * a catch clause lands on that block, every way into it published the counter: read it back.
   */
  private closeBodyBlock(at: number): void {
    const reload = this.frameSync[0] === 1;
    if (reload) this.syncBefore(at);
    this.flush(at);
    this.out.u8(END);
    if (reload) {
      this.out.u8(GLOBAL_GET);
      this.out.u32(this.fuelGlobal);
    } else {
      emitLocal(this.out, LOCAL_GET, this.counter);
    }
  }

  private aroundCall(at: number): void {
    this.syncBefore(at);
    // The callee (or host) may have consumed or changed fuel.
    this.flush(this.reader.pos);
    encodeLoad(this.out, this.counter, this.fuelGlobal);
    this.synced = true;
  }

  /** Return, tail call or throw: control leaves this frame with the counter published. */
  private syncAndSplit(at: number): void {
    this.syncBefore(at);
    this.startSegment(0);
  }

  private labelNeedsSync(label: number): boolean {
    return this.frameSync[this.frameIndex(label)] === 1;
  }

  private frameIndex(label: number): number {
    const index = this.depth - 1 - label;
    if (index < 0) throw new Error(`branch label ${label} out of range at offset ${this.reader.pos}`);
    return index;
  }

  private pushFrame(kind: number, sync: number): void {
    if (this.depth === this.frameKind.length) this.growFrames();
    this.frameKind[this.depth] = kind;
    this.frameSync[this.depth] = sync || (kind === FRAME_BLOCK && this.catchTargets.has(this.ordinals)) ? 1 : 0;
    this.frameOrdinal[this.depth] = kind === FRAME_FUNC ? -1 : this.ordinals++;
    this.depth++;
  }

  private growFrames(): void {
    const n = this.frameKind.length * 2;
    this.frameKind = grow(this.frameKind, new Uint8Array(n));
    this.frameSync = grow(this.frameSync, new Uint8Array(n));
    this.frameOrdinal = grow(this.frameOrdinal, new Int32Array(n));
  }

  private closeSegment(): void {
    this.slotCost[this.slots - 1] = this.cost;
    this.cost = 0;
  }

  /** Every segment may charge at its start, so the global is no longer known to be current. */
  private startSegment(flags: number): void {
    this.synced = false;
    if (this.slots > 0) this.closeSegment();
    this.flush(this.reader.pos);
    if (this.slots === this.slotPos.length) this.growSlots();
    this.slotPos[this.slots] = this.out.len;
    this.slotFlags[this.slots] = flags;
    this.slots++;
  }

  private growSlots(): void {
    const n = this.slotPos.length * 2;
    this.slotPos = grow(this.slotPos, new Int32Array(n));
    this.slotCost = grow(this.slotCost, new Int32Array(n));
    this.slotFlags = grow(this.slotFlags, new Uint8Array(n));
  }

  private flush(upTo: number): void {
    this.out.copy(this.reader.bytes, this.copyFrom, upTo);
    this.copyFrom = upTo;
  }

  /** Writes the counter back to the global before the instruction at `at`, unless it is current. */
  private syncBefore(at: number): void {
    if (this.synced) return;
    this.synced = true;
    this.flush(at);
    encodeSync(this.out, this.counter, this.fuelGlobal);
  }

  private renumberLocal(): void {
    const immediate = this.reader.pos;
    const index = this.reader.u32();
    if (index < this.shiftLocalsFrom) return;
    this.flush(immediate);
    this.out.u32(index + 1);
    this.copyFrom = this.reader.pos;
  }

  private renumberGlobal(): void {
    const immediate = this.reader.pos;
    const index = this.reader.u32();
    if (index < this.importedGlobals) return;
    // The fuel import sits after the original imported globals, shifting every defined global by one.
    this.flush(immediate);
    this.out.u32(index + 1);
    this.copyFrom = this.reader.pos;
  }

  private skipMiscOp(at: number): void {
    const sub = this.reader.u32();
    const lebs = FC_LEBS[sub];
    if (lebs === undefined) throw unknownOpcode(at, 0xfc, sub);
    const shift = FC_BULK_SHIFT[sub];
    if (shift !== undefined) this.chargeBySize(at, shift);
    for (let i = 0; i < lebs; i++) this.reader.skipLeb();
  }

  /**
   * Charges the bulk operator at `at` by its size operand, just before it (charge.ts), so that
   * work which grows with an operand costs fuel in proportion, not 1.
   */
  private chargeBySize(at: number, shift: number): void {
    this.flush(at);
    encodeBulkCharge(this.out, shift, this.counter, this.scratch, this.fuelGlobal);
    this.usesScratch = true;
    this.synced = false;
  }

  private skipSimdOp(at: number): void {
    const sub = this.reader.u32();
    switch (SIMD_KIND[sub]) {
      case SIMD_PLAIN:
        return;
      case SIMD_MEMARG:
        this.skipMemarg();
        return;
      case SIMD_MEMARG_LANE:
        this.skipMemarg();
        this.reader.skip(1);
        return;
      case SIMD_LANE:
        this.reader.skip(1);
        return;
      case SIMD_BYTES16:
        this.reader.skip(16);
        return;
      default:
        throw unknownOpcode(at, 0xfd, sub);
    }
  }

  /** Unchecked, as in the hot loop: a memarg running past the body ends there (no final end). */
  private skipMemarg(): void {
    this.reader.pos = skipMemarg(this.reader.bytes, this.reader.pos);
  }
}

function emitLocal(w: Writer, op: number, index: number): void {
  w.u8(op);
  w.u32(index);
}

/** memarg: alignment (bit 6 of its first byte announces a memory index, multi-memory), then the offset. */
function skipMemarg(code: Uint8Array, pos: number): number {
  const align = code[pos]!;
  let p = lebEnd(code, pos);
  if (align & 0x40) p = lebEnd(code, p);
  return lebEnd(code, p);
}

function grow<T extends Uint8Array | Int32Array>(old: T, next: T): T {
  next.set(old);
  return next;
}

function unknownOpcode(at: number, op: number, sub?: number): Error {
  const name = sub === undefined ? `0x${hex(op)}` : `0x${hex(op)} 0x${hex(sub)}`;
  return new Error(`unknown opcode ${name} at offset ${at}`);
}

function hex(n: number): string {
  return n.toString(16).padStart(2, "0");
}
