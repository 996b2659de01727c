#!/usr/bin/env bash
# Fails when generated code differs from what `npm run generate` and `npm run generate:python`
# produce from the protos: the service's gen/ (gen/openapi.json included, npm run generate:openapi),
# the TypeScript client's clients/ts/gen, the tests' server/test/gen and the Python client's
# clients/python/src/skillenv/_gen.
set -euo pipefail
cd "$(dirname "$0")/.."
npm run --silent generate
npm run --silent generate:python
generated=(gen clients/ts/gen server/test/gen clients/python/src/skillenv/_gen)
if ! git diff --quiet -- "${generated[@]}" || [ -n "$(git ls-files --others --exclude-standard -- "${generated[@]}")" ]; then
  echo "generated code is stale: run 'npm run generate && npm run generate:python' and commit the result" >&2
  git status --short -- "${generated[@]}" >&2
  exit 1
fi
echo "generated code is current"
