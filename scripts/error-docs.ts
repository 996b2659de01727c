// Writes docs/errors.md from the error catalogue (server/src/errors), the one source of truth.
import { writeFileSync } from "node:fs";
import { renderErrorDocs } from "../server/src/errors/docs.ts";

writeFileSync(new URL("../docs/errors.md", import.meta.url), renderErrorDocs());
