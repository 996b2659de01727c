import { timestampDate } from "@bufbuild/protobuf/wkt";
import type { SkillDetails } from "@skillenv/client/web";
import { code, formatBytes, formatTime, h, plural } from "../dom.ts";
import { href } from "../router.ts";
import { fill, pageHeader, pagedTable, panel, type ViewContext } from "./common.ts";
import { historyPanel } from "./skill-history.ts";

type SkillMetadata = Omit<SkillDetails, "files">;

export function skillsView(context: ViewContext): HTMLElement {
  context.setTitle("Skills");
  const table = pagedTable<SkillMetadata>(context, {
    columns: ["Name", "Description", "Files", "Content hash", "Updated"],
    fetch: async (pageToken) => {
      const page = await context.client.skills.list({ pageToken });
      return { items: page.skills, nextPageToken: page.nextPageToken };
    },
    rows: (skills) => skills.map(skillRow),
    none: ["No skills yet. Upload a folder with a SKILL.md: ", h("code", null, "npx skillenv upload my-skill")],
  });
  return h(
    "div",
    null,
    pageHeader("Skills", "Named instruction bundles of this workspace. A run offers the ones it names to its model through the skills tool."),
    table,
  );
}

function skillRow(skill: SkillMetadata): HTMLElement {
  return h(
    "tr",
    null,
    h("td", null, h("a", { href: href({ page: "skill", name: skill.name }), class: "strong" }, skill.name)),
    h("td", { class: "description" }, skill.description),
    h("td", { class: "nowrap" }, plural(skill.fileCount, "file")),
    h("td", null, code(skill.contentHash, 12)),
    h("td", { class: "nowrap muted" }, formatTime(skill.updatedAt && timestampDate(skill.updatedAt))),
  );
}

export function skillView(context: ViewContext, name: string): HTMLElement {
  context.setTitle(`Skill ${name}`);
  const details = h("div");
  void fill(context, details, () => context.client.skills.get(name), skillDetails);
  return h("div", null, pageHeader(name, h("a", { href: href({ page: "skills" }) }, "← All skills")), details, historyPanel(context, name));
}

function skillDetails(skill: SkillDetails): HTMLElement[] {
  const row = (term: string, ...value: Array<Node | string>) => [h("dt", null, term), h("dd", null, value)];
  return [
    panel(
      "Skill",
      h(
        "dl",
        { class: "facts" },
        row("Description", skill.description),
        row("Version", `${skill.version} (current)`),
        row("Content hash", code(skill.contentHash)),
        row("Files", `${plural(skill.fileCount, "file")}, ${formatBytes(skill.totalFileBytes)} in all (SKILL.md included)`),
        row("Bundle", `${formatBytes(skill.bundleBytes)} as a canonical zip`),
        row("Created", formatTime(skill.createdAt && timestampDate(skill.createdAt))),
        row("Updated", formatTime(skill.updatedAt && timestampDate(skill.updatedAt))),
      ),
    ),
    panel(
      "Files",
      h(
        "table",
        null,
        h("thead", null, h("tr", null, h("th", null, "Path"), h("th", null, "Size"))),
        h(
          "tbody",
          null,
          skill.files.map((file) => h("tr", null, h("td", null, code(file.path)), h("td", { class: "nowrap muted" }, formatBytes(file.sizeBytes)))),
        ),
      ),
      h("p", { class: "muted" }, `A run stages these under /workspace/skills/${skill.name}/ in every environment with a workspace.`),
    ),
    panel("Use it in a run", h("pre", null, `session.run({\n  message: "…",\n  skills: [${JSON.stringify(skill.name)}],\n  …\n})`)),
  ];
}
