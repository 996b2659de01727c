import type { EnvironmentStatus, Run, Session, SessionEvent } from "@skillenv/client/web";
import { describeFailure } from "../connection.ts";
import { badge, code, formatJson, formatTime, h, plural, replaceChildren, type Child } from "../dom.ts";
import { href } from "../router.ts";
import { empty, pageHeader, panel, type ViewContext } from "./common.ts";
import { transcriptView } from "./transcript-view.ts";

/** Events after which the session's record (its state, its environments' states) has changed. */
const SESSION_CHANGES: ReadonlySet<string> = new Set(["environment.ready", "environment.failed", "session.ended"]);
/** Events after which a run's record has changed. */
const RUN_CHANGES: ReadonlySet<string> = new Set(["run.submitted", "turn.completed", "turn.failed", "run.cancelled"]);
/** A burst of events (a replayed journal) reloads the runs once. */
const RUNS_RELOAD_DELAY_MS = 200;

export function sessionView(context: ViewContext, id: string): HTMLElement {
  context.setTitle(`Session ${id}`);
  const back = h("a", { href: href({ page: "sessions" }) }, "← All sessions");
  const root = h("div", null, pageHeader(["Session ", code(id)], back), h("p", { class: "loading" }, "Loading…"));
  context.client.sessions.get(id).then(
    (session) => {
      if (!context.signal.aborted) replaceChildren(root, sessionPage(context, session, back));
    },
    (error: unknown) => {
      if (!context.signal.aborted) replaceChildren(root, pageHeader(["Session ", code(id)], back), context.failure(error));
    },
  );
  return root;
}

function sessionPage(context: ViewContext, session: Session, back: HTMLElement): Child[] {
  const summary = h("p", { class: "lead" });
  const environments = h("div");
  const runs = h("div");
  const renderRecord = () => {
    const { state, createdAt, endedAt } = session.record;
    replaceChildren(summary, badge(state), ` created ${formatTime(createdAt)}`, endedAt && `, ended ${formatTime(endedAt)}`, " · ", back);
    replaceChildren(environments, environmentsTable(context, session));
  };
  renderRecord();
  const stopFollowingHost = context.host.onChange(renderRecord);
  context.signal.addEventListener("abort", stopFollowingHost);
  const reloadRuns = debounce(() => void fillRuns(context, session, runs), RUNS_RELOAD_DELAY_MS);
  reloadRuns();
  const onEvent = (event: SessionEvent) => {
    // A refresh that fails leaves the record as it was; the transcript says when the connection is lost.
    if (SESSION_CHANGES.has(event.type)) void session.refresh().then(renderRecord, () => undefined);
    if (RUN_CHANGES.has(event.type)) reloadRuns();
  };
  return [
    h("header", { class: "page-header" }, h("div", null, h("h1", null, "Session ", code(session.id)), summary)),
    h("div", { class: "columns" }, panel("Environments", environments), panel("Tools", toolsTable(session), callToolForm(session))),
    panel("Runs", runs),
    panel("Transcript", transcriptView(context, session, onEvent)),
  ];
}

function environmentsTable(context: ViewContext, session: Session): HTMLElement {
  return h(
    "table",
    null,
    h("thead", null, h("tr", null, h("th", null, "Name"), h("th", null, "Kind"), h("th", null, "State"), h("th", null, "Served by this tab"))),
    h(
      "tbody",
      null,
      session.environments.map((environment) =>
        h(
          "tr",
          { "data-environment": environment.name },
          h("td", null, h("code", null, environment.name)),
          h("td", null, environment.kind),
          h("td", null, badge(environment.state)),
          h("td", null, hostControl(context, session, environment)),
        ),
      ),
    ),
  );
}

/** For a host environment: serve it from this tab, or how serving it goes. */
function hostControl(context: ViewContext, session: Session, environment: EnvironmentStatus): Child {
  if (environment.kind !== "host") return h("span", { class: "muted" }, "—");
  const connection = context.host.connectionOf(session.id, environment.name);
  if (!connection || connection.state === "closed") {
    const title = "The session's calls of this environment's tools come to this tab; a host serving it elsewhere is replaced.";
    const serve = h("button", { type: "button", class: "small", title, onclick: () => context.host.serve(session, environment.name) }, "Serve from this tab");
    serve.disabled = session.state === "ended";
    const elsewhere = environment.hostAttached && h("span", { class: "muted", "data-host-elsewhere": "" }, "served by another host ");
    return [connection?.error && h("span", { class: "error" }, `${connection.error.message} `), elsewhere, serve];
  }
  return [badge(connection.state), " ", h("button", { type: "button", class: "secondary small", onclick: () => void connection.stop() }, "Stop")];
}

function toolsTable(session: Session): Child {
  if (session.record.tools.length === 0) return empty("No tools are placed in this session.");
  return h(
    "table",
    null,
    h("thead", null, h("tr", null, h("th", null, "Tool"), h("th", null, "Environment"), h("th", null, "Description"))),
    h(
      "tbody",
      null,
      session.record.tools.map((tool) =>
        h("tr", null, h("td", null, h("code", null, tool.name)), h("td", null, tool.environment), h("td", { class: "description" }, tool.description)),
      ),
    ),
  );
}

/** CallTool: one call of a placed tool through the session's journal, and its receipt. */
function callToolForm(session: Session): Child {
  if (session.record.tools.length === 0) return undefined;
  const select = h(
    "select",
    { name: "tool", "aria-label": "Tool" },
    session.record.tools.map((tool) => h("option", { value: tool.name }, tool.name)),
  );
  const input = h("textarea", { name: "input", rows: 2, spellcheck: "false", "aria-label": "Input (JSON)" }, "{}");
  const submit = h("button", { type: "submit" }, "Call tool");
  const result = h("div", { class: "call-result" });
  const call = async (event: Event) => {
    event.preventDefault();
    let value: unknown;
    try {
      value = JSON.parse(input.value);
    } catch (error) {
      replaceChildren(result, h("p", { class: "error" }, `The input is not JSON: ${(error as Error).message}`));
      return;
    }
    submit.disabled = true;
    replaceChildren(result, h("p", { class: "loading" }, "Calling…"));
    try {
      const receipt = await session.callTool(select.value, value);
      const shown =
        receipt.outcome === "returned"
          ? h("pre", { class: "output" }, formatJson(receipt.output))
          : h("p", { class: "output failure" }, receipt.outcome === "failure" ? `${receipt.code}: ${receipt.message}` : receipt.message);
      replaceChildren(result, h("p", null, badge(receipt.outcome), " ", code(receipt.operationId)), shown);
    } catch (error) {
      replaceChildren(result, h("p", { class: "error" }, describeFailure(error)));
    } finally {
      submit.disabled = false;
    }
  };
  return h(
    "form",
    { class: "call-tool", onsubmit: (event) => void call(event) },
    h("h2", null, "Call a tool"),
    h("div", { class: "row" }, select, input, submit),
    result,
  );
}

async function fillRuns(context: ViewContext, session: Session, target: HTMLElement): Promise<void> {
  try {
    const page = await session.runs.list({ pageSize: 20 });
    if (context.signal.aborted) return;
    replaceChildren(target, page.runs.length === 0 ? empty("No runs yet.") : h("div", { class: "runs" }, page.runs.map(runCard)));
  } catch (error) {
    if (!context.signal.aborted) replaceChildren(target, context.failure(error));
  }
}

function runCard(run: Run): HTMLElement {
  const { record } = run;
  const stats = [
    plural(record.rounds, "round"),
    plural(record.toolCalls, "tool call"),
    `${record.usage.inputTokens} tokens in, ${record.usage.outputTokens} out`,
    record.stopReason && `stop: ${record.stopReason}`,
    record.skills.length > 0 && `skills ${record.skills.map((skill) => skill.name).join(", ")}`,
  ].filter((part) => typeof part === "string");
  return h(
    "article",
    { class: "run", "data-run": run.id },
    h(
      "div",
      { class: "run-head" },
      code(run.id),
      badge(record.status),
      h("span", null, `${record.model.provider} ${record.model.name}`),
      h("span", { class: "muted" }, formatTime(record.createdAt)),
    ),
    h("p", { class: "meta" }, stats.join(" · ")),
    record.outputText && h("div", { class: "output-text" }, record.outputText),
    record.error && h("p", { class: "output failure" }, `${record.error.code}: ${record.error.message}`),
  );
}

function debounce(action: () => void, delayMs: number): () => void {
  let timer: ReturnType<typeof setTimeout> | undefined;
  return () => {
    clearTimeout(timer);
    timer = setTimeout(action, delayMs);
  };
}
