#!/usr/bin/env bash
# Installs the TypeScript client the way a registry user gets it: packs the built package
# (clients/ts: npm run tarball), installs the tarball into a new project outside the repository with
# the system's Node and npm (Node 20 in CI, the oldest the client supports), and fails on any
# engine warning, on an entry that does not import, on types that do not resolve, or on a CLI
# that does not run.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
consumer=$(mktemp -d)
trap 'rm -rf "$consumer"' EXIT

npm run --silent tarball -w @skillenv/client -- --pack-destination "$consumer" >/dev/null
# npm scripts put the project's Node 24 first on PATH; the consumer runs on the system's.
PATH=$(tr : '\n' <<<"$PATH" | grep -v '/node_modules/\.bin$' | paste -sd:)
cd "$consumer"
echo '{ "name": "consumer", "private": true, "type": "module" }' >package.json
npm install --prefer-offline --no-audit --no-fund ./skillenv-client-*.tgz >install.log 2>&1 || { cat install.log >&2; exit 1; }
if grep -q EBADENGINE install.log; then
  echo "installing @skillenv/client on Node $(node --version) warns of an unsupported engine:" >&2
  grep EBADENGINE install.log >&2
  exit 1
fi

node --input-type=module -e '
  for (const entry of ["@skillenv/client", "@skillenv/client/node", "@skillenv/client/web", "@skillenv/client/bundle", "@skillenv/client/mcp"]) await import(entry);
'

# The MCP SDK is an optional peer: without it, a host serving a stdio MCP server says what to install.
node --input-type=module -e '
  const { hostEnv } = await import("@skillenv/client/node");
  const refused = await hostEnv({ name: "local", mcp: { command: "true" } }).server.start("local").then(() => "started", (error) => error.message);
  if (!refused.includes("npm install @modelcontextprotocol/sdk")) { console.error(`without the MCP SDK, starting a stdio MCP server answered: ${refused}`); process.exit(1); }
'

# Types, with the repository's TypeScript: an unresolved declaration would make the client any,
# and then the expected error below would not happen.
cat >types.ts <<'EOF'
import { createNodeTransport, createServiceClient } from "@skillenv/client/node";
import { canonicalZip } from "@skillenv/client/bundle";
const client = createServiceClient(createNodeTransport({ baseUrl: "http://127.0.0.1:8080", apiKey: "key" }));
// @ts-expect-error: the skills client is not a string
const notAString: string = client.skills;
export { canonicalZip, notAString };
EOF
"$repo/node_modules/.bin/tsc" --noEmit --strict --module nodenext --target es2022 --lib es2023,dom \
  --types node --typeRoots "$repo/node_modules/@types" types.ts

# With nothing listening, the CLI gets as far as the transport and reports the service unreachable.
cli=$(SERVICE_URL=http://127.0.0.1:9 SERVICE_API_KEY=key node_modules/.bin/skillenv list 2>&1) && status=0 || status=$?
if [[ $status -ne 1 || $cli != "error unavailable: "* ]]; then
  echo "the installed skillenv CLI answered (exit $status): $cli" >&2
  exit 1
fi

echo "@skillenv/client installs, imports and runs on Node $(node --version)"
