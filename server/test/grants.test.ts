import * as fs from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import { ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ErrorInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { loadSettings, originAllowed } from "../src/config/index.ts";
import { authorizeGrant, parseGrants, type GrantAllowLists } from "../src/environments/service/grants/index.ts";

const NONE: GrantAllowLists = { filesystemAllow: [], networkAllow: [], secretAllow: [] };

function codeOf(thrown: unknown): string | undefined {
  expect(thrown).toBeInstanceOf(ConnectError);
  return (thrown as ConnectError).findDetails(ErrorInfoSchema)[0]?.reason;
}

async function refusal(work: () => unknown): Promise<{ code: string | undefined; message: string }> {
  try {
    await work();
  } catch (error) {
    return { code: codeOf(error), message: (error as ConnectError).rawMessage };
  }
  throw new Error("expected a refusal");
}

describe("parseGrants", () => {
  it("normalises a full grant: origins canonical and deduplicated, secrets kept by name", () => {
    const grant = parseGrants({
      filesystem: { workspace: "write", scratch: "read" },
      network: ["https://API.Example.com:443", "https://api.example.com/", "HTTPS://*.Example.org", "http://localhost:8080", "https://bücher.example"],
      secrets: ["OPENAI_KEY", "OPENAI_KEY"],
    });
    expect(grant).toEqual({
      filesystem: { workspace: "write", scratch: "read" },
      network: ["https://api.example.com", "https://*.example.org", "http://localhost:8080", "https://xn--bcher-kva.example"],
      secrets: ["OPENAI_KEY"],
    });
  });

  it("defaults omitted access to none", () => {
    expect(parseGrants({})).toEqual({ filesystem: {}, network: [], secrets: [] });
    expect(parseGrants(undefined)).toEqual({ filesystem: {}, network: [], secrets: [] });
  });

  it.each<[string, unknown]>([
    ["not an object", "sandbox"],
    ["an array", [{}]],
    ["an unknown field", { shell: true }],
    ["a name (the environment's name is not a grant)", { name: "x" }],
    ["an unknown filesystem field", { filesystem: { home: "read" } }],
    ["an unknown access mode", { filesystem: { workspace: "admin" } }],
    ["a scratch mode that is not a string", { filesystem: { scratch: true } }],
    ["network not an array", { network: "https://a.example" }],
    ["an origin with a path", { network: ["https://api.example.com/v1"] }],
    ["an origin with a query", { network: ["https://api.example.com?x=1"] }],
    ["an origin with userinfo", { network: ["https://user@api.example.com"] }],
    ["an origin without scheme", { network: ["api.example.com"] }],
    ["a non-HTTP origin", { network: ["ftp://files.example.com"] }],
    ["an http wildcard", { network: ["http://*.example.com"] }],
    ["a wildcard in the middle", { network: ["https://api.*.example.com"] }],
    ["a double wildcard", { network: ["https://*.*.example.com"] }],
    ["a wildcard over an IP", { network: ["https://*.10.0.0.1"] }],
    ["a secret with a dash", { secrets: ["MY-KEY"] }],
    ["a secret that is not a string", { secrets: [1] }],
    ["a secret name longer than 128 characters", { secrets: [`A${"B".repeat(128)}`] }],
  ])("refuses %s with invalid_grant", async (_, value) => {
    expect((await refusal(() => parseGrants(value))).code).toBe("invalid_grant");
  });
});

describe("authorizeGrant", () => {
  let dir: string;
  let allowed: string;
  let outside: string;
  beforeAll(async () => {
    dir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "skillenv-grants-")));
    allowed = path.join(dir, "allowed");
    outside = path.join(dir, "outside");
    await fs.mkdir(path.join(allowed, "envs"), { recursive: true });
    await fs.mkdir(outside);
    await fs.symlink(outside, path.join(allowed, "escape"));
    await fs.symlink(allowed, path.join(dir, "allowed-link"));
  });
  afterAll(() => fs.rm(dir, { recursive: true, force: true }));

  const workspaceGrant = parseGrants({ filesystem: { workspace: "write" } });

  it("denies every requested access with the default (empty) allow-lists", async () => {
    const defaults = loadSettings({}).env;
    const lists = { filesystemAllow: defaults.filesystemAllow, networkAllow: defaults.networkAllow, secretAllow: defaults.secretAllow };
    expect(lists).toEqual(NONE);
    const target = { workspaceRoot: path.join(allowed, "envs", "a") };
    for (const grant of [workspaceGrant, parseGrants({ network: ["https://api.example.com"] }), parseGrants({ secrets: ["HOME"] })]) {
      expect((await refusal(() => authorizeGrant(grant, lists, target))).code).toBe("grant_not_allowed");
    }
  });

  it("allows what omits access, and a scratch, with empty allow-lists", async () => {
    const grant = parseGrants({ filesystem: { scratch: "write" } });
    await expect(authorizeGrant(grant, NONE, { workspaceRoot: outside })).resolves.toBeUndefined();
  });

  it.each<[string, (base: { allowed: string; outside: string; dir: string }) => string, boolean]>([
    ["a root below the allowed root", (b) => path.join(b.allowed, "envs", "a"), true],
    ["the allowed root itself", (b) => b.allowed, true],
    ["a root not created yet", (b) => path.join(b.allowed, "envs", "later", "deeper"), true],
    ["a root reached through a symlink to the allowed root", (b) => path.join(b.dir, "allowed-link", "envs", "a"), true],
    ["a root outside", (b) => path.join(b.outside, "a"), false],
    ["a root escaping with ..", (b) => `${b.allowed}/envs/../../outside/a`, false],
    ["a sibling sharing the allowed prefix", (b) => `${b.allowed}-evil/a`, false],
    ["a root through a symlink that escapes", (b) => path.join(b.allowed, "escape", "a"), false],
    ["a not-yet-created root under an escaping symlink", (b) => path.join(b.allowed, "escape", "new", "a"), false],
  ])("workspace access for %s: allowed=%s", async (_, rootOf, ok) => {
    const lists = { ...NONE, filesystemAllow: [allowed] };
    const check = () => authorizeGrant(workspaceGrant, lists, { workspaceRoot: rootOf({ allowed, outside, dir }) });
    if (ok) await expect(check()).resolves.toBeUndefined();
    else {
      const { code, message } = await refusal(check);
      expect(code).toBe("grant_not_allowed");
      expect(message).toContain("SERVICE_ENV_FILESYSTEM_ALLOW");
      expect(message).not.toContain(dir);
    }
  });

  it("resolves symlinks in the allowed roots too", async () => {
    const lists = { ...NONE, filesystemAllow: [path.join(dir, "allowed-link")] };
    await expect(authorizeGrant(workspaceGrant, lists, { workspaceRoot: path.join(allowed, "envs", "a") })).resolves.toBeUndefined();
  });

  const ALLOW_NETWORK = ["https://api.example.com", "https://*.example.org", "http://localhost:8080", "https://*.svc.example.net:8443"];

  it.each<[string, boolean]>([
    ["https://api.example.com", true],
    ["https://API.EXAMPLE.COM:443", true],
    ["https://example.com", false],
    ["http://api.example.com", false],
    ["https://api.example.com:8443", false],
    ["https://api.example.com.evil.test", false],
    ["https://evilapi.example.com", false],
    ["https://*.example.com", false],
    ["https://a.example.org", true],
    ["https://a.b.example.org", true],
    ["https://*.example.org", true],
    ["https://*.sub.example.org", true],
    ["https://example.org", false],
    ["https://notexample.org", false],
    ["https://a.example.org.evil.test", false],
    ["https://*.org", false],
    ["http://a.example.org", false],
    ["https://a.example.org:444", false],
    ["http://localhost:8080", true],
    ["http://localhost", false],
    ["https://localhost:8080", false],
    ["https://x.svc.example.net:8443", true],
    ["https://x.svc.example.net", false],
  ])("network origin %s: allowed=%s", async (origin, ok) => {
    const grant = parseGrants({ network: [origin] });
    const check = () => authorizeGrant(grant, { ...NONE, networkAllow: ALLOW_NETWORK }, { workspaceRoot: outside });
    if (ok) await expect(check()).resolves.toBeUndefined();
    else {
      const { code, message } = await refusal(check);
      expect(code).toBe("grant_not_allowed");
      expect(message).toContain("SERVICE_ENV_NETWORK_ALLOW");
    }
  });

  it("allows an IPv6 origin that SERVICE_ENV_NETWORK_ALLOW lists, whatever its spelling on either side", async () => {
    const lists = { ...NONE, networkAllow: loadSettings({ SERVICE_ENV_NETWORK_ALLOW: "http://[0:0::1]:8080" }).env.networkAllow };
    await expect(authorizeGrant(parseGrants({ network: ["http://[::1]:8080"] }), lists, { workspaceRoot: outside })).resolves.toBeUndefined();
    await expect(authorizeGrant(parseGrants({ network: ["HTTP://[0::1]:8080/"] }), lists, { workspaceRoot: outside })).resolves.toBeUndefined();
    const { code } = await refusal(() => authorizeGrant(parseGrants({ network: ["http://[::2]:8080"] }), lists, { workspaceRoot: outside }));
    expect(code).toBe("grant_not_allowed");
  });

  it("allows only listed secrets, by exact name", async () => {
    const lists = { ...NONE, secretAllow: ["OPENAI_KEY", "GITHUB_TOKEN"] };
    await expect(authorizeGrant(parseGrants({ secrets: ["OPENAI_KEY"] }), lists, { workspaceRoot: outside })).resolves.toBeUndefined();
    for (const secret of ["openai_key", "AWS_SECRET", "OPENAI_KEY_2"]) {
      const { code, message } = await refusal(() => authorizeGrant(parseGrants({ secrets: ["GITHUB_TOKEN", secret] }), lists, { workspaceRoot: outside }));
      expect(code).toBe("grant_not_allowed");
      expect(message).toContain(secret);
      expect(message).toContain("SERVICE_ENV_SECRET_ALLOW");
    }
  });
});

describe("originAllowed (per outgoing request)", () => {
  const granted = parseGrants({ network: ["https://api.example.com", "https://*.example.org", "http://127.0.0.1:9000", "http://[::1]:9000"] }).network;

  it.each<[string, boolean]>([
    ["https://api.example.com/v1/chat?x=1", true],
    ["https://api.example.com:443/", true],
    ["https://API.Example.COM/", true],
    ["https://api%2Eexample.com/", true],
    ["https://api.example.com:8443/", false],
    ["http://api.example.com/", false],
    ["https://example.com/", false],
    ["https://api.example.com.evil.test/", false],
    ["https://api.example.com@evil.test/", false],
    ["https://user:pass@api.example.com/", false],
    ["https://api.example.com./", false],
    ["https://a.b.example.org/path", true],
    ["https://example.org/", false],
    ["https://xexample.org/", false],
    ["wss://api.example.com/", false],
    ["file:///etc/passwd", false],
    ["http://127.0.0.1:9000/", true],
    ["http://0x7f.0.0.1:9000/", true],
    ["http://127.0.0.1:9001/", false],
    ["http://[::1]:9000/", true],
    ["http://[0:0:0:0:0:0:0:1]:9000/", true],
    ["not a url", false],
  ])("%s: %s", (url, ok) => {
    expect(originAllowed(granted, url)).toBe(ok);
  });

  it("allows nothing without granted origins", () => {
    expect(originAllowed([], "https://api.example.com/")).toBe(false);
  });

  it("normalises IDN hosts like the URL parser", () => {
    const idn = parseGrants({ network: ["https://*.bücher.example"] }).network;
    expect(originAllowed(idn, "https://shop.BÜCHER.example/")).toBe(true);
    expect(originAllowed(idn, "https://shop.xn--bcher-kva.example/")).toBe(true);
    expect(originAllowed(idn, "https://shop.bucher.example/")).toBe(false);
  });
});
