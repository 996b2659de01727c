import { ConnectError, createHandlerContext } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { AssetService } from "../../gen/skillenv/assets/v1/assets_pb.js";
import { ApiKeys, authenticationGate, workspaceContextKey } from "../src/auth/index.ts";

const KEY_A = "key-a-0123456789abcdef";
const KEY_B = "key-b-0123456789abcdef";

/** The workspace the gate sets for a call with this Authorization header, or the stable reason it refuses it. */
async function authenticate(gate: ReturnType<typeof authenticationGate>, authorization: string | undefined): Promise<string> {
  const context = createHandlerContext({
    service: AssetService,
    method: AssetService.method.presign,
    protocolName: "test",
    requestMethod: "POST",
    url: "http://localhost/skillenv.assets.v1.AssetService/Presign",
    requestHeader: authorization === undefined ? {} : { authorization },
  });
  try {
    await gate(context);
  } catch (error) {
    return `refused: ${ConnectError.from(error).rawMessage}`;
  }
  return context.values.get(workspaceContextKey) ?? "no workspace";
}

describe("authentication gate", () => {
  const gate = () =>
    authenticationGate(
      new ApiKeys(
        new Map([
          [KEY_A, "a"],
          [KEY_B, "b"],
        ]),
      ),
      new Set(),
    );

  it("keeps answering each key with its own workspace once it has seen it", async () => {
    const check = gate();
    for (let i = 0; i < 3; i++) {
      expect(await authenticate(check, `Bearer ${KEY_A}`)).toBe("a");
      expect(await authenticate(check, `Bearer ${KEY_B}`)).toBe("b");
    }
  });

  it("refuses a key that differs from a remembered one, and every malformed header, each time", async () => {
    const check = gate();
    expect(await authenticate(check, `Bearer ${KEY_A}`)).toBe("a");
    for (let i = 0; i < 2; i++) {
      expect(await authenticate(check, `Bearer ${KEY_A}x`)).toMatch(/^refused: the API key is not valid/);
      expect(await authenticate(check, `Bearer ${KEY_A.slice(0, -1)}`)).toMatch(/^refused: the API key is not valid/);
      expect(await authenticate(check, undefined)).toMatch(/^refused: missing Authorization header/);
      expect(await authenticate(check, "Bearer ")).toMatch(/^refused: the Authorization header has no key/);
      expect(await authenticate(check, `Basic ${KEY_A}`)).toMatch(/^refused: the Authorization scheme must be Bearer/);
    }
  });

  it("still verifies keys once more headers have been seen than it remembers", async () => {
    const check = gate();
    // Every spelling of the header is remembered on its own; far more than fit.
    for (let spaces = 1; spaces <= 200; spaces++) expect(await authenticate(check, `Bearer${" ".repeat(spaces)}${KEY_A}`)).toBe("a");
    expect(await authenticate(check, `Bearer ${KEY_B}`)).toBe("b");
    expect(await authenticate(check, `Bearer ${KEY_A}`)).toBe("a");
    expect(await authenticate(check, "Bearer not-a-key-of-anyone")).toMatch(/^refused: the API key is not valid/);
  });
});
