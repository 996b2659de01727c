import { parse } from "@bytecodealliance/jco";
import { describe, expect, it } from "vitest";
import { FUEL_IMPORT, instrumentFuel } from "../../src/engine/fuel/index.ts";
import { FC_LEBS, OP_KIND, OP_UNKNOWN, SIMD_KIND, SIMD_UNKNOWN } from "../../src/engine/fuel/opcodes.ts";

const HEADER = [0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00];

function leb(n: number): number[] {
  const out: number[] = [];
  do {
    const low = n & 0x7f;
    n >>>= 7;
    out.push(n ? low | 0x80 : low);
  } while (n);
  return out;
}

/** A module with one `[] -> []` function whose expression is `body` (which sits at the very end). */
function moduleWithBody(body: number[]): Uint8Array<ArrayBuffer> {
  const entry = [0x00, ...body]; // no locals
  const code = [0x01, ...leb(entry.length), ...entry];
  return new Uint8Array([
    ...HEADER,
    ...[0x01, 0x04, 0x01, 0x60, 0x00, 0x00], // type section: (func)
    ...[0x03, 0x02, 0x01, 0x00], // function section
    ...[0x0a, ...leb(code.length), ...code],
  ]);
}

/** Offset of body[index] in moduleWithBody(body). */
function offsetOf(body: number[], index: number): number {
  return moduleWithBody(body).length - body.length + index;
}

describe("instrumentFuel refuses what it cannot decode", () => {
  it("throws on an unknown opcode, naming it and its offset", () => {
    const body = [0x41, 0x00, 0x1a, 0xff, 0x0b];
    expect(() => instrumentFuel(moduleWithBody(body))).toThrow(`unknown opcode 0xff at offset ${offsetOf(body, 3)}`);
  });

  it("throws on unassigned SIMD and misc sub-opcodes", () => {
    expect(() => instrumentFuel(moduleWithBody([0xfd, 0x9a, 0x01, 0x0b]))).toThrow("unknown opcode 0xfd 0x9a");
    expect(() => instrumentFuel(moduleWithBody([0xfc, 0x12, 0x0b]))).toThrow("unknown opcode 0xfc 0x12");
  });

  it("throws on GC and atomic prefixes rather than guessing their immediates", () => {
    expect(() => instrumentFuel(moduleWithBody([0xfb, 0x00, 0x0b]))).toThrow("unknown opcode 0xfb");
    expect(() => instrumentFuel(moduleWithBody([0xfe, 0x03, 0x00, 0x0b]))).toThrow("unknown opcode 0xfe");
  });

  it("throws on a body without final end or with trailing bytes", () => {
    expect(() => instrumentFuel(moduleWithBody([0x01, 0x01]))).toThrow(/no final end/);
    expect(() => instrumentFuel(moduleWithBody([0x0b, 0x01]))).toThrow(/trailing bytes/);
  });

  it("throws on non-wasm input, GC type forms and modules instrumented already", async () => {
    expect(() => instrumentFuel(new TextEncoder().encode("not wasm at all"))).toThrow(/not a core wasm module/);
    const gc = new Uint8Array([...HEADER, 0x01, 0x05, 0x01, 0x5f, 0x01, 0x7f, 0x00]); // (type (struct (field i32)))
    expect(() => instrumentFuel(gc)).toThrow(/unsupported type form 0x5f/);
    const once = instrumentFuel(new Uint8Array(await parse(`(module (func))`))).bytes;
    expect(() => instrumentFuel(once)).toThrow(/already imports the fuel global/);
  });
});

describe("instrumentFuel on minimal modules", () => {
  it("creates the import section when the module has none, even without code", async () => {
    for (const wat of [`(module)`, `(module (memory 1) (func (export "f")))`]) {
      const out = instrumentFuel(new Uint8Array(await parse(wat))).bytes;
      expect(WebAssembly.validate(out)).toBe(true);
      expect(WebAssembly.Module.imports(new WebAssembly.Module(out))).toEqual([{ module: FUEL_IMPORT.module, name: FUEL_IMPORT.name, kind: "global" }]);
    }
  });

  it("accepts padded (non-minimal) LEB128 immediates", () => {
    // i32.const 5 with a 5-byte LEB, local-free drop, end.
    const out = instrumentFuel(moduleWithBody([0x41, 0x85, 0x80, 0x80, 0x80, 0x00, 0x1a, 0x0b])).bytes;
    expect(WebAssembly.validate(out)).toBe(true);
  });
});

/** True when V8 reports the opcode as unknown (rather than failing validation for another reason). */
function v8RejectsOpcode(body: number[]): boolean {
  try {
    new WebAssembly.Module(moduleWithBody([...body, 0x0b]));
    return false;
  } catch (error) {
    return /invalid (simd |numeric )?opcode/i.test(String(error));
  }
}

describe("opcode tables", () => {
  it("know exactly the opcodes V8 knows, except the GC and atomics prefixes", () => {
    const disagreements: string[] = [];
    for (let op = 0; op < 0x100; op++) {
      if (op === 0xfc || op === 0xfd) continue;
      if (v8RejectsOpcode([op]) !== (OP_KIND[op] === OP_UNKNOWN)) disagreements.push(`0x${op.toString(16)}`);
    }
    for (let sub = 0; sub < 0x200; sub++) {
      const ours = (SIMD_KIND[sub] ?? SIMD_UNKNOWN) === SIMD_UNKNOWN;
      if (v8RejectsOpcode([0xfd, ...leb(sub)]) !== ours) disagreements.push(`0xfd 0x${sub.toString(16)}`);
    }
    for (let sub = 0; sub < 0x40; sub++) {
      if (v8RejectsOpcode([0xfc, ...leb(sub)]) !== (FC_LEBS[sub] === undefined)) disagreements.push(`0xfc 0x${sub.toString(16)}`);
    }
    expect(disagreements).toEqual(["0xfb", "0xfe"]);
  });
});
