// Vision tower encode time on a make-model shape's tower (random weights of the published
// dimensions: qwen3.5-0.8b by default) for one square image: preprocessing, then the tower
// with its linear layers on the wasm backend (--linears wasm) or in plain TS (--linears ref).
// Prints one JSON object. Usage:
//   node scripts/bench-vision.mjs [--shape qwen3.5-0.8b] [--size 448] [--threads 2] [--linears wasm|ref]
// Run `npm run build` first (it imports dist/).
import { parseArgs } from 'node:util';
import { planModel } from '../dist/src/tools/make-model.js';
import { DEFAULT_PREPROCESS, VISION_PREFIX, parseVisionConfig } from '../dist/src/vision/config.js';
import { loadVisionWeights } from '../dist/src/vision/weights.js';
import { encodeImage } from '../dist/src/vision/tower.js';
import { kernelLinear } from '../dist/src/vision/kernel-linear.js';
import { preprocessImage } from '../dist/src/vision/preprocess.js';
import { createWasmKernels } from '../dist/src/kernels/wasm/index.js';
import { tensorBytes } from '../dist/src/tools/safetensors-writer.js';
import { bf16ToF32 } from '../dist/src/checkpoint/safetensors.js';

const { values: v } = parseArgs({
  options: {
    shape: { type: 'string', default: 'qwen3.5-0.8b' }, size: { type: 'string', default: '448' },
    threads: { type: 'string', default: '2' }, linears: { type: 'string', default: 'wasm' },
  },
});
const plan = planModel({ shape: v.shape, dtype: 'bf16', seed: 0, layout: 'release' });
const cfg = parseVisionConfig(plan.config);
const sources = new Map(plan.tensors.filter((t) => t.name.startsWith(VISION_PREFIX)).map((t) => [t.name, t]));
const weights = loadVisionWeights(cfg, (name) => {
  const t = sources.get(name);
  const bytes = new Uint8Array(tensorBytes(t));
  t.fill(bytes, 0);
  return Float32Array.from(new Uint16Array(bytes.buffer), bf16ToF32);
});
const size = Number(v.size);
const rgb = { width: size, height: size, data: Uint8Array.from({ length: size * size * 3 }, (_, i) => (i * 2654435761) >>> 24) };
let t0 = performance.now();
const pre = preprocessImage(rgb, cfg, DEFAULT_PREPROCESS);
const preprocessMs = performance.now() - t0;
const wasm = v.linears === 'wasm' ? await createWasmKernels({ threads: Number(v.threads) }) : null;
const op = wasm ? kernelLinear(wasm) : undefined;
if (op) encodeImage(cfg, weights, pre.patches.subarray(0, 16 * 1536), { t: 1, h: 4, w: 4 }, op); // pack the weights
t0 = performance.now();
const out = encodeImage(cfg, weights, pre.patches, pre.grid, op);
const encodeMs = performance.now() - t0;
wasm?.dispose();
console.log(JSON.stringify({
  shape: v.shape, tower: { depth: cfg.depth, hidden: cfg.hiddenSize, heads: cfg.numHeads, intermediate: cfg.intermediateSize },
  image: `${size}x${size}`, grid: pre.grid, image_tokens: out.tokens, linears: v.linears, threads: wasm ? Number(v.threads) : 1,
  preprocess_ms: Math.round(preprocessMs), encode_ms: Math.round(encodeMs), node: process.version,
}));
