import "./console.css";
import type { ServiceClient } from "@skillenv/client/web";
import { clientFor, forgetKey, isUnauthenticated, signIn, storedKey } from "./connection.ts";
import { h, replaceChildren } from "./dom.ts";
import { BrowserHost } from "./host.ts";
import { currentRoute, href, section, type Route } from "./router.ts";
import { errorBox, type View, type ViewContext } from "./views/common.ts";
import { hostView, questionDock } from "./views/host.ts";
import { sessionsView } from "./views/sessions.ts";
import { sessionView } from "./views/session.ts";
import { signInView } from "./views/sign-in.ts";
import { skillsView, skillView } from "./views/skills.ts";
import { statusView } from "./views/status.ts";

/** The console's shell: sign-in, then the navigation and one page at a time, chosen by the URL's fragment. */

const APP_NAME = "skillenv console";
/** The API's OpenAPI document, served by the service without a key. */
const OPENAPI_URL = "/openapi.json";

const app = document.getElementById("app")!;

function showSignIn(notice?: string): void {
  document.title = `Sign in · ${APP_NAME}`;
  replaceChildren(
    app,
    signInView(async (apiKey) => showConsole(await signIn(apiKey)), notice),
  );
}

function showConsole(client: ServiceClient): void {
  const host = new BrowserHost();
  const main = h("main", { class: "page" });
  const links = new Map(["skills", "sessions", "host", "status"].map((name) => [name, h("a", { href: `#/${name}` }, name[0]!.toUpperCase() + name.slice(1))]));
  let leave = new AbortController();

  const signOut = (notice?: string) => {
    leave.abort();
    window.removeEventListener("hashchange", render);
    forgetKey();
    void host.stopAll();
    showSignIn(notice);
  };
  const context = (signal: AbortSignal): ViewContext => ({
    client,
    host,
    signal,
    setTitle: (title) => {
      document.title = `${title} · ${APP_NAME}`;
    },
    navigate: (route) => {
      location.hash = href(route);
    },
    failure: (error) => {
      if (!isUnauthenticated(error)) return errorBox(error);
      // A key that stopped working (revoked, or the service restarted with other keys).
      queueMicrotask(() => signOut("The service no longer accepts this key. Sign in again."));
      return h("span");
    },
  });
  function render(): void {
    leave.abort();
    leave = new AbortController();
    const route = currentRoute();
    for (const [name, link] of links) link.classList.toggle("current", name === section(route));
    replaceChildren(main, viewOf(route)(context(leave.signal)));
  }

  const top = h(
    "header",
    { class: "top" },
    h("a", { class: "brand", href: href({ page: "skills" }) }, "skillenv", h("span", null, "console")),
    h("nav", null, [...links.values()]),
    h(
      "div",
      { class: "top-actions" },
      h("a", { href: OPENAPI_URL, target: "_blank", rel: "noopener", title: "The OpenAPI document of the JSON HTTP API" }, "API (OpenAPI)"),
      h("button", { type: "button", class: "secondary small", onclick: () => signOut() }, "Sign out"),
    ),
  );
  replaceChildren(app, top, main, questionDock(host));
  window.addEventListener("hashchange", render);
  render();
}

function viewOf(route: Route): View {
  switch (route.page) {
    case "skills":
      return skillsView;
    case "skill":
      return (context) => skillView(context, route.name);
    case "sessions":
      return sessionsView;
    case "session":
      return (context) => sessionView(context, route.id);
    case "host":
      return hostView;
    case "status":
      return statusView;
  }
}

const apiKey = storedKey();
if (apiKey === undefined) showSignIn();
else showConsole(clientFor(apiKey));
