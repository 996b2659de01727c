/**
 * The exports the memory cap adds (memory.ts): each memory or table whose maximum the cap set is
 * exported as `skillenv:capped/<memory|table><index>/<maximum>`, the maximum in pages or entries.
 * The host collects them to tell a guest that reached its cap (pool/guest.ts): JavaScript cannot
 * read a memory's or table's maximum (type reflection is behind a V8 flag), so the name carries
 * it. jco's glue looks exports up by name and never sees these. Its own module, so that pool
 * workers, which only need the names, do not load the rewriter.
 */
export const CAPPED_EXPORT_PREFIX = "skillenv:capped/";

export function cappedExportName(kind: "memory" | "table", index: number, maximum: number): string {
  return `${CAPPED_EXPORT_PREFIX}${kind}${index}/${maximum}`;
}

/** The maximum a capped export's name carries; undefined for any other export. */
export function cappedMaximum(name: string): number | undefined {
  if (!name.startsWith(CAPPED_EXPORT_PREFIX)) return undefined;
  const maximum = Number(name.slice(name.lastIndexOf("/") + 1));
  return Number.isSafeInteger(maximum) ? maximum : undefined;
}
