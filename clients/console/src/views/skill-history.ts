import { timestampDate } from "@bufbuild/protobuf/wkt";
import type { SkillVersionDetails } from "@skillenv/client/web";
import { badge, code, formatBytes, formatTime, h, replaceChildren } from "../dom.ts";
import { fileChanges, lineDiff, type DiffLine } from "../skill-diff.ts";
import { empty, panel, tableHead, type ViewContext } from "./common.ts";

type Version = Omit<SkillVersionDetails, "files">;

/** Versions the history shows: the newest this many (retention keeps 20 by default). */
const HISTORY_VERSIONS = 100;

/**
 * A skill's history: its versions, newest first, and what changed between two of them (files
 * added, removed and changed; a line diff of SKILL.md), the newest against the one before at first.
 */
export function historyPanel(context: ViewContext, name: string): HTMLElement {
  const body = h("div", null, h("p", { class: "loading" }, "Loading…"));
  void (async () => {
    try {
      const { versions } = await context.client.skills.versions(name, { pageSize: HISTORY_VERSIONS });
      if (!context.signal.aborted) replaceChildren(body, history(context, name, versions));
    } catch (error) {
      if (!context.signal.aborted) replaceChildren(body, context.failure(error));
    }
  })();
  return panel("History", body);
}

function history(context: ViewContext, name: string, versions: Version[]): HTMLElement[] {
  const table = h("table", null, tableHead(["Version", "Description", "Content hash", "Created"]), h("tbody", null, versions.map(versionRow)));
  if (versions.length < 2) return [table, empty("One version so far: nothing to compare.")];
  const choice = (label: string, selected: number) =>
    h(
      "select",
      { "aria-label": label },
      versions.map((version) => h("option", { value: String(version.version), selected: version.version === selected }, `version ${version.version}`)),
    );
  const from = choice("Compare from", versions[1]!.version);
  const to = choice("Compare to", versions[0]!.version);
  const result = h("div", { class: "comparison" });
  const compare = () => void showChanges(context, name, Number(from.value), Number(to.value), result);
  const form = h(
    "form",
    {
      class: "row compare",
      onsubmit: (event) => {
        event.preventDefault();
        compare();
      },
    },
    h("span", null, "Compare"),
    from,
    h("span", null, "with"),
    to,
    h("button", { type: "submit", class: "secondary small" }, "Compare"),
  );
  compare();
  return [table, form, result];
}

function versionRow(version: Version): HTMLElement {
  return h(
    "tr",
    null,
    h("td", { class: "nowrap" }, `version ${version.version} `, version.current && badge("current")),
    h(
      "td",
      { class: "description" },
      version.description,
      version.restoredFrom > 0 && h("span", { class: "muted" }, ` (restored from version ${version.restoredFrom})`),
    ),
    h("td", null, code(version.contentHash, 12)),
    h("td", { class: "nowrap muted" }, formatTime(version.createdAt && timestampDate(version.createdAt))),
  );
}

async function showChanges(context: ViewContext, name: string, before: number, after: number, target: HTMLElement): Promise<void> {
  replaceChildren(target, h("p", { class: "loading" }, "Comparing…"));
  try {
    const skills = context.client.skills;
    const [older, newer, olderMd, newerMd] = await Promise.all([
      skills.get(name, { version: before }),
      skills.get(name, { version: after }),
      skills.instructions(name, before),
      skills.instructions(name, after),
    ]);
    if (context.signal.aborted) return;
    replaceChildren(
      target,
      h(
        "section",
        { "aria-label": `Changes from version ${before} to version ${after}` },
        h("h3", null, `Files, version ${before} → version ${after}`),
        filesChanged(older, newer),
        h("h3", null, "SKILL.md"),
        diffView(lineDiff(olderMd, newerMd)),
      ),
    );
  } catch (error) {
    if (!context.signal.aborted) replaceChildren(target, context.failure(error));
  }
}

function filesChanged(older: SkillVersionDetails, newer: SkillVersionDetails): HTMLElement {
  const { added, removed, changed } = fileChanges(older.files, newer.files);
  if (added.length + removed.length + changed.length === 0) return empty("No file changed.");
  const item = (kind: string, path: string, detail: string) =>
    h("li", { class: `file-${kind}` }, h("span", { class: "file-change" }, kind), " ", code(path), " ", h("span", { class: "muted" }, detail));
  return h(
    "ul",
    { class: "file-changes" },
    added.map((file) => item("added", file.path, formatBytes(file.sizeBytes))),
    removed.map((file) => item("removed", file.path, formatBytes(file.sizeBytes))),
    changed.map((file) => item("changed", file.path, `${formatBytes(file.sizeBeforeBytes)} → ${formatBytes(file.sizeBytes)}`)),
  );
}

function diffView(diff: DiffLine[]): HTMLElement {
  if (diff.every((line) => line.kind === "same")) return empty("SKILL.md did not change.");
  const prefix = { same: "  ", added: "+ ", removed: "- " };
  return h(
    "pre",
    { class: "diff", "aria-label": "SKILL.md diff" },
    diff.map((line) => h("span", { class: `diff-${line.kind}` }, `${prefix[line.kind]}${line.text}\n`)),
  );
}
