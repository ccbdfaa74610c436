// Vision tower encode time on a make-model shape's tower (random weights of the published
// dimensions: qwen3.5-0.8b by default) for one square image: preprocessing, then the tower
// on the wasm backend (--tower kernels: vision/kernel-tower.ts, the default) or the plain-TS
// oracle (--tower plain).
// Prints one JSON object. Usage:
//   node scripts/bench-vision.mjs [--shape qwen3.5-0.8b] [--size 448] [--threads 2] [--tower kernels|plain] [--runs 3]
// encode_ms is the median of --runs encodes (after one small warm-up encode; the kernel tower
// packs its weights when made).
// Run `npm run build` first (it imports dist/).
import { parseArgs } from 'node:util';
import { planModel } from '../dist/src/tools/make-model.js';
import { DEFAULT_PREPROCESS, VISION_PREFIX, parseVisionConfig } from '../dist/src/vision/config.js';
import { loadVisionWeights } from '../dist/src/vision/weights.js';
import { encodeImage } from '../dist/src/vision/tower.js';
import { KernelTower } from '../dist/src/vision/kernel-tower.js';
import { preprocessImage } from '../dist/src/vision/preprocess.js';
import { createWasmKernels } from '../dist/src/kernels/wasm/index.js';
import { tensorBytes } from '../dist/src/tools/safetensors-writer.js';
import { bf16ToF32 } from '../dist/src/checkpoint/safetensors.js';

const { values: v } = parseArgs({
  options: {
    shape: { type: 'string', default: 'qwen3.5-0.8b' }, size: { type: 'string', default: '448' },
    threads: { type: 'string', default: '2' },
    tower: { type: 'string', default: 'kernels' }, runs: { type: 'string', default: '3' },
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
if (v.tower !== 'kernels' && v.tower !== 'plain') throw new Error(`--tower must be kernels or plain (got ${v.tower})`);
const wasm = v.tower === 'kernels' ? await createWasmKernels({ threads: Number(v.threads) }) : null;
const kt = wasm ? new KernelTower(wasm, cfg, weights) : null;
const encode = (patches, grid) => (kt ? kt.encode(patches, grid) : encodeImage(cfg, weights, patches, grid));
await encode(pre.patches.subarray(0, 16 * 1536), { t: 1, h: 4, w: 4 }); // warm up (the plain tower: JIT)
const times = [];
const cpu = []; // CPU time of the process, every thread (less sensitive to a loaded machine than wall time)
let out;
for (let r = 0; r < Number(v.runs); r++) {
  t0 = performance.now();
  const c0 = process.cpuUsage();
  out = await encode(pre.patches, pre.grid);
  times.push(performance.now() - t0);
  const c = process.cpuUsage(c0);
  cpu.push((c.user + c.system) / 1000);
}
const encodeMs = [...times].sort((a, b) => a - b)[Math.floor(times.length / 2)];
wasm?.dispose();
console.log(JSON.stringify({
  shape: v.shape, tower: { depth: cfg.depth, hidden: cfg.hiddenSize, heads: cfg.numHeads, intermediate: cfg.intermediateSize },
  image: `${size}x${size}`, grid: pre.grid, image_tokens: out.tokens, path: v.tower, threads: wasm ? Number(v.threads) : 1,
  preprocess_ms: Math.round(preprocessMs), encode_ms: Math.round(encodeMs), encode_runs_ms: times.map(Math.round),
  encode_cpu_ms: cpu.map(Math.round), loadavg: (await import('node:os')).loadavg()[0], node: process.version,
}));
