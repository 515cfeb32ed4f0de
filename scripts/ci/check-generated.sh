#!/usr/bin/env bash
# gen/ is committed: regenerate into a scratch folder and fail when it differs.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
PATH="$PWD/node_modules/.bin:$PATH" npx buf generate -o "$scratch"
if ! diff -r --exclude=package.json gen "$scratch/gen"; then
  echo "gen/ is stale: run 'npm run generate' and commit gen/" >&2
  exit 1
fi
echo "gen/ is up to date"
