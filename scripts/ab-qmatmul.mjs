// A/B of the q8x4 / q4kx4 / q6kx4 kernel families (--type q8_0 | q4_k | q6_k) in one process, alternating, so a loaded machine slows
// both alike: per (shape, M, family) the median and min ms of `--rounds` rounds.
// Usage: node scripts/ab-qmatmul.mjs [--threads T] [--m 1,4] [--shapes 3584x1024] [--rounds 15]
import { parseArgs } from 'node:util';
import { createWasmKernels } from '../dist/src/kernels/wasm/index.js';
import { quantizeRowsGgml as quantizeRows } from '../dist/src/kernels/quant/quantize-ggml.js';
import { randomScaleMatrix } from '../dist/test/quant-blocks.js';

const { values: v } = parseArgs({
  options: {
    threads: { type: 'string', default: '1' }, m: { type: 'string', default: '1,2,4,8' },
    shapes: { type: 'string', default: '3584x1024,1024x3584' }, rounds: { type: 'string', default: '15' },
    families: { type: 'string', default: 'narrow,wide' }, type: { type: 'string', default: 'q8_0' },
  },
});
const list = (s) => s.split(',').map((x) => x.trim()).filter(Boolean);
const k = await createWasmKernels({ threads: Number(v.threads) });
const families = list(v.families);
const base = k.quantKernelChoice;
const median = (a) => [...a].sort((x, y) => x - y)[a.length >> 1];
const out = [];
for (const shape of list(v.shapes)) {
  const [n, kk] = shape.split('x').map(Number);
  const src = new Float32Array(n * kk);
  for (let i = 0; i < src.length; i++) src[i] = Math.sin(i * 1.3) * 0.05 * (1 + (i % 13) / 13);
  const { weight, bytes } = k.allocWeight(v.type, n, kk);
  if (v.type === 'q6_k') bytes.set(randomScaleMatrix('q6_k', n, kk, 1)); // no q6_k quantizer here
  else quantizeRows(v.type, src, n, kk, bytes);
  const w = k.packWeight(weight);
  for (const m of list(v.m).map(Number)) {
    const x = k.alloc(m * kk);
    for (let i = 0; i < x.length; i++) x[i] = Math.sin(i * 0.37) * (i % 7 ? 1 : 3);
    const y = k.alloc(m * n);
    const reps = Math.max(2, Math.round(60 / m));
    const times = Object.fromEntries(families.map((f) => [f, []]));
    for (let r = 0; r < Number(v.rounds); r++) {
      for (const f of families) {
        k.setQuantKernels(v.type === 'q4_k' ? { ...base, q4kx4M1: f } : v.type === 'q6_k' ? { ...base, q6kx4M1: f } : { ...base, q8x4M1: f, q8x4Mn: f });
        const t0 = performance.now();
        for (let i = 0; i < reps; i++) k.matmul(y, x, w, m);
        times[f].push((performance.now() - t0) / reps);
      }
    }
    const row = { shape, m };
    for (const f of families) row[f] = { median_ms: +median(times[f]).toFixed(4), min_ms: +Math.min(...times[f]).toFixed(4) };
    row[`${families[1]}/${families[0]}_min`] = +(Math.min(...times[families[1]]) / Math.min(...times[families[0]])).toFixed(3);
    row[`${families[1]}/${families[0]}_median`] = +(median(times[families[1]]) / median(times[families[0]])).toFixed(3);
    out.push(row);
  }
}
k.dispose();
for (const r of out) console.log(JSON.stringify(r));
