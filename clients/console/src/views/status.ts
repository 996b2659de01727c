import { timestampDate } from "@bufbuild/protobuf/wkt";
import type { GetWorkspaceStatusResponse, PoolStatus, SlotCounts } from "@skillenv/client/web";
import { badge, formatTime, h, replaceChildren } from "../dom.ts";
import { panel, pageHeader, tableHead, type ViewContext } from "./common.ts";

/** How often the page reads the status again while it is shown. */
const REFRESH_MS = 5000;

/**
 * The workspace's status (GetWorkspaceStatus): its sessions, its runs of the last hour and the
 * worker pool, read again every REFRESH_MS until the person leaves the page. Each number carries
 * `data-count` naming its field, for the console's test to read.
 */
export function statusView(context: ViewContext): HTMLElement {
  context.setTitle("Status");
  const readAt = h("span", { class: "muted" });
  const body = h("div", null, h("p", { class: "loading" }, "Loading…"));
  let timer: ReturnType<typeof setTimeout> | undefined;
  context.signal.addEventListener("abort", () => clearTimeout(timer));
  const refresh = async () => {
    try {
      const status = await context.client.status.getWorkspaceStatus({});
      if (context.signal.aborted) return;
      replaceChildren(readAt, `Read ${formatTime(status.readAt && timestampDate(status.readAt))}; refreshed every ${REFRESH_MS / 1000} seconds.`);
      replaceChildren(body, statusPanels(status));
    } catch (error) {
      if (context.signal.aborted) return;
      replaceChildren(body, context.failure(error));
    }
    timer = setTimeout(() => void refresh(), REFRESH_MS);
  };
  void refresh();
  return h("div", null, pageHeader("Status", ["This workspace's sessions, its runs of the last hour and the worker pool it shares. ", readAt]), body);
}

function statusPanels(status: GetWorkspaceStatusResponse): HTMLElement[] {
  const count = (name: string, value: number) => h("dd", { "data-count": name }, String(value));
  const row = (term: Node | string, name: string, value: number) => [h("dt", null, term), count(name, value)];
  const sessions = status.sessions;
  const runs = status.runsLastHour;
  const pool = status.pool;
  return [
    h(
      "div",
      { class: "columns" },
      panel(
        "Sessions",
        h(
          "dl",
          { class: "facts" },
          row("Active", "sessions.active", sessions?.active ?? 0),
          row("Ending", "sessions.ending", sessions?.ending ?? 0),
          row("Ended", "sessions.ended", sessions?.ended ?? 0),
          row("Deleting", "sessions.deleting", sessions?.deleting ?? 0),
        ),
        h("p", { class: "muted" }, "Those the answering server holds: created or called since it started."),
      ),
      panel(
        "Runs in the last hour",
        h(
          "dl",
          { class: "facts" },
          (["running", "completed", "failed", "cancelled"] as const).map((state) => row(badge(state), `runs.${state}`, runs?.[state] ?? 0)),
        ),
        runs?.truncated && h("p", { class: "warning" }, "More runs started than one answer counts: these are the newest."),
      ),
    ),
    // Full width: its table has six columns.
    panel("Worker pool", pool?.available ? poolTable(pool) : h("p", { class: "empty" }, "The service environment is not running on this server.")),
  ];
}

function poolTable(pool: PoolStatus): HTMLElement[] {
  const columns = ["Slots", "Busy", "Total", "Waiting", "This workspace's", "Its waiting"];
  return [
    h("table", null, tableHead(columns), h("tbody", null, slotRow("Tools", "tools", pool.tools), slotRow("Agent loops", "agentLoops", pool.agentLoops))),
    h("p", { class: "muted" }, "Shared by every workspace; the last two columns are this workspace's own."),
  ];
}

function slotRow(label: string, kind: string, slots: SlotCounts | undefined): HTMLElement {
  const cell = (field: keyof Omit<SlotCounts, "$typeName" | "$unknown">) => h("td", { "data-count": `pool.${kind}.${field}` }, String(slots?.[field] ?? 0));
  return h("tr", null, h("td", null, label), cell("busy"), cell("total"), cell("waiting"), cell("workspaceBusy"), cell("workspaceWaiting"));
}
