/**
 * The fenced code blocks of a Markdown file, and which of them are snippets the snippet test runs
 * (docs/snippets.md): a block whose language is a shell, TypeScript, JavaScript or Python runs,
 * unless its info string carries the attribute `fragment` (```ts fragment). Every other block
 * (json, text, wit, none) is shown, never run.
 */

/** What runs a snippet: bash, the repository's Node 24, or Debian's python3. */
export type SnippetRunner = "bash" | "node" | "python";

/** The info-string attribute of a block that is not meant to run as it stands. */
export const FRAGMENT = "fragment";

const RUNNERS: Readonly<Record<string, SnippetRunner>> = {
  sh: "bash",
  bash: "bash",
  shell: "bash",
  ts: "node",
  typescript: "node",
  js: "node",
  javascript: "node",
  python: "python",
  py: "python",
};

export interface FencedBlock {
  /** The 1-based line of the opening fence. */
  line: number;
  /** The info string's first word, lowercased ("" when there is none). */
  language: string;
  /** The info string's other words. */
  attributes: string[];
  /** The block's content, with the fence's indentation removed, ending in a newline. */
  text: string;
}

export interface Snippet extends FencedBlock {
  runner: SnippetRunner;
}

const OPENING = /^( {0,3})(`{3,}|~{3,})(.*)$/;

/** Every fenced block of `markdown`, in order. An unclosed fence runs to the end, as CommonMark says. */
export function fencedBlocks(markdown: string): FencedBlock[] {
  const lines = markdown.split("\n");
  const blocks: FencedBlock[] = [];
  for (let index = 0; index < lines.length; index++) {
    const opening = OPENING.exec(lines[index] ?? "");
    if (!opening) continue;
    const [, indent = "", fence = "", info = ""] = opening;
    if (fence.startsWith("`") && info.includes("`")) continue; // an inline code span, not a fence
    const closing = new RegExp(`^ {0,3}${fence[0] === "`" ? "`" : "~"}{${fence.length},}\\s*$`);
    const body: string[] = [];
    let end = index + 1;
    for (; end < lines.length && !closing.test(lines[end] ?? ""); end++) body.push(stripIndent(lines[end] ?? "", indent.length));
    const [language = "", ...attributes] = info
      .trim()
      .split(/\s+/)
      .filter((word) => word !== "");
    blocks.push({ line: index + 1, language: language.toLowerCase(), attributes, text: body.map((line) => `${line}\n`).join("") });
    index = end;
  }
  return blocks;
}

/** The blocks of `markdown` the snippet test runs, in order. */
export function snippets(markdown: string): Snippet[] {
  return fencedBlocks(markdown).flatMap((block) => {
    const runner = RUNNERS[block.language];
    return runner && !block.attributes.includes(FRAGMENT) ? [{ ...block, runner }] : [];
  });
}

function stripIndent(line: string, width: number): string {
  let strip = 0;
  while (strip < width && line[strip] === " ") strip++;
  return line.slice(strip);
}
