import type { Step } from "../../testing/scripted-provider/index.ts";

/**
 * What the scripted model does in the demo, one step per model call: what a capable model would
 * do with this request, written down so the demo runs offline and always the same way. Only the
 * date it dates the notes with changes: the demo's `clock` host tool answers it.
 */

const SUMMARY =
  "acme-cli 2.4.0 exports CSV, reads environment variables in config files and no longer " +
  "re-uploads unchanged files on Windows. It needs Node 20 or later.";

const releaseNotes = (date: string) => `# acme-cli 2.4.0

_Released ${date}._

${SUMMARY}

## Highlights
- \`export --format csv\` writes CSV next to JSON (#412).
- Config files can use \`\${ENV}\` placeholders, so secrets can stay out of them (#398).

## Fixes
- \`sync\` no longer re-uploads unchanged files on Windows (#405).
- The progress bar fits an 80-column terminal (#407).

## Breaking changes
- Node 18 is no longer supported: upgrade to Node 20 or later before updating (#401).`;

/** The script, for notes dated `releaseDate` (YYYY-MM-DD), the date the clock tool will answer. */
export function demoScript(releaseDate: string): Step[] {
  return [
    { text: "Let me see which skills I have.", toolCalls: [{ id: "toolu_list", name: "skills", input: { action: "list" } }] },
    { toolCalls: [{ id: "toolu_load", name: "skills", input: { action: "load", name: "release-notes" } }] },
    {
      text: "The skill asks for its template; I will read it with the changes, and check today's date for the release line.",
      toolCalls: [
        { id: "toolu_template", name: "files", input: { v: 1, op: "read", path: "/workspace/skills/release-notes/template.md" } },
        { id: "toolu_changes", name: "files", input: { v: 1, op: "read", path: "/workspace/CHANGES.md" } },
        { id: "toolu_clock", name: "clock", input: {} },
      ],
    },
    { text: "Checking that the summary stays within 60 words.", toolCalls: [{ id: "toolu_count", name: "word_count", input: { text: SUMMARY } }] },
    { text: releaseNotes(releaseDate) },
  ];
}
