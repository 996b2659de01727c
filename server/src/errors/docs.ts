import { codeToString } from "@connectrpc/connect/protocol-connect";
import { errorCatalogue } from "./catalogue.ts";

/** docs/errors.md, rendered from the catalogue; a test keeps the committed file equal to this. */
export function renderErrorDocs(): string {
  const rows = Object.entries(errorCatalogue).map(
    ([code, spec]) => `| \`${code}\` | ${codeToString(spec.code)} | ${spec.httpStatus} | ${spec.summary.replaceAll("|", "\\|")} |`,
  );
  return `# Error codes

<!-- Generated from server/src/errors/catalogue.ts by \`npm run docs:errors\`; do not edit by hand. -->

Every refusal carries one stable, machine-readable code. The code never changes meaning once
published; new conditions get new codes.

- **gRPC, gRPC-Web, Connect**: the status code is the gRPC/Connect code below; the stable code is
  \`google.rpc.ErrorInfo.reason\` (domain \`skillenv\`) in the status details
  (\`grpc-status-details-bin\` for gRPC and gRPC-Web, \`details\` for Connect).
- **JSON HTTP API** and the object store's signed PUT: the HTTP status below and the body
  \`{"code": "<stable code>", "message": "<human readable>", "status": "<connect code>"}\`.

| code | gRPC/Connect | HTTP | meaning |
| --- | --- | --- | --- |
${rows.join("\n")}
`;
}
