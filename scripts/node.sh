#!/usr/bin/env sh
# Runs the Node.js of this checkout with the given arguments:
#   1. $DELTASERVE_NODE, when set (e.g. DELTASERVE_NODE=node ./deltaserve ... for the system Node);
#   2. Node 24 from tools/node24 (installed by `npm ci`, scripts/install-node24.mjs);
#   3. else the `node` on PATH (where it is already >= 24, or no Node 24 package fits the platform).
here="$(cd "$(dirname "$0")/.." && pwd)"
if [ -n "${DELTASERVE_NODE:-}" ]; then exec "$DELTASERVE_NODE" "$@"; fi
for bin in "$here"/tools/node24/node_modules/node-*/bin/node; do
  if [ -x "$bin" ]; then exec "$bin" "$@"; fi
done
exec node "$@"
