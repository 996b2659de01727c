// Builds components/ and checks every component against wit/env.wit, then runs
// them in-process the way the service does: jco transpile (async instantiation)
// + preview2-shim's WASIShim, a fresh instance per invocation.
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";
import { Worker } from "node:worker_threads";
import { componentWit, transpile } from "@bytecodealliance/jco";
import { WASIShim } from "@bytecodealliance/preview2-shim/instantiation";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildComponents, type BuiltComponent } from "../../../scripts/build-components.ts";

type TranspileOptions = NonNullable<Parameters<typeof transpile>[1]>;
type Entrypoint = (input: string, configuration: string, deadlineMs: bigint) => unknown;
type GetCoreModule = (path: string) => Promise<WebAssembly.Module>;
type Instantiate = (getCoreModule: GetCoreModule, imports: Record<string, unknown>) => Promise<Record<string, Entrypoint>>;
interface Failure {
  code: string;
  message: string;
}
type Outcome = { ok: string } | { err: Failure };

const TOOL_EXPORT = "export run: func(input: string, configuration: string, deadline-ms: u64) -> result<string, failure>;";
const LOOP_EXPORT = "export turn: func(input: string, configuration: string, deadline-ms: u64) -> result<string, failure>;";
/** WASI interfaces every component may import: no grant needed (see docs/wit.md). */
const ALWAYS_PROVIDED = /^wasi:(io\/|clocks\/|random\/|cli\/(stdin|stdout|stderr|terminal-[a-z]+)@)/;

/** Each component's world and the imports that need a grant or the host interface. */
const COMPONENTS: Record<string, { world: "tool" | "agent-loop"; granted: string[] }> = {
  "echo-wat": { world: "tool", granted: [] },
  "counter-wat": { world: "tool", granted: [] },
  "loop-wat": { world: "tool", granted: [] },
  "memory-hog-wat": { world: "tool", granted: [] },
  "fib-wat": { world: "tool", granted: [] },
  "echo-js": { world: "tool", granted: [] },
  "workspace-js": { world: "tool", granted: ["wasi:filesystem/preopens", "wasi:filesystem/types"] },
  "secrets-js": { world: "tool", granted: ["wasi:filesystem/preopens", "wasi:filesystem/types"] },
  "fetch-js": { world: "tool", granted: ["wasi:http/outgoing-handler", "wasi:http/types"] },
  "agent-loop-js": { world: "agent-loop", granted: ["skillenv:env/host"] },
  // componentize-js's `stdio` feature brings wasi:filesystem along (its WASI
  // preview1 adapter); without a filesystem grant the guest sees no preopens.
  "js-program-tool": { world: "tool", granted: ["wasi:filesystem/preopens", "wasi:filesystem/types"] },
  "js-program-agent-loop": { world: "agent-loop", granted: ["skillenv:env/host", "wasi:filesystem/preopens", "wasi:filesystem/types"] },
};

let built: Map<string, BuiltComponent>;
let scratch: string;

beforeAll(async () => {
  built = new Map((await buildComponents({ log: () => {} })).map((component) => [component.name, component]));
  scratch = await mkdtemp(join(tmpdir(), "components-test-"));
}, 600_000);

afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});

const loaded = new Map<string, ReturnType<typeof transpileAndImport>>();

/** A factory of fresh instances of a component, transpiled once per set of options. */
function load(name: string, options: Partial<TranspileOptions> = {}) {
  const key = `${name} ${JSON.stringify(options)}`;
  if (!loaded.has(key)) loaded.set(key, transpileAndImport(name, options));
  return loaded.get(key) as ReturnType<typeof transpileAndImport>;
}

/**
 * The core modules are compiled once and shared by all instances; only the JS
 * glue goes to disk, because it is loaded with import().
 */
async function transpileAndImport(name: string, options: Partial<TranspileOptions>) {
  const bytes = await readFile(built.get(name)?.path ?? `missing component ${name}`);
  const { files } = await transpile(bytes, { name: "component", instantiation: "async", quiet: true, ...options });
  const dir = join(scratch, `${name}-${options.asyncMode ?? "sync"}`);
  const cores = new Map<string, Uint8Array<ArrayBuffer>>();
  for (const [path, content] of Object.entries(files)) {
    if (path.endsWith(".wasm")) cores.set(path, new Uint8Array(content));
    if (path.endsWith(".js")) {
      await mkdir(dirname(join(dir, path)), { recursive: true });
      await writeFile(join(dir, path), content);
    }
  }
  const compiled = new Map([...cores].map(([path, content]) => [path, WebAssembly.compile(content)]));
  const getCoreModule: GetCoreModule = (path) => compiled.get(path) ?? Promise.reject(new Error(`no core module ${path}`));
  const glue = pathToFileURL(join(dir, "component.js")).href;
  const { instantiate } = (await import(glue)) as { instantiate: Instantiate };
  return {
    glue,
    cores,
    getCoreModule,
    instantiate: (imports: Record<string, unknown> = {}, preopens: Record<string, string> = {}, coreModule = getCoreModule) =>
      instantiate(coreModule, { ...sandbox(preopens).getImportObject(), ...imports }),
  };
}

/** No environment, arguments or network; only the given preopens. */
function sandbox(preopens: Record<string, string>): WASIShim {
  return new WASIShim({ sandbox: { preopens, env: {}, args: [], enableNetwork: false } });
}

/** An err result reaches the host as a thrown ComponentError carrying the failure as payload. */
async function outcome(call: () => unknown): Promise<Outcome> {
  try {
    return { ok: (await call()) as string };
  } catch (error) {
    const payload = (error as { payload?: Failure }).payload;
    if (typeof payload?.code !== "string") throw error;
    return { err: payload };
  }
}

const deadline = () => BigInt(Date.now() + 30_000);

describe("component worlds", () => {
  it.each(Object.entries(COMPONENTS))("%s implements its world and imports only what it is granted", async (name, { world, granted }) => {
    const wit = await componentWit(await readFile(built.get(name)?.path ?? ""));
    const imports = [...wit.matchAll(/^\s*import ([^;]+);$/gm)].map((match) => match[1] as string);
    if (world === "tool") {
      expect(wit).toContain(TOOL_EXPORT);
      expect(wit).not.toContain("export turn");
    } else {
      expect(wit).toContain(LOOP_EXPORT);
      expect(wit).not.toContain("export run");
    }
    expect(imports).toContain("skillenv:env/types@0.1.0");
    for (const needed of granted) expect(imports.some((entry) => entry.startsWith(`${needed}@`))).toBe(true);
    const unexpected = imports.filter(
      (entry) => entry !== "skillenv:env/types@0.1.0" && !ALWAYS_PROVIDED.test(entry) && !granted.some((needed) => entry.startsWith(`${needed}@`)),
    );
    expect(unexpected).toEqual([]);
  });

  it("keeps the pure components free of any WASI import", async () => {
    for (const name of ["echo-wat", "counter-wat", "loop-wat", "memory-hog-wat", "fib-wat", "echo-js"]) {
      const wit = await componentWit(await readFile(built.get(name)?.path ?? ""));
      expect(wit, name).not.toMatch(/import wasi:/);
    }
  });
});

describe("hand-written WAT components", () => {
  it("echo-wat returns its input unchanged, including large and non-ASCII input", async () => {
    const echo = await load("echo-wat");
    for (const input of ["hello", '{"v":1,"text":"héllo ✓ 日本"}', "x".repeat(300_000)]) {
      const { run } = await echo.instantiate();
      expect(await outcome(() => run?.(input, "{}", deadline()))).toEqual({ ok: input });
    }
  });

  it("counter-wat counts per instance, so every fresh instance answers 1", async () => {
    const counter = await load("counter-wat");
    const first = await counter.instantiate();
    const second = await counter.instantiate();
    expect(first.run?.("", "{}", deadline())).toBe('{"v":1,"count":1}');
    expect(second.run?.("", "{}", deadline())).toBe('{"v":1,"count":1}');
    expect(first.run?.("", "{}", deadline())).toBe('{"v":1,"count":2}');
  });

  it("fib-wat computes fib(n) from the first decimal number of its input", async () => {
    const fib = await load("fib-wat");
    const cases: [string, Outcome][] = [
      ["25", { ok: '{"v":1,"fib":75025}' }],
      ['"10"', { ok: '{"v":1,"fib":55}' }],
      ["0", { ok: '{"v":1,"fib":0}' }],
      ["no digits", { err: { code: "invalid_input", message: "input must contain a decimal number" } }],
    ];
    for (const [input, expected] of cases) {
      const { run } = await fib.instantiate();
      expect(await outcome(() => run?.(input, "{}", deadline()))).toEqual(expected);
    }
  });

  it("loop-wat never returns and its worker can be terminated", async () => {
    const looping = await load("loop-wat");
    const worker = new Worker(
      `const { parentPort, workerData } = require("node:worker_threads");
       import(workerData.glue).then(async ({ instantiate }) => {
         const { run } = await instantiate(async (path) => workerData.modules[path], {});
         parentPort.postMessage("started");
         run("", "{}", 0n);
         parentPort.postMessage("returned");
       });`,
      { eval: true, workerData: { glue: looping.glue, modules: { "component.core.wasm": await looping.getCoreModule("component.core.wasm") } } },
    );
    const messages: unknown[] = [];
    await new Promise((started) => {
      worker.on("message", (message) => {
        messages.push(message);
        started(message);
      });
    });
    await new Promise((wait) => setTimeout(wait, 300));
    expect(messages).toEqual(["started"]);
    expect(await worker.terminate()).toBe(1);
  });

  it("memory-hog-wat grows until memory.grow fails, then traps with unreachable", async () => {
    const hog = await load("memory-hog-wat");
    const limited: GetCoreModule = async (path) => WebAssembly.compile(withMemoryMaximum(hog.cores.get(path) ?? new Uint8Array(), 64));
    const { run } = await hog.instantiate({}, {}, limited);
    expect(() => run?.("", "{}", deadline())).toThrow(/unreachable/);
  });
});

describe("componentize-js components", () => {
  it("echo-js returns its input unchanged", async () => {
    const echo = await load("echo-js");
    const input = '{"v":1,"text":"héllo ✓"}';
    const { run } = await echo.instantiate();
    expect(await outcome(() => run?.(input, "{}", deadline()))).toEqual({ ok: input });
  });

  it("js-program-tool runs a program's run(input, configuration, context) and JSON-encodes its result", async () => {
    const runtime = await load("js-program-tool");
    const program = (source: string) => JSON.stringify({ source, configuration: { greeting: "hi" } });
    const call = async (source: string, input: string) => {
      const { run } = await runtime.instantiate();
      return outcome(() => run?.(input, program(source), deadline()));
    };
    expect(await call("function run(input, configuration) { return { sum: input.a + input.b, greeting: configuration.greeting }; }", '{"a":2,"b":3}')).toEqual({
      ok: '{"sum":5,"greeting":"hi"}',
    });
    expect(
      await call("async function run(input, c, context) { await new Promise((r) => setTimeout(r, 5)); return context.deadlineMs > Date.now(); }", "{}"),
    ).toEqual({
      ok: "true",
    });
  });

  it("js-program-tool turns a thrown error into err(program_error) instead of trapping", async () => {
    const runtime = await load("js-program-tool");
    const call = async (source: string) => {
      const { run } = await runtime.instantiate();
      return outcome(() => run?.("{}", JSON.stringify({ source, configuration: null }), deadline()));
    };
    expect(await call('function run() { throw new TypeError("no such thing"); }')).toEqual({
      err: { code: "program_error", message: "TypeError: no such thing" },
    });
    expect(await call('async function run() { throw { code: "quota_exceeded", message: "over quota" }; }')).toEqual({
      err: { code: "quota_exceeded", message: "over quota" },
    });
    expect(await call("function walk() {}")).toEqual({ err: { code: "invalid_program", message: "the program declares no function run" } });
  });

  it("workspace-js reads, writes and lists through its preopens, and the host refuses escapes", async () => {
    const workspace = join(scratch, "workspace");
    await mkdir(workspace, { recursive: true });
    await writeFile(join(workspace, "notes.txt"), "ünïcode notes");
    const tool = await load("workspace-js");
    const op = async (request: object) => {
      const { run } = await tool.instantiate({}, { "/workspace": workspace });
      return outcome(() => run?.(JSON.stringify({ v: 1, ...request }), "{}", deadline()));
    };
    expect(await op({ op: "read", path: "/workspace/notes.txt" })).toEqual({ ok: '{"v":1,"ok":true,"data":"ünïcode notes"}' });
    expect(await op({ op: "write", path: "/workspace/out.txt", data: "written" })).toEqual({ ok: '{"v":1,"ok":true,"bytes":7}' });
    expect(await readFile(join(workspace, "out.txt"), "utf8")).toBe("written");
    expect(await op({ op: "list", path: "/workspace" })).toEqual({
      ok: '{"v":1,"ok":true,"entries":[{"name":"notes.txt","type":"regular-file"},{"name":"out.txt","type":"regular-file"}]}',
    });
    expect(await op({ op: "read", path: "/workspace/../../etc/passwd" })).toMatchObject({ err: { code: "not-permitted" } });
    expect(await op({ op: "read", path: "/workspace/missing" })).toMatchObject({ err: { code: "no-entry" } });
  });

  it("agent-loop-js runs model and tool rounds through async host imports suspended with JSPI", async () => {
    const loop = await load("agent-loop-js", {
      asyncMode: "jspi",
      asyncImports: ["skillenv:env/host@0.1.0#call-model", "skillenv:env/host@0.1.0#dispatch-tools"],
      asyncExports: ["turn"],
    });
    const modelRequests: unknown[] = [];
    const events: unknown[] = [];
    let timerFiredDuringWait = false;
    const host = {
      async callModel(request: string) {
        modelRequests.push(JSON.parse(request));
        await new Promise((wait) => setTimeout(wait, 20));
        const message =
          modelRequests.length === 1
            ? { content: "let me look", tool_calls: [{ id: "c1", name: "lookup", input: { q: "x" } }] }
            : { content: "the answer is 42" };
        return JSON.stringify({ v: 1, message });
      },
      async dispatchTools(calls: string) {
        const { calls: list } = JSON.parse(calls) as { calls: { id: string }[] };
        return JSON.stringify({ v: 1, results: list.map(({ id }) => ({ id, output: { found: 42 } })) });
      },
      emit: (event: string) => events.push(JSON.parse(event)),
    };
    const { turn } = await loop.instantiate({ "skillenv:env/host": host });
    setTimeout(() => (timerFiredDuringWait = true), 5);
    const result = await outcome(() => turn?.('{"v":1,"message":"what is it?"}', "{}", deadline()));
    expect(result).toEqual({ ok: '{"v":1,"message":"the answer is 42","tool_results":[{"id":"c1","output":{"found":42}}]}' });
    expect(timerFiredDuringWait).toBe(true);
    expect(modelRequests).toHaveLength(2);
    expect(modelRequests[1]).toMatchObject({
      messages: [{ role: "user" }, { role: "assistant", tool_calls: [{ id: "c1" }] }, { role: "tool", tool_call_id: "c1" }],
    });
    expect(events).toEqual([
      { v: 1, kind: "turn_started" },
      { v: 1, kind: "tool_calls", round: 1, count: 1 },
    ]);
  });
});

/**
 * Gives the single memory a core module defines a maximum of `pages`, the way a
 * host caps guest memory. Handles the one-memory, minimum-only section the WAT
 * components have.
 */
function withMemoryMaximum(module: Uint8Array, pages: number): Uint8Array<ArrayBuffer> {
  let at = 8; // after the magic number and version
  while (at < module.length) {
    const [size, sizeLength] = readLeb(module, at + 1);
    const body = at + 1 + sizeLength;
    if (module[at] === 5) {
      const [count, countLength] = readLeb(module, body);
      if (count !== 1 || module[body + countLength] !== 0) throw new Error("expected one memory without a maximum");
      const [minimum] = readLeb(module, body + countLength + 1);
      const section = [1, 1, ...writeLeb(minimum), ...writeLeb(pages)];
      return new Uint8Array([...module.subarray(0, at), 5, ...writeLeb(section.length), ...section, ...module.subarray(body + size)]);
    }
    at = body + size;
  }
  throw new Error("no memory section");
}

function readLeb(bytes: Uint8Array, at: number): [value: number, length: number] {
  let value = 0;
  for (let length = 0; ; length++) {
    const byte = bytes[at + length] ?? 0;
    value += (byte & 0x7f) * 2 ** (7 * length);
    if (byte < 0x80) return [value, length + 1];
  }
}

function writeLeb(value: number): number[] {
  const bytes: number[] = [];
  do {
    const low = value % 0x80;
    value = Math.floor(value / 0x80);
    bytes.push(value > 0 ? low | 0x80 : low);
  } while (value > 0);
  return bytes;
}
