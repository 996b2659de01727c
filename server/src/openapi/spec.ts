import type { JsonSchema } from "./schemas.ts";

/** The parts of an OpenAPI 3.1 document (spec.openapis.org/oas/v3.1.0) that the generator writes. */
export interface OpenApiDocument {
  openapi: "3.1.0";
  info: { title: string; version: string; description: string };
  servers: { url: string; description: string }[];
  tags: Tag[];
  paths: Record<string, PathItem>;
  components: {
    schemas: Record<string, JsonSchema>;
    responses: Record<string, Response>;
    securitySchemes: Record<string, SecurityScheme>;
  };
  security: SecurityRequirement[];
}

export interface Tag {
  name: string;
  description?: string;
}

/** The HTTP methods of google.api.http's standard patterns; OpenAPI has no place for its custom ones. */
export type HttpVerb = "get" | "put" | "post" | "delete" | "patch";

export type PathItem = Partial<Record<HttpVerb, Operation>>;

export interface Operation {
  operationId: string;
  summary: string;
  description?: string;
  tags: string[];
  parameters: Parameter[];
  requestBody?: RequestBody;
  responses: Record<string, Response | Reference>;
}

export interface Parameter {
  name: string;
  in: "path" | "query";
  required: boolean;
  description?: string;
  schema: JsonSchema;
}

export interface RequestBody {
  description?: string;
  required: boolean;
  content: Record<string, MediaType>;
}

export interface MediaType {
  schema?: JsonSchema;
}

export interface Response {
  description: string;
  content?: Record<string, MediaType>;
}

export interface Reference {
  $ref: string;
}

export interface SecurityScheme {
  type: "http";
  scheme: "bearer";
  description: string;
}

export type SecurityRequirement = Record<string, string[]>;
