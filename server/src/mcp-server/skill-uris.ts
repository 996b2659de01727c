/**
 * Skill files as MCP resources (the skills extension's "Resource Mapping"): a skill's file is
 * `skill://<skill name>/<path>`, each path segment percent-encoded where it needs to be, so the
 * skill's SKILL.md is `skill://<name>/SKILL.md`. A skill name (`^[a-z0-9][a-z0-9_-]{0,127}$`) is a
 * valid URI authority, and there is no organizational prefix: the workspace is the namespace.
 */
const SCHEME = "skill://";

export const SKILL_MD = "SKILL.md";

export function skillFileUri(name: string, path: string): string {
  return `${SCHEME}${name}/${path.split("/").map(encodeURIComponent).join("/")}`;
}

/** The skill name and file path a URI names, or undefined when it names no skill file. */
export function parseSkillFileUri(uri: string): { name: string; path: string } | undefined {
  if (!uri.startsWith(SCHEME)) return undefined;
  const rest = uri.slice(SCHEME.length);
  const slash = rest.indexOf("/");
  if (slash <= 0 || slash === rest.length - 1) return undefined;
  try {
    const path = rest
      .slice(slash + 1)
      .split("/")
      .map(decodeURIComponent)
      .join("/");
    return { name: rest.slice(0, slash), path };
  } catch {
    return undefined;
  }
}

/** What a client is told a file holds, from its extension; the bytes decide text or blob (skills-server.ts). */
export function mimeTypeOf(path: string): string {
  const extension = /\.([A-Za-z0-9]+)$/.exec(path)?.[1]?.toLowerCase();
  return (extension && MIME_TYPES[extension]) ?? "application/octet-stream";
}

const MIME_TYPES: Record<string, string> = {
  md: "text/markdown",
  markdown: "text/markdown",
  txt: "text/plain",
  json: "application/json",
  yaml: "application/yaml",
  yml: "application/yaml",
  py: "text/x-python",
  js: "text/javascript",
  mjs: "text/javascript",
  ts: "text/x-typescript",
  sh: "text/x-shellscript",
  html: "text/html",
  css: "text/css",
  csv: "text/csv",
  xml: "application/xml",
  svg: "image/svg+xml",
  png: "image/png",
  jpg: "image/jpeg",
  jpeg: "image/jpeg",
  gif: "image/gif",
  pdf: "application/pdf",
};
