import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testComponent, withCustomSection } from "../../../server/test/helpers/components.ts";
import { KEY_A, requestLogSince, startTestService, type TestService } from "../../../server/test/helpers/service.ts";
import { createNodeTransport, createServiceClient } from "../src/node.ts";

const MiB = 1024 * 1024;
const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

/** A server whose inline limit is below the size the client first offers inline (4 MiB). */
let service: TestService;
let tool: Uint8Array;
beforeAll(async () => {
  service = await startTestService({ SERVICE_ENV_MAX_INLINE_BYTES: String(MiB) });
  tool = await testComponent("tool");
});
afterAll(() => service?.close());

/** What was called since `from`: the RPC's short name and its code, or the object-store PUT. */
async function callsSince(from: number): Promise<string[]> {
  return (await requestLogSince(service, from)).map((line) =>
    line.protocol === "object-store" ? "object-store PUT" : `${String(line.procedure).split("/")[1]} ${line.code}`,
  );
}

describe("client.env.admitComponent and the server's inline limit (issue #7, item 13)", () => {
  it("sends a component the server refuses inline as an asset instead, and then goes straight to the upload", async () => {
    const client = createServiceClient(createNodeTransport({ baseUrl: service.url, apiKey: KEY_A }));

    const twoMiB = withCustomSection(tool, "two-mib", 2 * MiB);
    let mark = service.logs.length;
    expect(await client.env.admitComponent({ kind: "tool", bytes: twoMiB })).toBe(sha256(twoMiB));
    expect(await callsSince(mark)).toEqual([
      "GetTool not_found",
      "AdmitTool component_too_large",
      "Presign ok",
      "object-store PUT",
      "Finalize ok",
      "AdmitTool ok",
    ]);

    const oneAndAHalf = withCustomSection(tool, "one-and-a-half-mib", 1.5 * MiB);
    mark = service.logs.length;
    expect(await client.env.admitComponent({ kind: "tool", bytes: oneAndAHalf })).toBe(sha256(oneAndAHalf));
    expect(await callsSince(mark)).toEqual(["GetTool not_found", "Presign ok", "object-store PUT", "Finalize ok", "AdmitTool ok"]);

    const small = withCustomSection(tool, "small");
    mark = service.logs.length;
    expect(await client.env.admitComponent({ kind: "tool", bytes: small })).toBe(sha256(small));
    expect(await callsSince(mark)).toEqual(["GetTool not_found", "AdmitTool ok"]);
  });
});
