import type { Step } from "../../testing/scripted-provider/index.ts";

/**
 * What the scripted model does in the demo, one step per model call: what a capable model would
 * do with this request, written down so the demo runs offline and always the same way.
 */

const SUMMARY =
  "acme-cli 2.4.0 exports CSV, reads environment variables in config files and no longer " +
  "re-uploads unchanged files on Windows. It needs Node 20 or later.";

const RELEASE_NOTES = `# acme-cli 2.4.0

${SUMMARY}

## Highlights
- \`export --format csv\` writes CSV next to JSON (#412).
- Config files can use \`\${ENV}\` placeholders, so secrets can stay out of them (#398).

## Fixes
- \`sync\` no longer re-uploads unchanged files on Windows (#405).
- The progress bar fits an 80-column terminal (#407).

## Breaking changes
- Node 18 is no longer supported: upgrade to Node 20 or later before updating (#401).`;

export const DEMO_SCRIPT: Step[] = [
  { text: "Let me see which skills I have.", toolCalls: [{ id: "toolu_list", name: "skills", input: { action: "list" } }] },
  { toolCalls: [{ id: "toolu_load", name: "skills", input: { action: "load", name: "release-notes" } }] },
  {
    text: "The skill asks for its template; I will read it with the changes.",
    toolCalls: [
      { id: "toolu_template", name: "files", input: { v: 1, op: "read", path: "/workspace/skills/release-notes/template.md" } },
      { id: "toolu_changes", name: "files", input: { v: 1, op: "read", path: "/workspace/CHANGES.md" } },
    ],
  },
  { text: "Checking that the summary stays within 60 words.", toolCalls: [{ id: "toolu_count", name: "word_count", input: { text: SUMMARY } }] },
  { text: RELEASE_NOTES },
];
