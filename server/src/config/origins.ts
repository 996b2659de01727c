/**
 * HTTP(S) origins of network grants and allow-lists: exact `scheme://host[:port]`, or the
 * wildcard `https://*.<domain>[:port]`, which covers every subdomain of <domain>, at any depth,
 * but not <domain> itself. Hosts are compared after WHATWG URL parsing, so case, IDN
 * (punycode), percent-encoding, IPv4 spellings and default ports are normalised before any
 * comparison, and the comparison itself is exact string equality or a dot-anchored suffix.
 */
export interface Origin {
  scheme: "http" | "https";
  /** Lowercase ASCII host as URL parsing yields it; for a wildcard, the domain after `*.`. */
  host: string;
  /** Empty for the scheme's default port. */
  port: string;
  wildcard: boolean;
}

const WILDCARD_PREFIX = "https://*.";
/** scheme://authority with an optional lone trailing slash: no path, query or fragment. */
const ORIGIN_SHAPE = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#\\]+\/?$/;

/** Parses an origin as written in a grant or an allow-list; undefined when it is not one. */
export function parseOrigin(text: string): Origin | undefined {
  if (!ORIGIN_SHAPE.test(text)) return undefined;
  const wildcard = text.toLowerCase().startsWith(WILDCARD_PREFIX);
  const url = parseUrl(wildcard ? `https://${text.slice(WILDCARD_PREFIX.length)}` : text);
  if (url === undefined || url.pathname !== "/") return undefined;
  const origin = originOf(url, wildcard);
  const validHost = wildcard ? isDomain(url.hostname) : isDomain(url.hostname) || isIpLiteral(url.hostname);
  return validHost ? origin : undefined;
}

/** The origin of a request URL; undefined for non-HTTP(S) URLs and URLs carrying credentials. */
export function requestOrigin(text: string): Origin | undefined {
  const url = parseUrl(text);
  return url === undefined ? undefined : originOf(url, false);
}

/** The canonical text of an origin: what a normalised grant carries. */
export function formatOrigin(origin: Origin): string {
  const host = origin.wildcard ? `*.${origin.host}` : origin.host;
  return `${origin.scheme}://${host}${origin.port === "" ? "" : `:${origin.port}`}`;
}

/**
 * Whether `allowed` covers `wanted`: equal origins; a wildcard covers the subdomains of its
 * domain and the wildcards of those subdomains, on the same scheme and port. An exact origin
 * never covers a wildcard.
 */
export function covers(allowed: Origin, wanted: Origin): boolean {
  if (allowed.scheme !== wanted.scheme || allowed.port !== wanted.port) return false;
  if (!allowed.wildcard) return !wanted.wildcard && allowed.host === wanted.host;
  if (wanted.wildcard) return wanted.host === allowed.host || isSubdomain(wanted.host, allowed.host);
  return isDomain(wanted.host) && isSubdomain(wanted.host, allowed.host);
}

function isSubdomain(host: string, domain: string): boolean {
  return host.endsWith(`.${domain}`);
}

function parseUrl(text: string): URL | undefined {
  try {
    return new URL(text);
  } catch {
    return undefined;
  }
}

function originOf(url: URL, wildcard: boolean): Origin | undefined {
  const scheme = url.protocol.slice(0, -1);
  if (scheme !== "http" && scheme !== "https") return undefined;
  // Userinfo never decides the host, but a URL carrying it is refused rather than trusted.
  if (url.username !== "" || url.password !== "" || url.hostname === "") return undefined;
  return { scheme, host: url.hostname, port: url.port, wildcard };
}

/** A DNS name (no trailing dot), not an IP literal: only names have subdomains. */
function isDomain(host: string): boolean {
  return !isIpLiteral(host) && /^[a-z0-9_-]+(\.[a-z0-9_-]+)*$/.test(host);
}

/** URL parsing has already turned every IPv4 spelling into dotted decimal and bracketed IPv6. */
function isIpLiteral(host: string): boolean {
  return host.startsWith("[") || /^[0-9.]+$/.test(host);
}

/**
 * The per-request check of outgoing HTTP: whether `url` lies within the granted origins (granted `network`). Scheme, host and port must match exactly or fall under a granted
 * wildcard; URLs with userinfo, other schemes or unparseable text are refused.
 */
export function originAllowed(granted: readonly string[], url: string): boolean {
  const wanted = requestOrigin(url);
  if (wanted === undefined) return false;
  return granted.some((text) => {
    const allowed = parseOrigin(text);
    return allowed !== undefined && covers(allowed, wanted);
  });
}
