/**
 * Every snippet of README.md and docs/ runs as pasted (docs/snippets.md): each Markdown file's
 * runnable blocks run in order by testing/snippets/run-file.ts, against a service it starts with
 * `npm start`, in a network namespace of its own. One test per block, named by its file and line.
 */
import { spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { fencedBlocks, snippets, type Snippet } from "../../testing/snippets/blocks.ts";
import type { SnippetResult } from "../../testing/snippets/run-file.ts";
import { stopServers } from "../../testing/snippets/servers.ts";

const ROOT = path.resolve(import.meta.dirname, "../..");
const RUN_FILE = path.join(ROOT, "testing", "snippets", "run-file.ts");
/** Files run at once: each runs a service and its snippets one after another, mostly waiting on them. */
const FILES_AT_ONCE = 3;
/** What a block may wait for its file: queued behind the others, then the whole file. */
const FILE_LIMIT_MS = 8 * 60_000;

/** README.md and every Markdown file under docs/, with their snippets. */
function markdownFiles(): Array<{ file: string; blocks: Snippet[] }> {
  const docs = readdirSync(path.join(ROOT, "docs"), { recursive: true, encoding: "utf8" })
    .filter((entry) => entry.endsWith(".md"))
    .map((entry) => path.join("docs", entry));
  return ["README.md", ...docs.sort()].map((file) => ({ file, blocks: snippets(readFileSync(path.join(ROOT, file), "utf8")) }));
}

interface FileRun {
  results: Map<number, SnippetResult>;
  /** What the run printed on stderr, and how it ended, for a block it never reached. */
  log: string;
  exit: number | null;
}

/** One run per file, at most FILES_AT_ONCE at a time, in the order they were first asked for. */
const queue: Array<() => void> = [];
let running = 0;
const runs = new Map<string, Promise<FileRun>>();

function fileRun(file: string): Promise<FileRun> {
  let run = runs.get(file);
  if (!run) {
    run = (async () => {
      if (running >= FILES_AT_ONCE) await new Promise<void>((resolve) => queue.push(resolve));
      running++;
      try {
        return await runFile(file);
      } finally {
        running--;
        queue.shift()?.();
      }
    })();
    run.catch(() => {}); // a test awaits it; until one does, its failure is not unhandled
    runs.set(file, run);
  }
  return run;
}

async function runFile(file: string): Promise<FileRun> {
  const dir = await mkdtemp(path.join(tmpdir(), "snippets-"));
  try {
    const child = spawn(process.execPath, [RUN_FILE, file, "--dir", dir], { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let log = "";
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (log = (log + chunk.toString()).slice(-64 * 1024)));
    const exit = await new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)));
    const results = new Map<number, SnippetResult>();
    for (const line of stdout.split("\n")) {
      if (line.startsWith("{")) {
        const result = JSON.parse(line) as SnippetResult;
        results.set(result.line, result);
      }
    }
    return { results, log, exit };
  } finally {
    await stopServers(dir);
    await rm(dir, { recursive: true, force: true });
  }
}

const files = markdownFiles();

describe.concurrent("every snippet of README.md and docs/ runs as pasted", () => {
  // Every file queued at once, the ones with most blocks first: tests wait for their file's run,
  // and vitest runs only a few tests at a time, which would otherwise run one file at a time.
  beforeAll(() => {
    const byBlocks = files.filter(({ blocks }) => blocks.length > 0).sort((a, b) => b.blocks.length - a.blocks.length);
    for (const { file } of byBlocks) void fileRun(file);
  });
  for (const { file, blocks } of files) {
    for (const block of blocks) {
      it(
        `${file}:${block.line} (${block.language})`,
        async () => {
          const run = await fileRun(file);
          const result = run.results.get(block.line);
          // The service the run starts first is line 0: when it failed, no block ran.
          const service = run.results.get(0);
          expect(result, `${file}:${block.line} did not run (run-file exited ${run.exit}):\n${service?.output ?? run.log}`).toBeDefined();
          expect(result!.ok, `${file}:${block.line} ${block.language} failed (exit ${result!.exit}):\n${result!.output}`).toBe(true);
        },
        FILE_LIMIT_MS,
      );
    }
  }
});

describe("which blocks are snippets", () => {
  it("runs shell, TypeScript, JavaScript and Python blocks but those marked fragment, and shows every other block", () => {
    const markdown = [
      "```sh",
      "echo runs",
      "```",
      "```ts fragment",
      "session.end();",
      "```",
      "```json",
      "{}",
      "```",
      "  ```python",
      "  print('indented')",
      "  ```",
      "````js",
      "```",
      "````",
      "```",
      "no language",
      "```",
    ].join("\n");
    expect(fencedBlocks(markdown).map(({ line, language, attributes }) => ({ line, language, attributes }))).toEqual([
      { line: 1, language: "sh", attributes: [] },
      { line: 4, language: "ts", attributes: ["fragment"] },
      { line: 7, language: "json", attributes: [] },
      { line: 10, language: "python", attributes: [] },
      { line: 13, language: "js", attributes: [] },
      { line: 16, language: "", attributes: [] },
    ]);
    expect(snippets(markdown).map(({ line, runner, text }) => ({ line, runner, text }))).toEqual([
      { line: 1, runner: "bash", text: "echo runs\n" },
      { line: 10, runner: "python", text: "print('indented')\n" },
      { line: 13, runner: "node", text: "```\n" },
    ]);
  });

  it("finds the snippets of README.md and docs/", () => {
    const counted = Object.fromEntries(files.map(({ file, blocks }) => [file, blocks.length]));
    expect(counted["README.md"]).toBeGreaterThan(5);
    expect(counted["docs/api.md"]).toBeGreaterThan(5);
  });
});
