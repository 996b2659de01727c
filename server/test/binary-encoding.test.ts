// The patched toBinary (patches/@bufbuild+protobuf+2.17.0.patch; docs/performance.md, "A noisy
// neighbour"): one writer reused between calls. What must hold whatever the reuse does.
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { DurationSchema, ValueSchema } from "@bufbuild/protobuf/wkt";
import { describe, expect, it } from "vitest";

describe("toBinary with a reused writer", () => {
  it("is the patched one: npm install applied the patch", () => {
    expect(String(toBinary)).toContain("spareWriter");
  });

  it("gives each message bytes of its own: a large one is not overwritten by the next", () => {
    const large = create(ValueSchema, { kind: { case: "stringValue", value: "a".repeat(3 << 20) } });
    const first = toBinary(ValueSchema, large);
    const second = toBinary(ValueSchema, create(ValueSchema, { kind: { case: "stringValue", value: "b".repeat(1 << 20) } }));
    expect(first.buffer).not.toBe(second.buffer);
    expect(first.byteLength).toBe(first.buffer.byteLength);
    expect(fromBinary(ValueSchema, first)).toEqual(large);
    expect(second.subarray(-3)).toEqual(new TextEncoder().encode("bbb"));
  });

  it("starts clean after an encoding that failed half-way", () => {
    // seconds is written before nanos is refused: a writer reused as it was left would prefix it.
    expect(() => toBinary(DurationSchema, create(DurationSchema, { seconds: 5n, nanos: 1.5 }))).toThrow(/int32/);
    expect([...toBinary(DurationSchema, create(DurationSchema, { seconds: 7n }))]).toEqual([0x08, 0x07]);
  });
});
