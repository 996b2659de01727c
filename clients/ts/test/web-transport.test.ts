import { ConnectError } from "@connectrpc/connect";
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { KEY_A, startTestService, type TestService } from "../../../server/test/helpers/service.ts";
import { ErrorInfoSchema } from "../gen/google/rpc/error_details_pb.js";
import { createServiceClient, createWebTransport } from "../src/web.ts";

let service: TestService;
beforeAll(async () => {
  service = await startTestService();
});
afterAll(() => service.close());

// The browser transports (fetch based) exercised from Node's fetch; unary calls only, which is
// all Connect-Web offers for request bodies.
describe.each(["connect", "grpc-web"] as const)("web transport (%s)", (protocol) => {
  it("uploads an asset and reads a refusal's stable code", async () => {
    const client = createServiceClient(createWebTransport({ baseUrl: service.url, apiKey: KEY_A, protocol }));
    const result = await client.uploadAsset(randomBytes(512));
    expect(result).toMatchObject({ sizeBytes: 512, uploaded: true });
    const error = ConnectError.from(await client.skills.get("nothing-here").catch((e: unknown) => e));
    expect(error.findDetails(ErrorInfoSchema)[0]?.reason).toBe("skill_not_found");
  });
});
