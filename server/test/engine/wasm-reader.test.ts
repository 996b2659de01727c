import { describe, expect, it } from "vitest";
import { ComponentFormatError, readComponentSections } from "../../src/engine/component/index.ts";
import { instrumentFuel } from "../../src/engine/fuel/index.ts";
import { CORE_MODULE_PREAMBLE, Reader } from "../../src/engine/wasm/index.ts";

const COMPONENT_PREAMBLE = [0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00];

const reader = (...bytes: number[]) => new Reader(Uint8Array.from(bytes), 0, bytes.length);

describe("the engine's one wasm reader", () => {
  it("reads u32 LEB128 up to 32 bits, padded or not", () => {
    expect(reader(0x00).u32()).toBe(0);
    expect(reader(0xe5, 0x8e, 0x26).u32()).toBe(624485);
    expect(reader(0x85, 0x80, 0x80, 0x80, 0x00).u32()).toBe(5);
    expect(reader(0xff, 0xff, 0xff, 0xff, 0x0f).u32()).toBe(0xffffffff);
  });

  it("refuses a u32 wider than 32 bits or longer than 5 bytes, with its offset", () => {
    expect(() => reader(0xff, 0xff, 0xff, 0xff, 0x1f).u32()).toThrow("LEB128 longer than 5 bytes or wider than 32 bits at offset 0");
    expect(() => reader(0x80, 0x80, 0x80, 0x80, 0x80, 0x00).u32()).toThrow(/at offset 0/);
  });

  it("refuses reading past its end, which need not be the bytes' end", () => {
    expect(() => reader(0x80).u32()).toThrow("unexpected end of data at offset 1");
    expect(() => new Reader(Uint8Array.of(1, 2, 3), 0, 2).skip(3)).toThrow("unexpected end of data at offset 0");
    const r = new Reader(Uint8Array.of(1, 2, 3), 1, 2);
    expect(r.u8()).toBe(2);
    expect(() => r.peek()).toThrow("unexpected end of data at offset 2");
  });

  it("throws what its owner makes of a fault", () => {
    const r = new Reader(Uint8Array.of(0x80), 0, 1, (fault, offset) => new RangeError(`${fault} @${offset}`));
    expect(() => r.u32()).toThrow(new RangeError("truncated @1"));
  });
});

describe("each owner keeps its errors", () => {
  // A custom section (id 0) whose size is a 5-byte LEB128 with a bit above the 32nd.
  const wideSize = [0x00, 0x80, 0x80, 0x80, 0x80, 0x10];

  it("the fuel rewriter throws a plain Error with the offset", () => {
    const module = Uint8Array.from([...CORE_MODULE_PREAMBLE, ...wideSize]);
    expect(() => instrumentFuel(module)).toThrow("LEB128 longer than 5 bytes or wider than 32 bits at offset 9");
  });

  it("the component reader throws ComponentFormatError, which admission reports as invalid_component", () => {
    const wide = Uint8Array.from([...COMPONENT_PREAMBLE, ...wideSize]);
    expect(() => readComponentSections(wide)).toThrow(ComponentFormatError);
    expect(() => readComponentSections(wide)).toThrow("malformed LEB128 integer");
    const truncated = Uint8Array.from([...COMPONENT_PREAMBLE, 0x00, 0x80]);
    expect(() => readComponentSections(truncated)).toThrow(ComponentFormatError);
    expect(() => readComponentSections(truncated)).toThrow("truncated component");
  });
});
