import { fileURLToPath } from "node:url";
import { CACHE_IMMUTABLE, CACHE_REVALIDATE, fileAnswer, readStaticDirectory, redirect, type StaticSite } from "../http/static-files.ts";

/** Where the web console is served; `/` and `/console` redirect here. */
export const CONSOLE_PATH = "/console/";

/** Where `npm install` (or `npm run build:console`) builds it: clients/console/build.ts. */
export const CONSOLE_BUILD_DIR = fileURLToPath(new URL("../../../build/console/", import.meta.url));

/**
 * The page may load only its own files and call only this service: no inline scripts or styles,
 * no eval, nothing from another origin, no framing. A tool output or skill description that
 * slipped into the page as markup could run nothing and send nothing elsewhere.
 */
export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

const HEADERS: Record<string, string> = {
  "content-security-policy": CONSOLE_CSP,
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
};

const NOT_BUILT = new TextEncoder().encode(
  "The web console is not built in this checkout: run `npm run build:console` (npm install runs it), then start the service again.\n",
);

/**
 * The web console's files, read from `dir` once, at startup. Files under assets/ carry a hash
 * of their content in their name and may be cached for good; index.html is revalidated.
 */
export async function loadConsole(dir: string = CONSOLE_BUILD_DIR): Promise<StaticSite> {
  const site = await readStaticDirectory(dir, CONSOLE_PATH, {
    cacheControl: (path) => (path.startsWith("assets/") ? CACHE_IMMUTABLE : CACHE_REVALIDATE),
    headers: HEADERS,
  });
  return {
    answer(pathname, requestHeaders) {
      if (pathname === "/") return redirect(CONSOLE_PATH, 302, HEADERS);
      if (pathname === "/console") return redirect(CONSOLE_PATH, 308, HEADERS);
      if (!pathname.startsWith(CONSOLE_PATH)) return undefined;
      if (!site) return { status: 503, headers: { ...HEADERS, "content-type": "text/plain; charset=utf-8", "cache-control": "no-store" }, body: NOT_BUILT };
      const file = site.files.get(pathname === CONSOLE_PATH ? `${CONSOLE_PATH}index.html` : pathname);
      return file && fileAnswer(file, requestHeaders);
    },
  };
}
