/**
 * Runs the snippets of one Markdown file, in order, as a reader of it would (docs/snippets.md):
 *
 *   node testing/snippets/run-file.ts README.md [--dir <empty directory>] [--keep]
 *
 * In a network namespace of its own (bubblewrap), so that the service listens on the
 * 127.0.0.1:8080 the snippets name, beside any other server of the machine and any other file's
 * run. The snippets' working directory mirrors the repository (a link to each of its entries) but
 * for `data/`, the data directory of the service this run starts before the first snippet
 * (`npm start`, as a reader does, through testing/snippets/preamble.sh). A model is the scripted
 * provider, answering every model of MODELS with a short text; ANTHROPIC_API_KEY and
 * OPENAI_API_KEY are set to anything.
 *
 * Prints one JSON line per snippet on stdout (SnippetResult), a readable line on stderr; exits 0
 * when every snippet passed. With --dir, what it leaves (the servers' logs and pid files) stays
 * there for the caller, which removes it; without, a temporary one is removed unless --keep.
 */
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { parseArgs } from "node:util";
import { startScriptedProvider } from "../scripted-provider/index.ts";
import { snippets, type Snippet, type SnippetRunner } from "./blocks.ts";
import { stopServers } from "./servers.ts";

const ROOT = path.resolve(import.meta.dirname, "../..");
const PREAMBLE = path.join(import.meta.dirname, "preamble.sh");
const NODE = path.join(ROOT, "node_modules", ".bin", "node");
const PYTHON = "/usr/bin/python3";
/** The models the snippets name; each answers every request with TEXT. */
export const MODELS = ["claude-sonnet-4-6", "gpt-4.1"];
const TEXT = "Release notes, as the scripted model writes them.";
/** Set inside the network namespace, so that the run does not enter another. */
const INSIDE = "SNIPPETS_PRIVATE_NETWORK";
/** A guard against a snippet that never ends (a server in the foreground, a wait on nothing). */
const SNIPPET_LIMIT_MS = 3 * 60_000;
/** What a result keeps of a snippet's output: its end. */
const OUTPUT_KEPT = 32 * 1024;

export interface SnippetResult {
  file: string;
  line: number;
  language: string;
  ok: boolean;
  /** The exit code, or the signal that ended it. */
  exit: number | string | null;
  ms: number;
  /** Its stdout and stderr, interleaved (the end of them when long), and the servers' logs when it failed. */
  output: string;
}

const EXTENSIONS: Record<SnippetRunner, (language: string) => string> = {
  bash: () => "sh",
  node: (language) => (language.startsWith("t") ? "ts" : "mjs"),
  python: () => "py",
};

async function main(): Promise<number> {
  const { values, positionals } = parseArgs({ allowPositionals: true, options: { dir: { type: "string" }, keep: { type: "boolean" } } });
  const [file] = positionals;
  if (!file || positionals.length > 1) throw new Error("usage: node testing/snippets/run-file.ts <file.md> [--dir <dir>] [--keep]");
  if (process.env[INSIDE] !== "1") return inPrivateNetwork(process.argv.slice(2));
  const dir = values.dir ?? (await mkdtemp(path.join(tmpdir(), "snippets-")));
  try {
    return await runFile(path.resolve(file), dir);
  } finally {
    await stopServers(dir);
    if (!values.dir && !values.keep) await rm(dir, { recursive: true, force: true });
  }
}

/** This script again, in a network namespace of its own with only a loopback interface. */
async function inPrivateNetwork(args: string[]): Promise<number> {
  if (!existsSync("/usr/bin/bwrap")) throw new Error("the snippets run in a network namespace of bubblewrap's: apt-get install bubblewrap");
  const child = spawn("/usr/bin/bwrap", ["--dev-bind", "/", "/", "--unshare-net", "--die-with-parent", "--", NODE, import.meta.filename, ...args], {
    env: { ...process.env, [INSIDE]: "1" },
    stdio: "inherit",
  });
  return new Promise((resolve, reject) => child.on("error", reject).on("exit", (code, signal) => resolve(code ?? (signal ? 128 : 1))));
}

async function runFile(file: string, dir: string): Promise<number> {
  const name = path.relative(ROOT, file);
  const work = path.join(dir, "work");
  await mkdir(path.join(dir, "tmp"), { recursive: true });
  await mirrorRepository(work);
  const provider = await startScriptedProvider({ scripts: Object.fromEntries(MODELS.map((model) => [model, { loop: true, steps: [{ text: TEXT }] }])) });
  try {
    const env = snippetEnvironment(dir, provider);
    let failed = 0;
    const report = (result: SnippetResult) => {
      if (!result.ok) failed++;
      process.stdout.write(`${JSON.stringify(result)}\n`);
      process.stderr.write(
        `${result.file}:${result.line} ${result.language} ${result.ok ? "ok" : `FAILED (${result.exit})`} ${(result.ms / 1000).toFixed(1)} s\n`,
      );
      if (!result.ok) process.stderr.write(`${result.output.replace(/^/gm, "  | ")}\n`);
    };
    // The service a reader has running: `npm start` in the repository, no settings.
    const service = await run({ line: 0, language: "sh", attributes: [], text: "npm start\n", runner: "bash" }, work, env, dir);
    if (!service.ok) {
      report({ ...service, file: name });
      return 1;
    }
    for (const snippet of snippets(await readFile(file, "utf8"))) report({ ...(await run(snippet, work, env, dir)), file: name });
    return failed === 0 ? 0 : 1;
  } finally {
    await provider.close();
  }
}

/**
 * The snippets' working directory: a link to every entry of the repository, so that paths such
 * as examples/, build/components/ and node_modules/ are the repository's, but for data/ (the
 * service's, made by it) and what the snippets write at the top (my-skill/, the snippet files themselves).
 */
async function mirrorRepository(work: string): Promise<void> {
  await mkdir(work);
  for (const entry of await readdir(ROOT)) {
    if (entry !== "data") await symlink(path.join(ROOT, entry), path.join(work, entry));
  }
}

/** A reader's environment: their PATH (the system's Node first), their own key for a model. */
function snippetEnvironment(dir: string, provider: { anthropicBaseUrl: string; openaiBaseUrl: string }): NodeJS.ProcessEnv {
  const inherited = Object.entries(process.env).filter(
    ([key]) => !/^(SERVICE_|SHELL_EXTENSION_|npm_|NODE_OPTIONS$|VITEST|ANTHROPIC_|OPENAI_|BASH_ENV$)/.test(key) && key !== INSIDE,
  );
  // npm and vitest put the project's node_modules/.bin (its Node 24) first; a reader's shell does not.
  const PATH = (process.env.PATH ?? "")
    .split(path.delimiter)
    .filter((entry) => !entry.endsWith(path.join("node_modules", ".bin")))
    .join(path.delimiter);
  return {
    ...Object.fromEntries(inherited),
    PATH,
    TMPDIR: path.join(dir, "tmp"),
    SNIPPETS_DIR: dir,
    SERVICE_ANTHROPIC_BASE_URL: provider.anthropicBaseUrl,
    SERVICE_OPENAI_BASE_URL: provider.openaiBaseUrl,
    ANTHROPIC_API_KEY: "sk-ant-snippets",
    OPENAI_API_KEY: "sk-snippets",
  };
}

async function run(snippet: Snippet, work: string, env: NodeJS.ProcessEnv, dir: string): Promise<Omit<SnippetResult, "file">> {
  const file = path.join(work, `snippet-${snippet.line}.${EXTENSIONS[snippet.runner](snippet.language)}`);
  await writeFile(file, snippet.text);
  const [command, args, extra]: [string, string[], NodeJS.ProcessEnv] =
    snippet.runner === "bash"
      ? ["bash", [file], { BASH_ENV: PREAMBLE }]
      : snippet.runner === "node"
        ? ["npx", ["node", file], {}] // as the README says: the repository's Node 24, through the reader's npx
        : [PYTHON, [file], { PYTHONPATH: "clients/python/src" }];
  const started = performance.now();
  // detached: a process group of its own, which the guard can end with everything it started.
  const child = spawn(command, args, { cwd: work, env: { ...env, ...extra }, stdio: ["ignore", "pipe", "pipe"], detached: true });
  let output = "";
  const keep = (chunk: Buffer) => (output = (output + chunk.toString()).slice(-OUTPUT_KEPT));
  child.stdout.on("data", keep);
  child.stderr.on("data", keep);
  const guard = setTimeout(() => {
    output += `\n[the snippet did not end within ${SNIPPET_LIMIT_MS / 60_000} min: stopped]\n`;
    try {
      process.kill(-child.pid!, "SIGKILL");
    } catch {
      // already gone
    }
  }, SNIPPET_LIMIT_MS);
  const exit = await new Promise<number | string | null>((resolve) => child.on("close", (code, signal) => resolve(code ?? signal)));
  clearTimeout(guard);
  const ok = exit === 0;
  if (!ok) output += await serverLogs(dir);
  return { line: snippet.line, language: snippet.language, ok, exit, ms: Math.round(performance.now() - started), output };
}

/** The end of each server's output, to read beside a snippet that failed. */
async function serverLogs(dir: string): Promise<string> {
  const logs = (await readdir(dir)).filter((entry) => entry.endsWith(".log"));
  const parts = await Promise.all(
    logs.map(async (log) => `\n--- ${log} (its end) ---\n${(await readFile(path.join(dir, log), "utf8")).split("\n").slice(-40).join("\n")}`),
  );
  return parts.join("");
}

if (import.meta.main) {
  main().then(
    (code) => (process.exitCode = code),
    (error: unknown) => {
      console.error(error instanceof Error ? error.message : error);
      process.exitCode = 2;
    },
  );
}
