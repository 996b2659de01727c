import type { ServiceClient } from "@skillenv/client/web";
import { describeFailure } from "../connection.ts";
import { h, replaceChildren, type Child } from "../dom.ts";
import type { BrowserHost } from "../host.ts";
import type { Route } from "../router.ts";

/** What a page is given to render itself. */
export interface ViewContext {
  client: ServiceClient;
  host: BrowserHost;
  /** Aborted when the person leaves the page: views stop their streams and listeners with it. */
  signal: AbortSignal;
  /** The document's title: "<title> · skillenv console". */
  setTitle(title: string): void;
  navigate(route: Route): void;
  /** A call failed: answers what to show in its place (a refused key signs out instead). */
  failure(error: unknown): HTMLElement;
}

export type View = (context: ViewContext) => HTMLElement;

export function pageHeader(title: Child, lead?: Child, ...actions: Child[]): HTMLElement {
  return h(
    "header",
    { class: "page-header" },
    h("div", null, h("h1", null, title), lead && h("p", { class: "lead" }, lead)),
    actions.length > 0 && h("div", { class: "actions" }, actions),
  );
}

export function panel(title: string, ...children: Child[]): HTMLElement {
  return h("section", { class: "panel" }, h("h2", null, title), children);
}

export function errorBox(error: unknown): HTMLElement {
  return h("p", { class: "error", role: "alert" }, describeFailure(error));
}

export function empty(...children: Child[]): HTMLElement {
  return h("p", { class: "empty" }, children);
}

/** Fills `target` with what `render` makes of `fetch`'s answer, or with the failure. */
export async function fill<T>(context: ViewContext, target: Element, fetch: () => Promise<T>, render: (value: T) => Child): Promise<void> {
  replaceChildren(target, h("p", { class: "loading" }, "Loading…"));
  try {
    const value = await fetch();
    if (!context.signal.aborted) replaceChildren(target, render(value));
  } catch (error) {
    if (!context.signal.aborted) replaceChildren(target, context.failure(error));
  }
}

export interface Page<T> {
  items: T[];
  nextPageToken: string;
}

/**
 * A table filled a page at a time: the first page at once, the next ones behind a button.
 * `rows` renders one page's items; `none` is shown when there are none at all.
 */
/** A table's head: one row of column titles. */
export function tableHead(columns: readonly string[]): HTMLElement {
  return h(
    "thead",
    null,
    h(
      "tr",
      null,
      columns.map((column) => h("th", null, column)),
    ),
  );
}

export function pagedTable<T>(
  context: ViewContext,
  options: { columns: string[]; fetch: (pageToken: string) => Promise<Page<T>>; rows: (items: T[]) => HTMLElement[]; none: Child },
): HTMLElement {
  const body = h("tbody");
  const table = h("table", null, tableHead(options.columns), body);
  const container = h("div", { class: "table-wrap" }, h("p", { class: "loading" }, "Loading…"));
  const more = h("button", { type: "button", class: "secondary" }, "Load more");
  let pageToken = "";
  const load = async () => {
    more.disabled = true;
    try {
      const page = await options.fetch(pageToken);
      if (context.signal.aborted) return;
      pageToken = page.nextPageToken;
      body.append(...options.rows(page.items));
      more.disabled = false;
      const shown = body.children.length === 0 ? empty(options.none) : [table, pageToken !== "" && more];
      replaceChildren(container, shown);
    } catch (error) {
      if (!context.signal.aborted) replaceChildren(container, context.failure(error));
    }
  };
  more.addEventListener("click", () => void load());
  void load();
  return container;
}
