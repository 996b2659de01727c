import { badge, code, formatJson, formatTime, h, replaceChildren } from "../dom.ts";
import { BROWSER_TOOLS, type Activity, type BrowserHost, type Question } from "../host.ts";
import { href } from "../router.ts";
import { empty, pageHeader, panel, type ViewContext } from "./common.ts";

/** The environment name a session started from this page gives the tab. */
const ENVIRONMENT = "browser";

export function hostView(context: ViewContext): HTMLElement {
  context.setTitle("Host");
  const served = h("div");
  const activity = h("div");
  const render = () => {
    replaceChildren(served, servedList(context.host));
    replaceChildren(activity, activityList(context.host.activity));
  };
  render();
  const stopFollowingHost = context.host.onChange(render);
  context.signal.addEventListener("abort", stopFollowingHost);
  const start = h("button", { type: "button", onclick: () => void startSession(context, start) }, "Start a session served by this tab");
  return h(
    "div",
    null,
    pageHeader(
      "Host",
      "This tab can be a session's host environment: the session sends it tool calls, the page runs them and answers. It serves the tools below for as long as it stays open.",
      start,
    ),
    h("div", { class: "columns" }, panel("Tools this tab serves", toolList()), panel("Serving", served)),
    panel("Activity", activity),
  );
}

/** A session with a host environment named "browser" and this tab's tools placed in it, served from here. */
async function startSession(context: ViewContext, button: HTMLButtonElement): Promise<void> {
  button.disabled = true;
  try {
    const definition = context.host.definition(ENVIRONMENT);
    const session = await context.client.sessions.create({ environments: [definition], tools: context.host.placements(definition), serveHosts: false });
    context.host.serve(session, ENVIRONMENT);
    context.navigate({ page: "session", id: session.id });
  } catch (error) {
    button.after(context.failure(error));
  } finally {
    button.disabled = false;
  }
}

function toolList(): HTMLElement {
  return h(
    "dl",
    { class: "tools" },
    BROWSER_TOOLS.map((tool) => [
      h("dt", null, h("code", null, tool.name)),
      h("dd", null, tool.description, h("pre", { class: "schema" }, JSON.stringify(tool.inputSchema))),
    ]),
  );
}

function servedList(host: BrowserHost): HTMLElement {
  if (host.served.length === 0) return empty("No session yet. Start one here, or open a session with a host environment and serve it from its page.");
  return h(
    "ul",
    { class: "served" },
    host.served.map(({ sessionId, environment, connection }) =>
      h(
        "li",
        null,
        badge(connection.state),
        " ",
        h("code", null, environment),
        " of ",
        h("a", { href: href({ page: "session", id: sessionId }) }, code(sessionId)),
        connection.error && h("span", { class: "muted" }, ` (${connection.error.message})`),
      ),
    ),
  );
}

function activityList(activity: readonly Activity[]): HTMLElement {
  if (activity.length === 0) return empty("No tool has been called yet.");
  return h(
    "table",
    { class: "activity" },
    h("thead", null, h("tr", null, h("th", null, "Tool"), h("th", null, "Input"), h("th", null, "Outcome"), h("th", null, "Output"), h("th", null, "When"))),
    h(
      "tbody",
      null,
      activity.map((item) =>
        h(
          "tr",
          null,
          h("td", null, h("code", null, item.tool)),
          h("td", null, h("pre", null, formatJson(item.input))),
          h("td", null, badge(item.state)),
          h("td", null, item.state === "running" ? "" : h("pre", null, formatJson(item.output))),
          h("td", { class: "nowrap muted" }, formatTime(item.startedAt)),
        ),
      ),
    ),
  );
}

/**
 * The questions ask_user is waiting on, on every page: a model's question should not go
 * unnoticed because the person is looking at another page.
 */
export function questionDock(host: BrowserHost): HTMLElement {
  const dock = h("aside", { class: "question-dock", "aria-live": "assertive" });
  // Cards are added and removed one by one, so that an answer being typed survives other changes.
  const cards = new Map<Question, HTMLElement>();
  const render = () => {
    for (const [question, card] of cards) {
      if (host.questions.includes(question)) continue;
      card.remove();
      cards.delete(question);
    }
    for (const question of host.questions) {
      if (cards.has(question)) continue;
      const card = questionCard(question);
      cards.set(question, card);
      dock.append(card);
    }
  };
  host.onChange(render);
  return dock;
}

function questionCard(question: Question): HTMLElement {
  const answer = h("textarea", { name: "answer", rows: 2, "aria-label": "Your answer", required: true });
  const submit = (event: Event) => {
    event.preventDefault();
    question.answer(answer.value);
  };
  return h(
    "form",
    { class: "question", onsubmit: submit },
    h(
      "p",
      { class: "question-from" },
      "A session asks you ",
      h("a", { href: href({ page: "session", id: question.sessionId }) }, code(question.sessionId, 16)),
    ),
    h("p", { class: "question-text" }, question.text),
    answer,
    h(
      "div",
      { class: "row" },
      h("button", { type: "submit" }, "Answer"),
      h("button", { type: "button", class: "secondary", onclick: () => question.decline() }, "Decline"),
    ),
  );
}
