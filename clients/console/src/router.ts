/**
 * Pages are addressed by the URL's fragment (#/sessions/ses_...), so every page of the console is
 * the one index.html the service serves, links can be shared, and Back works.
 */

export type Route =
  | { page: "skills" }
  | { page: "skill"; name: string }
  | { page: "sessions" }
  | { page: "session"; id: string }
  | { page: "host" }
  | { page: "status" };

export function currentRoute(): Route {
  const [section, id] = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  if (section === "skills" && id) return { page: "skill", name: id };
  if (section === "sessions" && id) return { page: "session", id };
  if (section === "sessions") return { page: "sessions" };
  if (section === "host") return { page: "host" };
  if (section === "status") return { page: "status" };
  return { page: "skills" };
}

export function href(route: Route): string {
  switch (route.page) {
    case "skill":
      return `#/skills/${encodeURIComponent(route.name)}`;
    case "session":
      return `#/sessions/${encodeURIComponent(route.id)}`;
    default:
      return `#/${route.page}`;
  }
}

/** The navigation entry a page belongs to. */
export function section(route: Route): "skills" | "sessions" | "host" | "status" {
  if (route.page === "skill") return "skills";
  if (route.page === "session") return "sessions";
  return route.page;
}
