import type { Session } from "@skillenv/client/web";
import { badge, code, formatTime, h } from "../dom.ts";
import { href } from "../router.ts";
import { pageHeader, pagedTable, type ViewContext } from "./common.ts";

export function sessionsView(context: ViewContext): HTMLElement {
  context.setTitle("Sessions");
  const table = pagedTable<Session>(context, {
    columns: ["Session", "State", "Environments", "Tools", "Created"],
    fetch: async (pageToken) => {
      const page = await context.client.sessions.list({ pageToken });
      return { items: page.sessions, nextPageToken: page.nextPageToken };
    },
    rows: (sessions) => sessions.map(sessionRow),
    none: ["No sessions yet. Start one served by this tab on the ", h("a", { href: href({ page: "host" }) }, "Host"), " page, or create one through the API."],
  });
  return h("div", null, pageHeader("Sessions", "Newest first. A session binds environments, places tools in them and journals everything they do."), table);
}

function sessionRow(session: Session): HTMLElement {
  const { record } = session;
  return h(
    "tr",
    null,
    h("td", null, h("a", { href: href({ page: "session", id: session.id }) }, code(session.id))),
    h("td", null, badge(record.state)),
    h("td", null, record.environments.map((environment) => `${environment.name} (${environment.kind})`).join(", ")),
    h("td", null, record.tools.map((tool) => tool.name).join(", ")),
    h("td", { class: "nowrap muted" }, formatTime(record.createdAt)),
  );
}
