#!/usr/bin/env bash
# Fails when generated code differs from what `npm run generate` produces from the protos: the
# service's gen/, the TypeScript client's clients/ts/gen and the tests' server/test/gen.
set -euo pipefail
cd "$(dirname "$0")/.."
npm run --silent generate
generated=(gen clients/ts/gen server/test/gen)
if ! git diff --quiet -- "${generated[@]}" || [ -n "$(git ls-files --others --exclude-standard -- "${generated[@]}")" ]; then
  echo "generated code is stale: run 'npm run generate' and commit the result" >&2
  git status --short -- "${generated[@]}" >&2
  exit 1
fi
echo "generated code is current"
