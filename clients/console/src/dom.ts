/**
 * The few DOM helpers the console's views are built with. Text always goes in as text nodes,
 * never as HTML: skill descriptions, tool inputs and model output come from elsewhere.
 */

export type Child = Node | string | number | false | null | undefined | readonly Child[];

/** Attributes by name; `on<event>` names take listeners, `false` and undefined leave an attribute out. */
export type Attributes = Record<string, string | number | boolean | undefined | ((event: Event) => void)>;

export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attributes: Attributes | null = null, ...children: Child[]): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes ?? {})) {
    if (typeof value === "function") element.addEventListener(name.slice(2), value);
    else if (value === true) element.setAttribute(name, "");
    else if (value !== false && value !== undefined) element.setAttribute(name, String(value));
  }
  append(element, children);
  return element;
}

export function append(parent: Node, children: readonly Child[]): void {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(parent, child);
    else parent.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Replaces everything inside `parent`. */
export function replaceChildren(parent: Element, ...children: Child[]): void {
  parent.replaceChildren();
  append(parent, children);
}

/** A state or outcome as a small coloured label; the class picks the colour (console.css). */
export function badge(text: string): HTMLSpanElement {
  return h("span", { class: `badge badge-${text.replace(/[^a-z_]/g, "")}` }, text.replaceAll("_", " "));
}

/** Identifiers and hashes: monospaced, with the whole value in a tooltip when shortened. */
export function code(text: string, shownChars?: number): HTMLElement {
  const shown = shownChars !== undefined && text.length > shownChars ? `${text.slice(0, shownChars)}…` : text;
  return h("code", { title: shown === text ? undefined : text }, shown);
}

export function formatBytes(bytes: number | bigint): string {
  const value = Number(bytes);
  if (value < 1024) return `${value} B`;
  if (value < 1024 * 1024) return `${(value / 1024).toFixed(1)} KiB`;
  return `${(value / (1024 * 1024)).toFixed(1)} MiB`;
}

const TIME = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "medium" });

export function formatTime(date: Date | undefined): string {
  return date === undefined ? "" : TIME.format(date);
}

/** JSON for people: indented, and a string shown as its text. */
export function formatJson(value: unknown): string {
  return typeof value === "string" ? value : JSON.stringify(value, null, 2);
}

export function plural(count: number, noun: string): string {
  return `${count} ${noun}${count === 1 ? "" : "s"}`;
}
