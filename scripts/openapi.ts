// Writes gen/openapi.json, the OpenAPI document of the JSON HTTP API (server/src/openapi), from the
// services' generated descriptors and google.api.http rules. protobuf-es leaves the comments out of
// the descriptors it embeds in gen/, so they come from `buf build`, which keeps source info.
import { fromBinary } from "@bufbuild/protobuf";
import { FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt";
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { API_SERVICES } from "../server/src/app.ts";
import { buildOpenApi, OPENAPI_FILE, readComments } from "../server/src/openapi/index.ts";

const built = execFileSync("buf", ["build", "proto", "--as-file-descriptor-set", "-o", "-"], { maxBuffer: 64 * 1024 * 1024 });
const { name, version } = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as { name: string; version: string };
const comments = readComments(fromBinary(FileDescriptorSetSchema, built));
const document = buildOpenApi({ services: API_SERVICES, comments, title: name, version });
writeFileSync(OPENAPI_FILE, `${JSON.stringify(document, null, 2)}\n`);
