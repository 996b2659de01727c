import { readFile } from "node:fs/promises";

export { readComments, type Comments } from "./comments.ts";
export { buildOpenApi, type OpenApiOptions } from "./document.ts";
export type { OpenApiDocument } from "./spec.ts";

/** The committed OpenAPI document: written by `npm run generate:openapi` (scripts/openapi.ts), checked current in CI. */
export const OPENAPI_FILE = new URL("../../../gen/openapi.json", import.meta.url);

/** Where the service serves it, without a key: it is the API's public shape. */
export const OPENAPI_PATH = "/openapi.json";

export function readOpenApiFile(): Promise<Uint8Array> {
  return readFile(OPENAPI_FILE);
}
