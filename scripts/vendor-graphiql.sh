#!/usr/bin/env bash
# Re-creates web/vendor/graphiql from pinned npm packages (the files the
# server embeds for an offline GraphiQL), and their checksums.
#
#   scripts/vendor-graphiql.sh          # fetch and write the files
#   scripts/vendor-graphiql.sh --check  # fetch and compare with what is committed
#
# To update: change the versions below, run it, commit web/vendor/graphiql.
set -euo pipefail
cd "$(dirname "$0")/.."

GRAPHIQL=3.8.3   # the last GraphiQL with a UMD bundle (4 and later are ES modules only)
REACT=18.3.1     # the last React with UMD builds

out=web/vendor/graphiql
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "graphiql@$GRAPHIQL" "react@$REACT" "react-dom@$REACT" >/dev/null)
mkdir -p "$work/files"
tar xzf "$work/graphiql-$GRAPHIQL.tgz" -C "$work" package/graphiql.min.js package/graphiql.min.css
cp "$work/package/graphiql.min.js" "$work/package/graphiql.min.css" "$work/files/"
tar xzf "$work/react-$REACT.tgz" -C "$work" package/umd/react.production.min.js
cp "$work/package/umd/react.production.min.js" "$work/files/"
tar xzf "$work/react-dom-$REACT.tgz" -C "$work" package/umd/react-dom.production.min.js
cp "$work/package/umd/react-dom.production.min.js" "$work/files/"
(cd "$work/files" && sha256sum graphiql.min.css graphiql.min.js react-dom.production.min.js react.production.min.js > SHA256SUMS)
printf 'graphiql %s\nreact %s\nreact-dom %s\n' "$GRAPHIQL" "$REACT" "$REACT" > "$work/files/VERSIONS"

if [ "${1:-}" = "--check" ]; then
  for f in graphiql.min.css graphiql.min.js react-dom.production.min.js react.production.min.js SHA256SUMS VERSIONS; do
    cmp -s "$work/files/$f" "$out/$f" || { echo "vendor-graphiql: $out/$f differs from the npm packages" >&2; exit 1; }
  done
  echo "vendor-graphiql: web/vendor/graphiql matches graphiql@$GRAPHIQL, react@$REACT, react-dom@$REACT"
else
  mkdir -p "$out"
  cp "$work/files/"* "$out/"
  echo "vendor-graphiql: wrote $out"
fi
