import { createHash } from "node:crypto";
import { canonicalZip } from "@skillenv/client/bundle";
import { bearer, KEY_A, postJson, type TestService } from "./service.ts";

/** Skill metadata as the JSON API returns it (int64 fields are strings, timestamps RFC 3339). */
export interface SkillJson {
  name: string;
  description: string;
  contentHash: string;
  bundleBytes: string;
  fileCount: number;
  totalFileBytes: string;
  createdAt: string;
  updatedAt: string;
  version: number;
}

/** Exactly the fields a skill's metadata may have: no field may carry bundle bytes. */
export const METADATA_FIELDS = ["bundleBytes", "contentHash", "createdAt", "description", "fileCount", "name", "totalFileBytes", "updatedAt", "version"];

export interface Reply {
  status: number;
  body: any;
  /** The raw response text, to check what it does not contain. */
  text: string;
}

export const sha256 = (bytes: Uint8Array): string => createHash("sha256").update(bytes).digest("hex");

const encoder = new TextEncoder();

/** A SKILL.md with a YAML frontmatter block; `name` is left out when undefined. */
export function skillMd(options: { name?: string; description: string; body?: string }): string {
  const name = options.name === undefined ? "" : `name: ${options.name}\n`;
  return `---\n${name}description: ${JSON.stringify(options.description)}\n---\n${options.body ?? "Instructions.\n"}`;
}

/** A canonical bundle of `files` and what its metadata must say once bound. */
export interface Bundle {
  zip: Uint8Array;
  hash: string;
  fileCount: number;
  totalFileBytes: number;
}

export function bundleOf(files: Record<string, string | Uint8Array>): Bundle {
  const map = new Map(Object.entries(files).map(([path, content]) => [path, typeof content === "string" ? encoder.encode(content) : content]));
  const zip = canonicalZip(map);
  let totalFileBytes = 0;
  for (const data of map.values()) totalFileBytes += data.length;
  return { zip, hash: sha256(zip), fileCount: map.size, totalFileBytes };
}

/** The metadata fields a bundle determines, as the JSON API spells them. */
export function expectedMetadata(bundle: Bundle, description: string): Partial<SkillJson> {
  return {
    description,
    contentHash: bundle.hash,
    bundleBytes: String(bundle.zip.byteLength),
    fileCount: bundle.fileCount,
    totalFileBytes: String(bundle.totalFileBytes),
  };
}

/** One JSON API call; `body` undefined sends none. */
export async function rest(service: TestService, method: string, route: string, body?: unknown, key = KEY_A): Promise<Reply> {
  const response = await fetch(service.url + route, {
    method,
    headers: { ...bearer(key), ...(body === undefined ? {} : { "content-type": "application/json" }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  return { status: response.status, body: text === "" ? undefined : JSON.parse(text), text };
}

export const putSkill = (service: TestService, name: string, contentHash: string, key = KEY_A) => rest(service, "PUT", `/skills/${name}`, { contentHash }, key);
export const getSkill = (service: TestService, name: string, key = KEY_A) => rest(service, "GET", `/skills/${name}`, undefined, key);
export const deleteSkill = (service: TestService, name: string, key = KEY_A) => rest(service, "DELETE", `/skills/${name}`, undefined, key);

export function listSkills(service: TestService, query: { pageSize?: number; pageToken?: string } = {}, key = KEY_A): Promise<Reply> {
  const params = new URLSearchParams();
  if (query.pageSize !== undefined) params.set("pageSize", String(query.pageSize));
  if (query.pageToken !== undefined) params.set("pageToken", query.pageToken);
  const search = params.size > 0 ? `?${params}` : "";
  return rest(service, "GET", `/skills${search}`, undefined, key);
}

/** Every skill of the workspace, following page tokens. */
export async function allSkillNames(service: TestService, key = KEY_A): Promise<string[]> {
  const names: string[] = [];
  let pageToken: string | undefined;
  do {
    const page = await listSkills(service, { pageSize: 100, ...(pageToken ? { pageToken } : {}) }, key);
    if (page.status !== 200) throw new Error(`list failed: ${page.text}`);
    names.push(...(page.body.skills ?? []).map((skill: SkillJson) => skill.name));
    pageToken = page.body.nextPageToken || undefined;
  } while (pageToken);
  return names;
}

/** presign -> signed PUT -> finalize over plain HTTP, as any non-SDK caller would; returns the hash. */
export async function uploadAsset(service: TestService, bytes: Uint8Array, key = KEY_A): Promise<string> {
  const hash = sha256(bytes);
  const presigned = await postJson(service.url, "/assets/presign", { sha256: hash, sizeBytes: bytes.byteLength }, key);
  if (presigned.status !== 200) throw new Error(`presign failed: ${JSON.stringify(presigned.body)}`);
  if (presigned.body.exists) return hash;
  await putObject(presigned.body.uploadUrl, presigned.body.uploadHeaders, bytes);
  const finalized = await postJson(service.url, "/assets/finalize", { sha256: hash }, key);
  if (finalized.status !== 200) throw new Error(`finalize failed: ${JSON.stringify(finalized.body)}`);
  return hash;
}

/** The signed PUT to the object store. */
export async function putObject(url: string, headers: Record<string, string>, bytes: Uint8Array): Promise<void> {
  const response = await fetch(url, { method: "PUT", headers, body: bytes as Uint8Array<ArrayBuffer> });
  if (response.status !== 200) throw new Error(`signed PUT failed: ${await response.text()}`);
}

/** Uploads the bundle and binds it to `name`; throws unless the bind succeeds. */
export async function publish(service: TestService, name: string, bundle: Bundle, key = KEY_A): Promise<SkillJson> {
  await uploadAsset(service, bundle.zip, key);
  const reply = await putSkill(service, name, bundle.hash, key);
  if (reply.status !== 200) throw new Error(`PUT /skills/${name} failed: ${reply.text}`);
  return reply.body.skill;
}

/** The refusal shape of the JSON API: HTTP status and the stable code. */
export function refusal(status: number, code: string) {
  return { status, body: { code, status: expectedConnectStatus(status) } };
}

function expectedConnectStatus(httpStatus: number): string {
  switch (httpStatus) {
    case 400:
      return "invalid_argument";
    case 404:
      return "not_found";
    default:
      throw new Error(`no Connect status mapped for HTTP ${httpStatus} in this helper`);
  }
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
