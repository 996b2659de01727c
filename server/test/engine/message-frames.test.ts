import { describe, expect, it } from "vitest";
import { encodeFrame, FrameReader } from "../../src/engine/pool/message-frames.ts";

function reader(maxBytes = 1 << 20) {
  const messages: unknown[] = [];
  const broken: string[] = [];
  const frames = new FrameReader(
    maxBytes,
    (message) => messages.push(message),
    (reason) => broken.push(reason),
  );
  return { frames, messages, broken };
}

describe("the worker protocol's frames", () => {
  const sent = [
    { type: "receipt", invocation: 1, receipt: { outcome: "returned", output: "é ✓ 𝄞 \n\u0000", fuelUsed: 7 } },
    { type: "ready" },
    { type: "emit", invocation: 2, payload: "x".repeat(70_000) },
  ];
  const bytes = Buffer.concat(sent.map((message) => encodeFrame(message)));

  it("decodes messages in order however the stream cuts them: many in one chunk, one over many, byte by byte", () => {
    for (const cut of [bytes.length, 1, 3, 5, 4096]) {
      const { frames, messages, broken } = reader();
      for (let at = 0; at < bytes.length; at += cut) frames.push(bytes.subarray(at, at + cut));
      expect(messages).toEqual(sent);
      expect(broken).toEqual([]);
    }
  });

  it("prefixes each frame with its UTF-8 length", () => {
    const frame = encodeFrame("𝄞é");
    expect(frame.readUInt32BE(0)).toBe(frame.length - 4);
    expect(frame.subarray(4).toString("utf8")).toBe('"𝄞é"');
  });

  it("stops at a frame longer than allowed, or one that is not JSON, and decodes nothing after", () => {
    const long = reader(16);
    long.frames.push(Buffer.concat([encodeFrame("x".repeat(20)), encodeFrame({ type: "ready" })]));
    expect(long.messages).toEqual([]);
    expect(long.broken).toHaveLength(1);

    const garbled = reader();
    const bad = Buffer.from("\u0000\u0000\u0000\u0002{x", "latin1");
    garbled.frames.push(Buffer.concat([encodeFrame(1), bad, encodeFrame(2)]));
    garbled.frames.push(encodeFrame(3));
    expect(garbled.messages).toEqual([1]);
    expect(garbled.broken).toHaveLength(1);
  });
});
