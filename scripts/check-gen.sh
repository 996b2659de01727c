#!/usr/bin/env bash
# Fails when gen/ differs from what `npm run generate` produces from proto/ and third_party/.
set -euo pipefail
cd "$(dirname "$0")/.."
npm run --silent generate
if ! git diff --quiet -- gen || [ -n "$(git ls-files --others --exclude-standard -- gen)" ]; then
  echo "gen/ is stale: run 'npm run generate' and commit the result" >&2
  git status --short -- gen >&2
  exit 1
fi
echo "gen/ is current"
