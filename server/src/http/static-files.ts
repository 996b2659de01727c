import { createHash } from "node:crypto";
import { readdir, readFile } from "node:fs/promises";
import type { IncomingHttpHeaders } from "node:http";
import { extname, join, relative, sep } from "node:path";

/**
 * Static files anyone may GET without a key (the web console). A site is read into memory when
 * the service starts, and a request is answered by looking its path up among the files read:
 * nothing from a request ever reaches the file system, so there is no path to traverse and no
 * directory to list.
 */

export interface StaticAnswer {
  status: number;
  headers: Record<string, string>;
  /** Empty for redirects and 304s; left out of the response to a HEAD. */
  body: Uint8Array;
}

/** Answers the GETs and HEADs of its own paths; undefined for any other path. */
export interface StaticSite {
  answer(pathname: string, requestHeaders: IncomingHttpHeaders): StaticAnswer | undefined;
}

const CONTENT_TYPES: Readonly<Record<string, string>> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".map": "application/json",
  ".json": "application/json",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".txt": "text/plain; charset=utf-8",
};

/** For files whose name changes with their content: a browser may keep them for good. */
export const CACHE_IMMUTABLE = "public, max-age=31536000, immutable";
/** For files whose name stays (index.html): a browser keeps them but asks whether they changed, by ETag, on every use. */
export const CACHE_REVALIDATE = "no-cache";

interface StaticFile {
  body: Uint8Array;
  headers: Record<string, string>;
  etag: string;
}

export interface StaticDirectory {
  /** Path on the service -> file, e.g. "/console/index.html". */
  files: ReadonlyMap<string, StaticFile>;
}

/**
 * Reads every file under `dir` (undefined when there is no such directory), served at
 * `mountPath` + its relative path. `cacheControl` decides each file's Cache-Control from that
 * relative path; `headers` go on every answer.
 */
export async function readStaticDirectory(
  dir: string,
  mountPath: string,
  options: { cacheControl(path: string): string; headers: Record<string, string> },
): Promise<StaticDirectory | undefined> {
  let paths: string[];
  try {
    paths = (await readdir(dir, { recursive: true, withFileTypes: true }))
      .filter((entry) => entry.isFile())
      .map((entry) => relative(dir, join(entry.parentPath, entry.name)));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
  const files = new Map<string, StaticFile>();
  for (const path of paths) {
    const urlPath = path.split(sep).join("/");
    const body = await readFile(join(dir, path));
    const etag = `"${createHash("sha256").update(body).digest("base64url").slice(0, 27)}"`;
    const headers = {
      ...options.headers,
      "content-type": CONTENT_TYPES[extname(path)] ?? "application/octet-stream",
      "cache-control": options.cacheControl(urlPath),
      etag,
    };
    files.set(mountPath + urlPath, { body, headers, etag });
  }
  return { files };
}

/** The file's answer: 200 with its bytes, or 304 when the browser's copy (If-None-Match) is current. */
export function fileAnswer(file: StaticFile, requestHeaders: IncomingHttpHeaders): StaticAnswer {
  const cached = requestHeaders["if-none-match"]?.split(",").some((tag) => tag.trim() === file.etag) ?? false;
  return cached ? { status: 304, headers: file.headers, body: new Uint8Array() } : { status: 200, headers: file.headers, body: file.body };
}

export function redirect(location: string, status: 302 | 308, headers: Record<string, string>): StaticAnswer {
  return { status, headers: { ...headers, location, "cache-control": CACHE_REVALIDATE }, body: new Uint8Array() };
}
