#!/usr/bin/env bash
# The public GraphQL schema against the last release's: prints every change
# (breaking ✖, dangerous ⚠, safe ✔) between docs/schema-baseline.graphql and
# the schema the server prints, with @graphql-inspector/cli (pinned in
# tests/edge), and fails on a breaking change that
# docs/schema-breaking-allowed.txt does not list with a reason. Deprecating a
# field or argument is not breaking; removing it is. Run by
# scripts/edge-tests.sh; alone it needs node and npm (and builds the binary
# when there is none).
#
#   scripts/schema-diff.sh                  # the schema of target/debug/kartei (or KARTEI_BIN)
#   scripts/schema-diff.sh printed.graphql  # a schema printed before (edge-tests: the server's)
set -euo pipefail
cd "$(dirname "$0")/.."

if [ $# -ge 1 ]; then
  printed=$1
else
  bin=${KARTEI_BIN:-target/debug/kartei}
  [ -x "$bin" ] || cargo build --locked --bin kartei
  [ -x tests/edge/node_modules/.bin/graphql-inspector ] || (cd tests/edge && npm ci --no-audit --no-fund --silent)
  printed=$(mktemp --suffix .graphql)
  trap 'rm -f "$printed"' EXIT
  "$bin" schema >"$printed"
fi
# simplifyChanges first (the CLI runs it last by default), so that the list
# names the changes as the report shows them.
tests/edge/node_modules/.bin/graphql-inspector diff docs/schema-baseline.graphql "$printed" \
  --rule simplifyChanges --rule tests/edge/schema-allowed.mjs
