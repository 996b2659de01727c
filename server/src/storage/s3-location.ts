/** Where an S3BlobStore keeps its objects: a bucket, a key prefix and how to reach the store. */
export interface S3Location {
  bucket: string;
  /** Empty, or path segments ending in `/`: every key the store writes starts with it. */
  prefix: string;
  /** An S3-compatible store's base URL; undefined: AWS S3 of the region. */
  endpoint: string | undefined;
  /** Undefined: the SDK's default chain (AWS_REGION, the profile). */
  region: string | undefined;
  /** `http://host/bucket/key` rather than `http://bucket.host/key`; most S3-compatible stores need it. */
  forcePathStyle: boolean;
}

const BUCKET = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;
const PREFIX_SEGMENT = /^[A-Za-z0-9_.-]+$/;
const PARAMETERS = new Set(["endpoint", "region", "forcePathStyle"]);

/**
 * SERVICE_BLOB_URL: `s3://bucket[/prefix]?endpoint=http://127.0.0.1:9000&region=us-east-1&forcePathStyle=true`,
 * every parameter optional. Credentials never appear here: they come from the SDK's default chain.
 * Throws an Error stating the accepted form.
 */
export function parseS3Url(raw: string): S3Location {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new Error("expected s3://bucket[/prefix][?endpoint=<url>&region=<region>&forcePathStyle=true]");
  }
  if (url.protocol !== "s3:" || url.username !== "" || url.password !== "" || url.hash !== "" || url.port !== "") {
    throw new Error(
      "expected s3://bucket[/prefix][?endpoint=<url>&region=<region>&forcePathStyle=true], without credentials (they come from AWS_ACCESS_KEY_ID etc.)",
    );
  }
  if (!BUCKET.test(url.hostname)) throw new Error("the bucket name must be 3-63 characters of [a-z0-9.-], starting and ending with a letter or digit");
  // From the text as written: URL would resolve "a/../b" to "b" without a word.
  const path = /^s3:\/\/[^/?#]*([^?#]*)/.exec(raw)?.[1] ?? "";
  const segments = path.split("/").filter((segment) => segment !== "");
  if (segments.some((segment) => !PREFIX_SEGMENT.test(segment) || segment === "." || segment === "..")) {
    throw new Error("the key prefix must be path segments of [A-Za-z0-9_.-], not . or ..");
  }
  for (const name of url.searchParams.keys()) {
    if (!PARAMETERS.has(name)) throw new Error(`unknown parameter ${name}; accepted: endpoint, region, forcePathStyle`);
  }
  const endpoint = url.searchParams.get("endpoint") ?? undefined;
  if (endpoint !== undefined && !/^https?:\/\/[^/?#]+\/?$/.test(endpoint)) throw new Error("endpoint must be an http(s) origin, e.g. http://127.0.0.1:9000");
  const forcePathStyle = url.searchParams.get("forcePathStyle") ?? "false";
  if (forcePathStyle !== "true" && forcePathStyle !== "false") throw new Error("forcePathStyle must be true or false");
  const region = url.searchParams.get("region") || undefined;
  return { bucket: url.hostname, prefix: segments.map((segment) => `${segment}/`).join(""), endpoint, region, forcePathStyle: forcePathStyle === "true" };
}
