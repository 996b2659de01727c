/**
 * The shell extension as the service meets it: its own process (`node main.ts`), called by a
 * connect-node client over real sockets. Everything runs twice: under bubblewrap (`--bwrap on`:
 * where it does not work, the extension refuses to start and these tests fail saying why) with
 * binary messages over HTTP/2, and as plain processes with JSON over HTTP/1.1.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { createHash, randomInt } from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { fromJson, toJson, type JsonValue } from "@bufbuild/protobuf";
import { timestampFromMs, ValueSchema } from "@bufbuild/protobuf/wkt";
import { Code, createClient, type Client, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ExtensionEnvironmentService, type ExecuteResponse, type Failure } from "../../../gen/skillenv/extension/v1/extension_pb.js";

const MAIN = path.resolve(import.meta.dirname, "../main.ts");
const TOKEN = "shell-extension-test-credential";
const OUTPUT_LIMIT = 4096;

interface ExtensionProcess {
  url: string;
  startup: string;
  stop(): Promise<void>;
}

/** Starts `node main.ts` (as the user `as` names, if any) and waits for its listening line. */
async function startExtension(args: string[], env: Record<string, string> = {}, as: { uid?: number; gid?: number } = {}): Promise<ExtensionProcess> {
  const child = spawn(process.execPath, [MAIN, ...args], { env: { PATH: process.env.PATH ?? "", ...env }, stdio: ["ignore", "ignore", "pipe"], ...as });
  const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
  let stderr = "";
  const url = await new Promise<string>((resolve, reject) => {
    child.stderr!.on("data", (chunk: Buffer) => {
      stderr += chunk.toString();
      const match = /shell-extension listening on (\S+)/.exec(stderr);
      if (match?.[1]) resolve(match[1]);
    });
    void exited.then((code) => reject(new Error(`the extension exited with ${code} before listening:\n${stderr}`)));
  });
  return { url, startup: stderr, stop: () => stop(child, exited) };
}

async function stop(child: ChildProcess, exited: Promise<number | null>): Promise<void> {
  child.kill("SIGTERM");
  await exited;
}

/** Runs `node main.ts` expecting it to refuse to start. */
async function failToStart(args: string[]): Promise<{ code: number | null; stderr: string }> {
  const child = spawn(process.execPath, [MAIN, ...args], { env: { PATH: process.env.PATH ?? "" }, stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
  return { code, stderr };
}

function bearer(token: string): Interceptor {
  return (next) => (request) => {
    request.header.set("authorization", `Bearer ${token}`);
    return next(request);
  };
}

type ExtensionClient = Client<typeof ExtensionEnvironmentService>;

function clientOf(url: string, transport: Transport, token: string | undefined): ExtensionClient {
  const http2 = transport === "binary over HTTP/2";
  return createClient(
    ExtensionEnvironmentService,
    createConnectTransport({
      baseUrl: url,
      httpVersion: http2 ? "2" : "1.1",
      useBinaryFormat: http2,
      interceptors: token === undefined ? [] : [bearer(token)],
    }),
  );
}

type Transport = "binary over HTTP/2" | "JSON over HTTP/1.1";
type Receipt = ExecuteResponse["receipt"];

async function receiptsOf(stream: AsyncIterable<ExecuteResponse>): Promise<Receipt[]> {
  const receipts: Receipt[] = [];
  for await (const response of stream) receipts.push(response.receipt);
  return receipts;
}

function outputOf(receipts: Receipt[]): JsonValue {
  expect(receipts.map((receipt) => receipt.case)).toEqual(["accepted", "returned"]);
  const last = receipts[1]!;
  if (last.case !== "returned" || last.value.output === undefined) throw new Error("no output");
  return toJson(ValueSchema, last.value.output);
}

/** The failure that ends the receipts; `accepted` says whether an accepted receipt came first. */
function failureOf(receipts: Receipt[], accepted: boolean): Failure {
  expect(receipts.map((receipt) => receipt.case)).toEqual(accepted ? ["accepted", "failure"] : ["failure"]);
  const last = receipts.at(-1)!;
  if (last.case !== "failure") throw new Error("no failure");
  return last.value;
}

/** Processes (zombies excepted: their command line is empty) whose command line mentions `marker`. */
function processesMentioning(marker: string): string[] {
  return fs.readdirSync("/proc").filter((entry) => {
    if (!/^\d+$/.test(entry)) return false;
    try {
      return fs.readFileSync(`/proc/${entry}/cmdline`, "utf8").includes(marker);
    } catch {
      return false;
    }
  });
}

/** `<root>/<SHA-256 of the binding id, hex>`: the binding's directory, as the extension names it. */
function directoryOf(root: string, binding: { id: string }): string {
  return path.join(root, createHash("sha256").update(binding.id).digest("hex"));
}

/** A staged file's content: Stage carries bytes. */
const text = (value: string) => new TextEncoder().encode(value);

/** Polls until `check` holds; the test's own timeout bounds the wait. */
async function eventually(check: () => boolean): Promise<void> {
  while (!check()) await sleep(20);
}

/** A command that starts two long sleeps, one in the background, and says so by creating `started`. */
function sleepers(): { marker: string; command: string } {
  const marker = `100000.${randomInt(1e9)}`;
  return { marker, command: `sleep ${marker} & touch started; sleep ${marker}` };
}

describe.each([
  { bwrap: "on", transport: "binary over HTTP/2" },
  { bwrap: "off", transport: "JSON over HTTP/1.1" },
] as const)("shell extension, bwrap $bwrap, $transport", ({ bwrap, transport }) => {
  let root: string;
  let outside: string;
  let extension: ExtensionProcess;
  let client: ExtensionClient;
  let sessions = 0;
  let operations = 0;

  beforeAll(async () => {
    root = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "shell-extension-test-")));
    outside = fs.mkdtempSync(path.join(os.tmpdir(), "shell-extension-outside-"));
    extension = await startExtension(["--root", root, "--bwrap", bwrap, "--output-limit", String(OUTPUT_LIMIT)], { SHELL_EXTENSION_TOKEN: TOKEN });
    client = clientOf(extension.url, transport, TOKEN);
  });
  afterAll(async () => {
    await extension?.stop();
    for (const directory of [root, outside]) if (directory) fs.rmSync(directory, { recursive: true, force: true });
  });

  const newBinding = () => ({ id: `session-${++sessions}/shell`, workspace: "test" });
  const workspaceOf = (binding: { id: string }) => path.join(directoryOf(root, binding), "workspace");

  async function setUp(): Promise<{ id: string; workspace: string }> {
    const binding = newBinding();
    await client.setup({ binding });
    return binding;
  }

  interface ExecuteOptions {
    operationId?: string;
    /** Default {"tool": tool}; null sends none. */
    implementation?: JsonValue;
    deadlineMs?: number;
  }

  function execute(binding: { id: string }, tool: string, input: JsonValue, options: ExecuteOptions = {}): AsyncIterable<ExecuteResponse> {
    const implementation = options.implementation === undefined ? { tool } : options.implementation;
    return client.execute({
      binding,
      operationId: options.operationId ?? `operation-${++operations}`,
      tool,
      implementation: implementation === null ? undefined : fromJson(ValueSchema, implementation),
      input: fromJson(ValueSchema, input),
      deadline: options.deadlineMs === undefined ? undefined : timestampFromMs(options.deadlineMs),
    });
  }

  const shell = (binding: { id: string }, command: string, options?: ExecuteOptions) => receiptsOf(execute(binding, "shell", { command }, options));

  it("says at startup how commands run", () => {
    if (bwrap === "off") expect(extension.startup).toContain("WARNING: bubblewrap is switched off");
    expect(extension.startup).toContain(bwrap === "on" ? "commands run as bubblewrap" : "commands run as plain processes");
  });

  it("setup makes the workspace and stage writes files into it, with an operation id or without", async () => {
    const binding = await setUp();
    const skill = new TextEncoder().encode("echo staged script ran\n");
    await client.stage({ binding, operationId: `stage-${++operations}`, files: [{ path: "skills/demo/run.sh", content: skill }] });
    expect(fs.readFileSync(path.join(workspaceOf(binding), "skills/demo/run.sh"), "utf8")).toBe("echo staged script ran\n");
    await client.stage({ binding, files: [{ path: "skills/demo/SKILL.md", content: new TextEncoder().encode("# Demo\n") }] });
    expect(fs.readFileSync(path.join(workspaceOf(binding), "skills/demo/SKILL.md"), "utf8")).toBe("# Demo\n");
    expect(outputOf(await shell(binding, "bash skills/demo/run.sh"))).toMatchObject({ exitCode: 0, stdout: "staged script ran\n" });
  });

  it("stage refuses a path that is not relative or has . or .. segments, before writing any file", async () => {
    const binding = await setUp();
    for (const bad of ["../escape.txt", "/etc/escape.txt", "a/../../escape.txt", "./a.txt", "a//b.txt", "a/"]) {
      const files = [
        { path: "first.txt", content: new Uint8Array([1]) },
        { path: bad, content: new Uint8Array([2]) },
      ];
      await expect(client.stage({ binding, operationId: `stage-${++operations}`, files })).rejects.toMatchObject({ code: Code.InvalidArgument });
    }
    expect(fs.readdirSync(workspaceOf(binding))).toEqual([]);
    expect(fs.existsSync(path.join(root, "escape.txt"))).toBe(false);
  });

  it("stage refuses to follow a symlink a command planted", async () => {
    const binding = await setUp();
    fs.writeFileSync(path.join(outside, "target.txt"), "outside");
    outputOf(await shell(binding, `ln -s ${outside} planted && ln -s ${outside}/target.txt link.txt`));
    for (const planted of ["planted/evil.txt", "link.txt"]) {
      const files = [{ path: planted, content: new TextEncoder().encode("evil") }];
      await expect(client.stage({ binding, operationId: `stage-${++operations}`, files })).rejects.toMatchObject({
        code: Code.FailedPrecondition,
        rawMessage: expect.stringContaining("symlink_refused"),
      });
    }
    expect(fs.readdirSync(outside)).toEqual(["target.txt"]);
    expect(fs.readFileSync(path.join(outside, "target.txt"), "utf8")).toBe("outside");
  });

  /** Every entry under `directory`, relative, sorted; symlinks listed, not followed (as readdir's recursive option would). */
  const tree = (directory: string, prefix = ""): string[] =>
    fs
      .readdirSync(path.join(directory, prefix), { withFileTypes: true })
      .flatMap((entry) => {
        const relative = prefix === "" ? entry.name : `${prefix}/${entry.name}`;
        return entry.isDirectory() ? [relative, ...tree(directory, relative)] : [relative];
      })
      .sort();

  it("stage removes the replace_directories before writing its files, and nothing else", async () => {
    const binding = await setUp();
    const workspace = workspaceOf(binding);
    const first = ["skills/alpha/SKILL.md", "skills/alpha/old.py", "skills/beta/SKILL.md", "data/input.csv"].map((file) => ({
      path: file,
      content: text(file),
    }));
    await client.stage({ binding, operationId: `stage-${++operations}`, replaceDirectories: ["skills"], files: first });
    const second = ["skills/alpha/SKILL.md", "skills/alpha/new.py"].map((file) => ({ path: file, content: text(`v2 ${file}`) }));
    await client.stage({ binding, operationId: `stage-${++operations}`, replaceDirectories: ["skills", "not/there"], files: second });
    expect(tree(workspace)).toEqual(["data", "data/input.csv", "skills", "skills/alpha", "skills/alpha/SKILL.md", "skills/alpha/new.py"]);
    expect(fs.readFileSync(path.join(workspace, "skills/alpha/SKILL.md"), "utf8")).toBe("v2 skills/alpha/SKILL.md");
    // A nested directory is replaced alone; with no files, it is simply gone.
    await client.stage({ binding, operationId: `stage-${++operations}`, replaceDirectories: ["skills/alpha"], files: [] });
    expect(tree(workspace)).toEqual(["data", "data/input.csv", "skills"]);
    // What was removed went by way of the binding's directory and is gone from there too.
    expect(fs.readdirSync(path.dirname(workspace))).toEqual(["workspace"]);
  });

  it("stage removes a symlink a command planted in or as a replaced directory, never what it points to", async () => {
    const binding = await setUp();
    const workspace = workspaceOf(binding);
    const target = fs.mkdtempSync(path.join(os.tmpdir(), "shell-extension-target-"));
    try {
      fs.mkdirSync(path.join(target, "sub"));
      fs.writeFileSync(path.join(target, "sub", "precious.txt"), "keep me");
      outputOf(await shell(binding, `ln -s ${target} skills`));
      await client.stage({
        binding,
        operationId: `stage-${++operations}`,
        replaceDirectories: ["skills"],
        files: [{ path: "skills/a/SKILL.md", content: text("a") }],
      });
      expect(fs.lstatSync(path.join(workspace, "skills")).isDirectory()).toBe(true);
      expect(tree(workspace)).toEqual(["skills", "skills/a", "skills/a/SKILL.md"]);

      outputOf(await shell(binding, `ln -s ${target} skills/a/dir-link && ln -s ${target}/sub/precious.txt skills/file-link && ln -s ${target} linked`));
      await client.stage({ binding, operationId: `stage-${++operations}`, replaceDirectories: ["skills"], files: [] });
      expect(tree(workspace)).toEqual(["linked"]);
      // A directory on the way that is a symlink is refused, before anything is removed.
      await expect(client.stage({ binding, operationId: `stage-${++operations}`, replaceDirectories: ["linked/sub"], files: [] })).rejects.toMatchObject({
        code: Code.FailedPrecondition,
        rawMessage: expect.stringContaining("symlink_refused"),
      });
      expect(tree(target)).toEqual(["sub", "sub/precious.txt"]);
      expect(fs.readFileSync(path.join(target, "sub", "precious.txt"), "utf8")).toBe("keep me");
    } finally {
      fs.rmSync(target, { recursive: true, force: true });
    }
  });

  it("stage refuses an invalid replace_directories path before removing or writing anything", async () => {
    const binding = await setUp();
    await client.stage({ binding, operationId: `stage-${++operations}`, files: [{ path: "skills/kept.txt", content: text("kept") }] });
    for (const bad of ["..", "../x", "/etc", "skills/", "", "./skills"]) {
      const request = {
        binding,
        operationId: `stage-${++operations}`,
        replaceDirectories: ["skills", bad],
        files: [{ path: "new.txt", content: text("new") }],
      };
      await expect(client.stage(request)).rejects.toMatchObject({ code: Code.InvalidArgument });
    }
    expect(tree(workspaceOf(binding))).toEqual(["skills", "skills/kept.txt"]);
  });

  it("a Stage waits for the binding's Executes in flight to end, and an Execute that arrives meanwhile waits for the Stage", async () => {
    const binding = await setUp();
    const started = path.join(workspaceOf(binding), "started");
    // The command looks, as it ends, whether the Stage has already written its file.
    const first = shell(binding, "touch started; sleep 1.5; test -e skills/new/SKILL.md && echo staged-meanwhile || echo not-yet");
    await eventually(() => fs.existsSync(started));
    const stage = client.stage({
      binding,
      operationId: `stage-${++operations}`,
      replaceDirectories: ["skills"],
      files: [{ path: "skills/new/SKILL.md", content: text("new") }],
    });
    // Time for the Stage to arrive and queue.
    await sleep(300);
    const second = shell(binding, "cat skills/new/SKILL.md");
    expect(outputOf(await first)).toMatchObject({ exitCode: 0, stdout: "not-yet\n" });
    await stage;
    expect(outputOf(await second)).toMatchObject({ exitCode: 0, stdout: "new" });
  });

  it("a Stage that waits past its deadline answers deadline_exceeded and changes nothing, as does one whose caller hangs up; a Cancel of the Execute it waits for lets it go", async () => {
    const binding = await setUp();
    const workspace = workspaceOf(binding);
    await client.stage({
      binding,
      operationId: `stage-${++operations}`,
      replaceDirectories: ["skills"],
      files: [{ path: "skills/old/SKILL.md", content: text("old") }],
    });
    const operationId = `operation-${++operations}`;
    const running = shell(binding, "touch started; sleep 30", { operationId });
    await eventually(() => fs.existsSync(path.join(workspace, "started")));
    // Only the extension enforces this deadline: the client sets no timer of its own.
    const late = { binding, operationId: `stage-${++operations}`, replaceDirectories: ["skills"], files: [{ path: "late.txt", content: text("late") }] };
    const before = Date.now();
    await expect(client.stage(late, { headers: { "connect-timeout-ms": "300" } })).rejects.toMatchObject({
      code: Code.DeadlineExceeded,
      rawMessage: expect.stringContaining("nothing was changed"),
    });
    expect(Date.now() - before).toBeLessThan(5000);
    // The service gives up by hanging up at its deadline: the Stage stops waiting then too.
    const hungUp = {
      binding,
      operationId: `stage-${++operations}`,
      replaceDirectories: ["skills"],
      files: [{ path: "hung-up.txt", content: text("hung up") }],
    };
    await expect(client.stage(hungUp, { signal: AbortSignal.timeout(300) })).rejects.toMatchObject({ code: Code.Canceled });
    await sleep(100);
    expect(tree(path.join(workspace, "skills"))).toEqual(["old", "old/SKILL.md"]);

    const staged = client.stage({
      binding,
      operationId: `stage-${++operations}`,
      replaceDirectories: ["skills"],
      files: [{ path: "skills/new/SKILL.md", content: text("new") }],
    });
    await sleep(100);
    await client.cancel({ binding, operationId });
    expect(failureOf(await running, true).code).toBe("cancelled");
    await staged;
    // The Stages that gave up did not run once the binding was free.
    expect(tree(workspace)).toEqual(["skills", "skills/new", "skills/new/SKILL.md", "started"]);
  });

  it("teardown ends an Execute and a Stage waiting for it, and removes the binding", async () => {
    const binding = await setUp();
    const { marker, command } = sleepers();
    const running = shell(binding, command);
    await eventually(() => fs.existsSync(path.join(workspaceOf(binding), "started")));
    const staged = client.stage({
      binding,
      operationId: `stage-${++operations}`,
      replaceDirectories: ["skills"],
      files: [{ path: "skills/a/SKILL.md", content: text("a") }],
    });
    const outcome = staged.then(
      () => "staged",
      (error: unknown) => (error as { code?: Code }).code,
    );
    await sleep(300);
    await client.teardown({ binding });
    expect(failureOf(await running, true).code).toBe("cancelled");
    expect(await outcome).toBe(Code.Canceled);
    expect(fs.existsSync(path.dirname(workspaceOf(binding)))).toBe(false);
    await eventually(() => processesMentioning(marker).length === 0);
  });

  it("once an Execute has ended, no process its command started runs any more, killed or left in the background", async () => {
    const binding = await setUp();
    const log = path.join(workspaceOf(binding), "log");
    // Eight processes appending to the log as fast as they can.
    const writers = `python3 -c '
import os
for _ in range(3): os.fork()
fd = os.open("log", os.O_WRONLY | os.O_APPEND | os.O_CREAT)
while True: os.write(fd, b"x")
'`;
    const size = () => (fs.existsSync(log) ? fs.statSync(log).size : 0);
    for (let attempt = 0; attempt < 8; attempt++) {
      if (attempt % 2 === 0) expect(failureOf(await shell(binding, `exec ${writers}`, { deadlineMs: Date.now() + 200 }), true).code).toBe("timeout");
      else expect(outputOf(await shell(binding, `${writers} >/dev/null 2>&1 & sleep 0.2; exit 0`))).toMatchObject({ exitCode: 0 });
      const ended = size();
      await sleep(50);
      expect(size(), `attempt ${attempt}: the log grew after the Execute ended`).toBe(ended);
    }
  });

  it("a command inside skills/ swapping a directory for a symlink while Stages replace skills/ never has anything outside the workspace removed", async () => {
    const binding = await setUp();
    const workspace = workspaceOf(binding);
    const victim = fs.mkdtempSync(path.join(os.tmpdir(), "shell-extension-victim-"));
    try {
      for (let i = 0; i < 100; i++) fs.writeFileSync(path.join(victim, `precious-${i}`), "keep");
      // As a review's reproduction did: in skills/a, over and over, sub becomes a symlink to the victim and back.
      const swapper = `cd skills/a && exec python3 -c '
import os
open("../../started", "w").close()
steps = (lambda: os.rename("sub", "hold"), lambda: os.symlink(${JSON.stringify(victim)}, "sub"), lambda: os.unlink("sub"), lambda: os.rename("hold", "sub"))
while True:
    for step in steps:
        try: step()
        except OSError: pass
'`;
      const files = Array.from({ length: 40 }, (_, i) => ({ path: `skills/a/sub/d${i}/f`, content: text("x") }));
      const stage = () => client.stage({ binding, operationId: `stage-${++operations}`, replaceDirectories: ["skills"], files });
      await stage();
      let raced = 0;
      for (let attempt = 0; attempt < 10; attempt++) {
        const started = path.join(workspace, "started");
        fs.rmSync(started, { force: true });
        let ended = false;
        const running = shell(binding, swapper, { deadlineMs: Date.now() + 200 }).finally(() => (ended = true));
        // A loaded machine may not start python before the deadline: that attempt races nothing.
        await eventually(() => ended || fs.existsSync(started));
        if (!ended) raced++;
        await stage();
        expect(failureOf(await running, true).code).toBe("timeout");
        expect(fs.readdirSync(victim).length, `attempt ${attempt}`).toBe(100);
      }
      expect(raced).toBeGreaterThan(0);
    } finally {
      fs.rmSync(victim, { recursive: true, force: true });
    }
  });

  it("shell returns stdout, stderr and the exit code, and runs in the workspace", async () => {
    const binding = await setUp();
    const output = outputOf(await shell(binding, "echo out; echo err >&2; touch here; exit 7"));
    expect(output).toEqual({ exitCode: 7, stdout: "out\n", stderr: "err\n", truncated: false });
    expect(fs.existsSync(path.join(workspaceOf(binding), "here"))).toBe(true);
  });

  it("shell hands commands none of the extension's environment, its credential above all", async () => {
    const binding = await setUp();
    const output = outputOf(await shell(binding, "env")) as { stdout: string };
    expect(output.stdout).not.toContain(TOKEN);
    expect(output.stdout).not.toContain("SHELL_EXTENSION");
  });

  it("the placed tool's name picks the tool when the implementation is empty; an unknown tool fails", async () => {
    const binding = await setUp();
    outputOf(await receiptsOf(execute(binding, "write_file", { path: "a.txt", content: "a" }, { implementation: null })));
    expect(outputOf(await receiptsOf(execute(binding, "read_file", { path: "a.txt" }, { implementation: {} })))).toEqual({ content: "a", truncated: false });
    expect(failureOf(await receiptsOf(execute(binding, "delete_everything", {}, { implementation: null })), true).code).toBe("unknown_tool");
    expect(failureOf(await receiptsOf(execute(binding, "shell", { command: 42 })), true).code).toBe("invalid_input");
  });

  it("read_file and write_file stay in the workspace", async () => {
    const binding = await setUp();
    expect(outputOf(await receiptsOf(execute(binding, "write_file", { path: "notes/day one.txt", content: "héllo" })))).toEqual({ bytes: 6 });
    expect(fs.readFileSync(path.join(workspaceOf(binding), "notes/day one.txt"), "utf8")).toBe("héllo");
    expect(outputOf(await receiptsOf(execute(binding, "read_file", { path: "notes/day one.txt" })))).toEqual({ content: "héllo", truncated: false });

    fs.writeFileSync(path.join(outside, "secret.txt"), "secret");
    outputOf(await shell(binding, `ln -s ${outside} away && ln -s ${outside}/secret.txt secret.txt && mkfifo pipe`));
    const failures: Record<string, string> = {};
    for (const [tool, input] of [
      ["read_file", { path: "../escape.txt" }],
      ["read_file", { path: "secret.txt" }],
      ["read_file", { path: "away/secret.txt" }],
      ["read_file", { path: "missing.txt" }],
      ["read_file", { path: "notes" }],
      ["read_file", { path: "pipe" }],
      ["write_file", { path: "/tmp/escape.txt", content: "x" }],
      ["write_file", { path: "secret.txt", content: "x" }],
      ["write_file", { path: "away/new.txt", content: "x" }],
      ["write_file", { path: "pipe", content: "x" }],
    ] as const) {
      failures[`${tool} ${input.path}`] = failureOf(await receiptsOf(execute(binding, tool, input)), true).code;
    }
    expect(failures).toEqual({
      "read_file ../escape.txt": "invalid_path",
      "read_file secret.txt": "symlink_refused",
      "read_file away/secret.txt": "symlink_refused",
      "read_file missing.txt": "not_found",
      "read_file notes": "not_a_file",
      "read_file pipe": "not_a_file",
      "write_file /tmp/escape.txt": "invalid_path",
      "write_file secret.txt": "symlink_refused",
      "write_file away/new.txt": "symlink_refused",
      "write_file pipe": "not_a_file",
    });
    expect(fs.readdirSync(outside).sort()).toEqual(["secret.txt", "target.txt"]);
    expect(fs.readFileSync(path.join(outside, "secret.txt"), "utf8")).toBe("secret");
  });

  it("output beyond the limit is dropped and says so", async () => {
    const binding = await setUp();
    const output = outputOf(await shell(binding, `head -c ${OUTPUT_LIMIT * 3} /dev/zero | tr '\\0' a | tee big.txt; echo err >&2`));
    expect(output).toEqual({ exitCode: 0, stdout: "a".repeat(OUTPUT_LIMIT), stderr: "err\n", truncated: true });
    expect(outputOf(await receiptsOf(execute(binding, "read_file", { path: "big.txt" })))).toEqual({ content: "a".repeat(OUTPUT_LIMIT), truncated: true });
  });

  it.each(["timeoutMs", "deadline"] as const)("a command past its %s is killed with everything it started", async (limit) => {
    const binding = await setUp();
    const { marker, command } = sleepers();
    const timeLimitMs = 3000;
    const stream =
      limit === "timeoutMs"
        ? execute(binding, "shell", { command, timeoutMs: timeLimitMs })
        : execute(binding, "shell", { command }, { deadlineMs: Date.now() + timeLimitMs });
    const failure = failureOf(await receiptsOf(stream), true);
    expect(failure).toMatchObject({ code: "timeout", retryable: false });
    expect(fs.existsSync(path.join(workspaceOf(binding), "started")), `the sleeps had not started within ${timeLimitMs} ms`).toBe(true);
    await eventually(() => processesMentioning(marker).length === 0);
  });

  it("a deadline already past runs nothing", async () => {
    const binding = await setUp();
    expect(failureOf(await shell(binding, "touch ran", { deadlineMs: Date.now() - 1000 }), true).code).toBe("timeout");
    expect(fs.existsSync(path.join(workspaceOf(binding), "ran"))).toBe(false);
  });

  it("cancel kills the command with everything it started", async () => {
    const binding = await setUp();
    const { marker, command } = sleepers();
    const operationId = `operation-${++operations}`;
    const receipts = receiptsOf(execute(binding, "shell", { command }, { operationId }));
    await eventually(() => fs.existsSync(path.join(workspaceOf(binding), "started")));
    expect(processesMentioning(marker)).not.toEqual([]);
    await client.cancel({ binding, operationId });
    expect(failureOf(await receipts, true)).toMatchObject({ code: "cancelled", retryable: false });
    await eventually(() => processesMentioning(marker).length === 0);
  });

  it("a cancel that overtakes its execute stops it before it runs", async () => {
    const binding = await setUp();
    await client.cancel({ binding, operationId: "overtaken" });
    expect(failureOf(await shell(binding, "touch ran", { operationId: "overtaken" }), true).code).toBe("cancelled");
    expect(fs.existsSync(path.join(workspaceOf(binding), "ran"))).toBe(false);
  });

  it("a repeated operation id is refused and runs nothing", async () => {
    const binding = await setUp();
    outputOf(await shell(binding, "echo ran >> count", { operationId: "once" }));
    expect(failureOf(await shell(binding, "echo ran >> count", { operationId: "once" }), false).code).toBe("duplicate_operation");
    expect(fs.readFileSync(path.join(workspaceOf(binding), "count"), "utf8")).toBe("ran\n");
    await expect(client.stage({ binding, operationId: "once", files: [] })).rejects.toMatchObject({ code: Code.AlreadyExists });
  });

  it("execute and stage before setup are refused", async () => {
    const binding = newBinding();
    expect(failureOf(await shell(binding, "true"), false).code).toBe("not_set_up");
    await expect(client.stage({ binding, operationId: `stage-${++operations}`, files: [] })).rejects.toMatchObject({ code: Code.FailedPrecondition });
  });

  it("detach keeps the workspace; teardown stops what runs and removes it", async () => {
    const binding = await setUp();
    outputOf(await shell(binding, "echo kept > kept.txt"));
    await client.detach({ binding });
    expect(fs.readFileSync(path.join(workspaceOf(binding), "kept.txt"), "utf8")).toBe("kept\n");

    const { marker, command } = sleepers();
    const receipts = receiptsOf(execute(binding, "shell", { command }));
    await eventually(() => fs.existsSync(path.join(workspaceOf(binding), "started")));
    await client.teardown({ binding });
    expect(failureOf(await receipts, true).code).toBe("cancelled");
    expect(fs.existsSync(path.dirname(workspaceOf(binding)))).toBe(false);
    await eventually(() => processesMentioning(marker).length === 0);
  });

  it("a call without the credential, or with another, is refused", async () => {
    const binding = newBinding();
    for (const token of [undefined, "wrong"]) {
      const stranger = clientOf(extension.url, transport, token);
      await expect(stranger.setup({ binding })).rejects.toMatchObject({ code: Code.Unauthenticated });
      await expect(receiptsOf(stranger.execute({ binding, operationId: "x", tool: "shell" }))).rejects.toMatchObject({ code: Code.Unauthenticated });
    }
    expect(fs.existsSync(workspaceOf(binding))).toBe(false);
  });

  it("under bubblewrap a command sees neither the host's files nor its network; as a plain process it sees both", async () => {
    const binding = await setUp();
    fs.writeFileSync(path.join(outside, "host.txt"), "host");
    const port = new URL(extension.url).port;
    const probe = `test -e /root; echo root=$?; cat ${outside}/host.txt >/dev/null 2>&1; echo file=$?; (echo > /dev/tcp/127.0.0.1/${port}) 2>/dev/null; echo network=$?`;
    const { stdout } = outputOf(await shell(binding, probe)) as { stdout: string };
    expect(stdout).toBe(bwrap === "on" ? "root=1\nfile=1\nnetwork=1\n" : "root=0\nfile=0\nnetwork=0\n");
  });
});

describe("shell extension, directories a command made unreadable", () => {
  /** Root may read any directory: the extension then runs as nobody, as an operator would run it. */
  const NOBODY = 65534;
  const asRoot = process.getuid?.() === 0;
  let root: string;
  let extension: ExtensionProcess;
  let client: ExtensionClient;

  beforeAll(async () => {
    root = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "shell-extension-test-")));
    if (asRoot) fs.chownSync(root, NOBODY, NOBODY);
    extension = await startExtension(["--root", root], { SHELL_EXTENSION_TOKEN: TOKEN }, asRoot ? { uid: NOBODY, gid: NOBODY } : {});
    client = clientOf(extension.url, "JSON over HTTP/1.1", TOKEN);
  });
  afterAll(async () => {
    await extension?.stop();
    if (root) fs.rmSync(root, { recursive: true, force: true });
  });

  const shell = async (binding: { id: string }, command: string) => {
    const receipts = await receiptsOf(
      client.execute({
        binding,
        operationId: `operation-${randomInt(1e9)}`,
        tool: "shell",
        implementation: fromJson(ValueSchema, { tool: "shell" }),
        input: fromJson(ValueSchema, { command }),
      }),
    );
    return outputOf(receipts);
  };

  it("a Stage replaces skills/ although a command chmod 000'd a directory in it, and Teardown removes such a binding", async () => {
    const binding = { id: "session-unreadable/shell", workspace: "test" };
    const directory = directoryOf(root, binding);
    await client.setup({ binding });
    await client.stage({ binding, operationId: "stage-1", replaceDirectories: ["skills"], files: [{ path: "skills/a/SKILL.md", content: text("a") }] });
    const lock = (where: string) => `mkdir -p ${where}/inner && echo x > ${where}/inner/f && chmod 000 ${where}/inner ${where}`;
    // The extension's user can no longer list it: fs.rm could not empty it.
    expect(await shell(binding, `${lock("skills/a/locked")} && ls skills/a/locked`)).toMatchObject({
      exitCode: 2,
      stderr: expect.stringContaining("Permission denied"),
    });

    await client.stage({ binding, operationId: "stage-2", replaceDirectories: ["skills"], files: [{ path: "skills/b/SKILL.md", content: text("b") }] });
    expect(fs.readdirSync(path.join(directory, "workspace", "skills"))).toEqual(["b"]);
    // The moved-out tree was removed as well, permissions restored.
    expect(fs.readdirSync(directory)).toEqual(["workspace"]);

    expect(await shell(binding, lock("kept"))).toMatchObject({ exitCode: 0 });
    await client.teardown({ binding });
    expect(fs.existsSync(directory)).toBe(false);
  });

  it.runIf(asRoot)("a Stage succeeds when the moved-out tree cannot be removed at all; it stays in the binding's directory until Teardown", async () => {
    const binding = { id: "session-foreign/shell", workspace: "test" };
    const directory = directoryOf(root, binding);
    await client.setup({ binding });
    await client.stage({ binding, operationId: "stage-1", replaceDirectories: ["skills"], files: [{ path: "skills/a/SKILL.md", content: text("a") }] });
    // Made by root, not by the extension's user: nothing the extension does can empty it.
    fs.mkdirSync(path.join(directory, "workspace", "skills", "a", "foreign"));
    fs.writeFileSync(path.join(directory, "workspace", "skills", "a", "foreign", "f"), "x");

    await client.stage({ binding, operationId: "stage-2", replaceDirectories: ["skills"], files: [{ path: "skills/b/SKILL.md", content: text("b") }] });
    expect(fs.readdirSync(path.join(directory, "workspace", "skills"))).toEqual(["b"]);
    const left = fs.readdirSync(directory).filter((entry) => entry !== "workspace");
    expect(left).toEqual([expect.stringMatching(/^\.removing-/)]);

    fs.chownSync(path.join(directory, left[0]!, "a", "foreign"), NOBODY, NOBODY);
    await client.teardown({ binding });
    expect(fs.existsSync(directory)).toBe(false);
  });
});

describe("shell extension settings", () => {
  it("README.md documents every variable the settings read", () => {
    const read = (file: string) => fs.readFileSync(path.resolve(import.meta.dirname, "..", file), "utf8");
    const variables = new Set(read("settings.ts").match(/SHELL_EXTENSION_[A-Z_]+/g));
    expect(variables.size).toBe(7);
    for (const variable of variables) expect(read("README.md"), variable).toContain(`\`${variable}\``);
  });

  it("a bad setting stops it at startup, naming the flag and the variable", async () => {
    const { code, stderr } = await failToStart(["--network", "maybe"]);
    expect(code).not.toBe(0);
    expect(stderr).toContain("--network (SHELL_EXTENSION_NETWORK): expected one of on, off");
  });

  it("refuses a root that others may write to", async () => {
    const shared = fs.mkdtempSync(path.join(os.tmpdir(), "shell-extension-shared-"));
    try {
      fs.chmodSync(shared, 0o777);
      const { code, stderr } = await failToStart(["--root", shared]);
      expect(code).not.toBe(0);
      expect(stderr).toContain("must be a directory owned by this user and writable by no one else");
    } finally {
      fs.rmSync(shared, { recursive: true });
    }
  });
});
