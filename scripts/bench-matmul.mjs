// Matmul kernel benchmark: one wasm matmul, weights of a given storage type,
// M activation rows, on the qwen3.5-0.8b MLP shapes by default. Weights are L3-resident
// after the first call, so this measures compute throughput (GMAC/s), not memory. Prints
// one JSON object: per (type, N, K, M) the fastest of 7 timed batches (ms) and GMAC/s, and
// per type the M=4 / M=1 time ratio (the compute cost of a 4-token verify step).
// Usage: node scripts/bench-matmul.mjs [--threads T] [--types bf16,f16,q8_0,q4_k,q4_0,…]
//        [--m 1,4,8,64] [--shapes 3584x1024,1024x3584] [--variant fma|plain]
// Types without a quantizer (q6_k, …) use random valid blocks. Run `npm run build` first
// (it imports dist/, test helpers included).
import { parseArgs } from 'node:util';
import { createWasmKernels } from '../dist/src/kernels/wasm/index.js';
import { quantizeRowsGgml as quantizeRows } from '../dist/src/kernels/quant/quantize-ggml.js';
import { f32ToF16 } from '../dist/src/kernels/quant/dequant.js';
import { randomScaleMatrix } from '../dist/test/quant-blocks.js';

const { values: v } = parseArgs({
  options: {
    threads: { type: 'string', default: '1' },
    types: { type: 'string', default: 'bf16,q8_0,q4_k' },
    m: { type: 'string', default: '1,4,8,64' },
    shapes: { type: 'string', default: '3584x1024,1024x3584' },
    variant: { type: 'string' },
    q8x4: { type: 'string' },
  },
});
const list = (s) => s.split(',').map((x) => x.trim()).filter(Boolean);
const k = await createWasmKernels({ threads: Number(v.threads), ...(v.variant ? { variant: v.variant } : {}) });
if (v.q8x4) k.setQuantKernels({ ...k.quantKernelChoice, q8x4M1: v.q8x4, q8x4Mn: v.q8x4 });

/** Types quantizeRows handles; the others get valid random blocks (test/quant-blocks.ts). */
const QUANTIZED = new Set(['q8_0', 'q4_k']);

/** A [n, kk] weight of `type` with smooth pseudo-random values (packed for this backend). */
function weight(type, n, kk) {
  const src = new Float32Array(n * kk);
  for (let i = 0; i < src.length; i++) src[i] = Math.sin(i * 1.3) * 0.05 * (1 + (i % 13) / 13);
  const { weight: w, bytes } = k.allocWeight(type, n, kk);
  if (type === 'bf16') {
    const u = new Uint16Array(bytes.buffer, bytes.byteOffset, n * kk);
    const bits = new Uint32Array(src.buffer);
    for (let i = 0; i < u.length; i++) u[i] = bits[i] >>> 16;
  } else if (type === 'f16') {
    const u = new Uint16Array(bytes.buffer, bytes.byteOffset, n * kk);
    for (let i = 0; i < u.length; i++) u[i] = f32ToF16(src[i]);
  } else if (QUANTIZED.has(type)) quantizeRows(type, src, n, kk, bytes);
  else bytes.set(randomScaleMatrix(type, n, kk, 1));
  return k.packWeight(w);
}

function fastestMs(run, reps) {
  let best = Infinity;
  for (let r = 0; r < 7; r++) {
    const t0 = performance.now();
    for (let i = 0; i < reps; i++) run();
    best = Math.min(best, (performance.now() - t0) / reps);
  }
  return best;
}

const results = [];
const verifyRatio = {};
for (const type of list(v.types)) {
  for (const shape of list(v.shapes)) {
    const [n, kk] = shape.split('x').map(Number);
    const w = weight(type, n, kk);
    const ms1 = {};
    for (const m of list(v.m).map(Number)) {
      const x = k.alloc(m * kk);
      for (let i = 0; i < x.length; i++) x[i] = Math.sin(i * 0.37) * (i % 7 ? 1 : 3);
      const out = k.alloc(m * n);
      const ms = fastestMs(() => k.matmul(out, x, w, m), Math.max(3, Math.round(200 / m)));
      ms1[m] = ms;
      results.push({ type, layout: w.layout ?? 'row-major', n, k: kk, m, ms: +ms.toFixed(4), gmac_s: +((m * n * kk) / ms / 1e6).toFixed(2) });
    }
    if (ms1[1] && ms1[4]) (verifyRatio[type] ??= {})[shape] = +(ms1[4] / ms1[1]).toFixed(2);
  }
}
k.dispose();
process.stdout.write(JSON.stringify({ threads: Number(v.threads), variant: v.variant ?? 'default', results, m4_over_m1: verifyRatio }) + '\n');
