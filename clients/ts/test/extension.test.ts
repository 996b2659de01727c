import { inspect } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ExecuteRequest, SetupRequest } from "../../../gen/skillenv/extension/v1/extension_pb.js";
import { jsonOf, TestExtension } from "../../../server/test/helpers/extension.ts";
import { KEY_A, requestLogSince, startTestService, type TestService } from "../../../server/test/helpers/service.ts";
import { createNodeTransport, createServiceClient, environment, PlacementError, serviceEnv, tool, type ServiceClient, type SessionEvent } from "../src/node.ts";

const TOKEN = "ext-token-3f9a1c-never-shown";

/** An extension kind as a team would define it: where its instances live, their token, what they are set up with. */
const remoteShell = environment({
  options: { baseUrl: "string", token: "string?", region: "string", packages: "string[]?", limits: "json?" },
  url: (options) => options.baseUrl,
  credential: (options) => options.token,
  configure: (options) => ({ region: options.region, packages: options.packages ?? [], limits: options.limits ?? null }),
});

let extension: TestExtension;
let service: TestService;
let client: ServiceClient;
beforeAll(async () => {
  extension = await new TestExtension().start();
  service = await startTestService({ SERVICE_ENV_NETWORK_ALLOW: extension.url });
  client = createServiceClient(createNodeTransport({ baseUrl: service.url, apiKey: KEY_A }));
});
afterAll(async () => {
  await service?.close();
  await extension?.close();
});

describe("environment(...)", () => {
  it("computes an instance's url, credential and configuration from its options, with no I/O", () => {
    const calls = extension.calls.length;
    const remote = remoteShell({ name: "remote", baseUrl: extension.url, token: TOKEN, region: "eu", packages: ["git"] });

    expect(remote).toEqual({
      kind: "extension",
      name: "remote",
      setup: "automatic",
      url: extension.url,
      configuration: { region: "eu", packages: ["git"], limits: null },
      hasCredential: true,
    });
    expect(Object.isFrozen(remote)).toBe(true);
    // The credential travels with the definition, but nothing prints or serialises it.
    expect(JSON.stringify(remote)).not.toContain(TOKEN);
    expect(inspect(remote, { showHidden: true, depth: 10 })).not.toContain(TOKEN);
    expect(remoteShell({ name: "anonymous", baseUrl: extension.url, region: "us", setup: "manual" })).toMatchObject({ setup: "manual", hasCredential: false });
    expect(extension.calls.length).toBe(calls);
  });

  it("refuses an instance whose options break the schema, naming the option", () => {
    const instance = (options: Record<string, unknown>) => () => remoteShell({ name: "remote", baseUrl: extension.url, region: "eu", ...options } as never);
    expect(instance({ region: undefined })).toThrow(new TypeError('extension environment "remote": option region is required'));
    expect(instance({ region: 3 })).toThrow(new TypeError('extension environment "remote": option region must be a string, not 3 (a number)'));
    expect(instance({ packages: ["git", 7] })).toThrow(/option packages must be a string\[\], not an array/);
    expect(instance({ limits: { cpu: 1n } })).toThrow(/option limits must be a JSON value, not an object/);
    expect(instance({ regoin: "eu" })).toThrow(
      new TypeError('extension environment "remote": unknown option regoin; the options are name, setup, baseUrl, token, region, packages, limits'),
    );
    expect(instance({ baseUrl: "ftp://files.example.com" })).toThrow(/the url must be an http\(s\) URL, not "ftp:\/\/files.example.com"/);
    expect(instance({ token: "" })).toThrow(/the credential must be a non-empty string or undefined/);
  });

  it("refuses a schema it cannot check, or one that declares what every instance takes", () => {
    const url = () => "http://127.0.0.1:1";
    expect(() => environment({ options: { size: "integer" } as never, url })).toThrow(
      new TypeError('option size: "integer" is not one of string, number, boolean, string[], json (with "?" when optional)'),
    );
    expect(() => environment({ options: { name: "string" }, url })).toThrow(/cannot declare name: every instance takes it/);
    const unserialisable = environment({ options: {}, url, configure: () => ({ at: 1n }) });
    expect(() => unserialisable({ name: "x" })).toThrow(/extension environment "x": the configuration is not JSON/);
  });

  it("takes an opaque implementation, or none, for its tools", () => {
    const remote = remoteShell({ name: "remote", baseUrl: extension.url, region: "eu" });
    expect(tool({ name: "echo", environment: remote, implementation: { opaque: { kind: "echo" } } }).implementation).toEqual({ opaque: { kind: "echo" } });
    expect(() => tool({ name: "echo", environment: remote, implementation: "a".repeat(64) })).toThrow(
      new PlacementError("tool echo is placed in the extension environment remote, which takes an opaque implementation ({ opaque: <any JSON> }) or none"),
    );
    expect(() => tool({ name: "echo", environment: serviceEnv({ name: "sandbox" }), implementation: { opaque: "x" } })).toThrow(
      /which runs a tool id, a component or a program/,
    );
  });
});

describe("a session with an extension environment", () => {
  it("carries url, credential and configuration to the extension, and runs its tools", async () => {
    const remote = remoteShell({ name: "remote", baseUrl: extension.url, token: TOKEN, region: "eu", limits: { cpu: 2 } });
    const session = await client.sessions.create({
      environments: [remote],
      tools: [tool({ name: "echo", environment: remote, implementation: { opaque: { kind: "echo" } } })],
    });
    expect(session.environments).toEqual([{ name: "remote", kind: "extension", setup: "automatic", state: "ready" }]);

    const setup = extension.calls.findLast((call) => call.method === "setup")!;
    expect(setup.authorization).toBe(`Bearer ${TOKEN}`);
    expect(jsonOf((setup.request as SetupRequest).configuration)).toEqual({ region: "eu", packages: [], limits: { cpu: 2 } });
    const result = await session.callTool("echo", { hello: "extension" });
    expect(result).toMatchObject({ outcome: "returned", output: { hello: "extension" } });
    const execute = extension.calls.findLast((call) => call.method === "execute")!;
    expect(jsonOf((execute.request as ExecuteRequest).implementation)).toEqual({ kind: "echo" });
    expect(execute.authorization).toBe(`Bearer ${TOKEN}`);
    await session.delete();
  });

  it("never shows the credential: not in the session the service answers, nor in its events", async () => {
    const remote = remoteShell({ name: "remote", baseUrl: extension.url, token: TOKEN, region: "eu" });
    const session = await client.sessions.create({ environments: [remote], tools: [tool({ name: "echo", environment: "remote" })] });
    await session.callTool("echo", {});
    await session.end();

    const fetched = await client.sessions.get(session.id);
    expect(JSON.stringify(fetched.record)).not.toContain(TOKEN);
    const raw = await fetch(`${service.url}/v1/sessions/${session.id}`, { headers: { authorization: `Bearer ${KEY_A}` } });
    const body = await raw.text();
    expect(body).toContain(extension.url);
    expect(body).not.toContain(TOKEN);
    const events: SessionEvent[] = [];
    for await (const event of session.events()) events.push(event);
    expect(events.at(-1)?.type).toBe("session.ended");
    expect(JSON.stringify(events)).not.toContain(TOKEN);
    await session.delete();
  });

  it("refuses, before calling anything, a tool placed by name with an implementation its kind does not take", async () => {
    const remote = remoteShell({ name: "remote", baseUrl: extension.url, region: "eu" });
    const from = service.logs.length;
    await expect(
      client.sessions.create({ environments: [remote], tools: [tool({ name: "echo", environment: "remote", implementation: "a".repeat(64) })] }),
    ).rejects.toThrow(PlacementError);
    expect(await requestLogSince(service, from)).toEqual([]);
  });
});
