/**
 * How the counter crosses direct calls. Publishing it to the imported global before every call
 * and reading it back after (and at every entry and exit) costs recursive code 3-4x: V8 must keep
 * each global access and stops inlining the small callees. So every defined function instead
 * takes the counter as an extra last parameter and hands it back as an extra last result, and a
 * direct call passes it in a register. The global is used only where the engine or the host is
 * on the other side: imported functions, `call_indirect`, `call_ref`, throws and catches.
 *
 * A function that escapes (exported, in a table or element segment, a `ref.func` target, the
 * start function) must keep its type at its index: that index becomes a small wrapper that reads
 * the global, calls the function's metered body (appended as a new function with the extended
 * type) and writes the counter back. Everything is appended (types, functions), so existing
 * indices stay valid.
 */
import { CALL, EMPTY_BLOCK_TYPE, END, FUNC_TYPE_FORM, GLOBAL_GET, GLOBAL_SET, I64, LOCAL_GET, Reader, Writer } from "../wasm/index.ts";
import type { ModuleInfo } from "./module-info.ts";

/** Thrown while rewriting a body whose tail call cannot pass the counter on; see instrument.ts. */
export class CounterCannotPass extends Error {}

export class CallPlan {
  readonly #module: Uint8Array;
  readonly #info: ModuleInfo;
  /** Per defined function: the index its metered body is called at (appended when it escapes). */
  readonly #bodyIndex: Int32Array;
  /** Type index -> index of the same type with the counter appended to parameters and results. */
  readonly #extended = new Map<number, number>();
  /** Type index -> encoded block type of its results (for the block around a metered body). */
  readonly #resultBlock = new Map<number, Uint8Array>();
  readonly #newTypes = new Writer(256);
  #newTypeCount = 0;
  readonly escaping: number;

  constructor(module: Uint8Array, info: ModuleInfo) {
    this.#module = module;
    this.#info = info;
    const defined = info.funcTypes.length;
    this.#bodyIndex = new Int32Array(defined);
    let appended = info.importedFuncs + defined;
    for (let d = 0; d < defined; d++) {
      this.#bodyIndex[d] = info.escapes[d] ? appended++ : info.importedFuncs + d;
      this.#planType(info.funcTypes[d]!);
    }
    this.escaping = appended - info.importedFuncs - defined;
  }

  /** The index a direct call to `func` goes to with the counter, or -1 for an imported function. */
  target(func: number): number {
    const d = func - this.#info.importedFuncs;
    return d < 0 ? -1 : this.#bodyIndex[d]!;
  }

  resultBlock(type: number): Uint8Array {
    return this.#resultBlock.get(type)!;
  }

  /** The type section with the extended types (and multi-result block types) appended. */
  typeSection(existing: { start: number; end: number } | undefined): Writer {
    const w = new Writer((existing ? existing.end - existing.start : 0) + this.#newTypes.len + 8);
    let count = 0;
    let entries = 0;
    if (existing) {
      const r = new Reader(this.#module, existing.start, existing.end);
      count = r.u32();
      entries = r.pos;
    }
    w.u32(count + this.#newTypeCount);
    if (existing) w.copy(this.#module, entries, existing.end);
    w.copy(this.#newTypes.buf, 0, this.#newTypes.len);
    return w;
  }

  /** Defined functions: escaping ones keep their type (their wrapper), then the appended bodies. */
  functionSection(): Writer {
    const { funcTypes, escapes } = this.#info;
    const w = new Writer(funcTypes.length * 3 + 8);
    w.u32(funcTypes.length + this.escaping);
    for (let d = 0; d < funcTypes.length; d++) w.u32(escapes[d] ? funcTypes[d]! : this.#extended.get(funcTypes[d]!)!);
    for (let d = 0; d < funcTypes.length; d++) if (escapes[d]) w.u32(this.#extended.get(funcTypes[d]!)!);
    return w;
  }

  /** The wrapper at an escaping function's index: global -> counter, call its body, counter -> global. */
  writeWrapper(w: Writer, d: number, fuelGlobal: number): void {
    const params = this.#info.types[this.#info.funcTypes[d]!]!.params;
    const sizeAt = w.beginSized();
    w.u8(0); // no locals
    for (let i = 0; i < params; i++) {
      w.u8(LOCAL_GET);
      w.u32(i);
    }
    w.u8(GLOBAL_GET);
    w.u32(fuelGlobal);
    w.u8(CALL);
    w.u32(this.#bodyIndex[d]!);
    w.u8(GLOBAL_SET);
    w.u32(fuelGlobal);
    w.u8(END);
    w.endSized(sizeAt);
  }

  #planType(type: number): void {
    if (this.#extended.has(type)) return;
    const t = this.#info.types[type];
    if (!t) throw new Error(`a function has unknown type ${type}`);
    const m = this.#module;
    this.#extended.set(
      type,
      this.#appendType(() => {
        const w = this.#newTypes;
        w.u32(t.params + 1);
        w.copy(m, t.paramBytes[0], t.paramBytes[1]);
        w.u8(I64);
        w.u32(t.results + 1);
        w.copy(m, t.resultBytes[0], t.resultBytes[1]);
        w.u8(I64);
      }),
    );
    if (t.results === 0) this.#resultBlock.set(type, Uint8Array.of(EMPTY_BLOCK_TYPE));
    else if (t.results === 1) this.#resultBlock.set(type, m.slice(t.resultBytes[0], t.resultBytes[1]));
    else {
      const index = this.#appendType(() => {
        this.#newTypes.u8(0); // no parameters
        this.#newTypes.u32(t.results);
        this.#newTypes.copy(m, t.resultBytes[0], t.resultBytes[1]);
      });
      const block = new Writer(8);
      block.sleb(index); // a block type's type index is a signed 33-bit LEB
      this.#resultBlock.set(type, block.result());
    }
  }

  #appendType(writeSignature: () => void): number {
    this.#newTypes.u8(FUNC_TYPE_FORM);
    writeSignature();
    return this.#info.types.length + this.#newTypeCount++;
  }
}
