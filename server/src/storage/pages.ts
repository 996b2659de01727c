import { serviceError } from "../errors/index.ts";
import { prefixEnd, type Table } from "./store.ts";

/** Every List method's page size: this many items unless the caller asks for another number, ... */
export const DEFAULT_PAGE_SIZE = 50;
/** ... and at most this many. */
export const MAX_PAGE_SIZE = 1000;

/** What a List request asks for: the proto fields page_size and page_token. */
export interface PageRequest {
  pageSize: number;
  pageToken: string;
}

export interface Page<V> {
  items: V[];
  /** Empty on the last page. */
  nextPageToken: string;
}

/** Which table range a listing walks, and how. */
export interface Listing {
  /**
   * Every key of the listing starts with this; the rest of a key is the item's cursor (an id or
   * a name), which a page token carries to the next page.
   */
  prefix: string;
  /** Largest key first (ids sort by time: newest first). */
  reverse?: boolean;
  /** Whether a cursor read from a token is one this listing issues. */
  isCursor(cursor: string): boolean;
  /**
   * The page's byte budget (SERVICE_LIST_MAX_BYTES): a page ends early, with a token, before the
   * item that would pass it, measured as the items' stored JSON text. A page holds at least one
   * item, so a listing always advances.
   */
  maxBytes: number;
}

/**
 * One page of a List method (ListSkills, ListSessions, ListRuns), the only place their page
 * sizes, page tokens and page ends are decided: at most pageSize items (0: DEFAULT_PAGE_SIZE;
 * more than MAX_PAGE_SIZE is invalid_argument) in key order after the token's cursor, within
 * the listing's byte budget. A token is the base64url of the last item's cursor, so a page goes
 * on correctly when that item was deleted in between; one this server did not issue is
 * invalid_argument.
 */
export async function readPage<V>(table: Table<V>, request: PageRequest, listing: Listing): Promise<Page<V>> {
  const { prefix, reverse = false } = listing;
  if (!Number.isInteger(request.pageSize) || request.pageSize < 0 || request.pageSize > MAX_PAGE_SIZE) {
    throw serviceError("invalid_argument", `pageSize must be between 0 and ${MAX_PAGE_SIZE}`);
  }
  const cursor = request.pageToken === "" ? undefined : decodePageToken(request.pageToken, listing);
  const after = cursor === undefined ? undefined : `${prefix}${cursor}`;
  const range = reverse ? { gt: prefix, lt: after ?? prefixEnd(prefix), reverse } : { gt: after ?? prefix, lt: prefixEnd(prefix) };
  const { entries, more } = await table.page({ ...range, limit: request.pageSize || DEFAULT_PAGE_SIZE }, listing.maxBytes);
  const last = entries.at(-1);
  return { items: entries.map(([, value]) => value), nextPageToken: more && last ? encodePageToken(last[0].slice(prefix.length)) : "" };
}

function encodePageToken(cursor: string): string {
  return Buffer.from(cursor, "utf8").toString("base64url");
}

function decodePageToken(token: string, listing: Listing): string {
  const cursor = Buffer.from(token, "base64url").toString("utf8");
  if (!listing.isCursor(cursor)) throw serviceError("invalid_argument", "pageToken is not a token this server issued");
  return cursor;
}
