// Prefill attention and chunked Gated DeltaNet kernel benchmark on the qwen3.5-0.8b shapes
// (attention: 8 query heads, 2 KV heads, head_dim 256, page size 16; GDN: 16 key / 16 value
// heads of 128). One sequence, T new tokens after `start` cached ones. Prints one JSON
// object: per case the median and min of the timed calls (ms) and GFLOP/s (attention:
// 4·hd FLOPs per (query, head, key) pair, the causal count; GDN: none, time only).
// Usage: node scripts/bench-attention.mjs [--threads T] [--t 512,4096] [--start 0]
//        [--reps 3] [--ops attention,gdn] [--variant fma|plain]
// Run `npm run build` first (it imports dist/).
import { parseArgs } from 'node:util';
import { createWasmKernels } from '../dist/src/kernels/wasm/index.js';

const { values: v } = parseArgs({
  options: {
    threads: { type: 'string', default: '2' },
    t: { type: 'string', default: '512,4096' },
    start: { type: 'string', default: '0' },
    reps: { type: 'string', default: '3' },
    ops: { type: 'string', default: 'attention,gdn' },
    variant: { type: 'string' },
  },
});
const list = (s) => s.split(',').map((x) => x.trim()).filter(Boolean);
const k = await createWasmKernels({ threads: Number(v.threads), calibrate: false, ...(v.variant ? { variant: v.variant } : {}) });
const reps = Number(v.reps);
const start = Number(v.start);

let seed = 12345;
const rnd = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32) * 2 - 1;
function fill(n, scale = 1) {
  const a = k.alloc(n);
  for (let i = 0; i < n; i++) a[i] = rnd() * scale;
  return a;
}

function timed(run) {
  run(); // warm-up
  const ms = [];
  for (let r = 0; r < reps; r++) {
    const t0 = performance.now();
    run();
    ms.push(performance.now() - t0);
  }
  ms.sort((a, b) => a - b);
  return { median: ms[(ms.length - 1) >> 1], min: ms[0] };
}

const round = (x) => Math.round(x * 1000) / 1000;
const results = [];
for (const t of list(v.t).map(Number)) {
  if (list(v.ops).includes('attention')) {
    const nH = 8, nKV = 2, hd = 256, ps = 16;
    const n = start + t;
    const pages = Math.ceil(n / ps);
    const kvDim = nKV * hd;
    const kv = { k: fill(pages * ps * kvDim), v: fill(pages * ps * kvDim), pageSize: ps };
    const pageTable = Int32Array.from({ length: pages }, (_, i) => i);
    const q = fill(t * nH * hd, 2);
    const out = k.alloc(t * nH * hd);
    const dims = { numHeads: nH, numKvHeads: nKV, headDim: hd };
    const ms = timed(() => k.attention(out, q, nH * hd, kv, pageTable, start, t, dims));
    // Σ_i (start + i + 1) keys per query and head, 2·hd FLOPs each for QK and for PV
    const pairs = nH * (t * start + (t * (t + 1)) / 2);
    results.push({ op: 'attention', start, t, ms: round(ms.median), min_ms: round(ms.min), gflops: round((pairs * 4 * hd) / (ms.median * 1e6)) });
  }
  if (list(v.ops).includes('gdn')) {
    const hk = 16, hv = 16, dk = 128, dv = 128;
    const qkv = fill(t * (2 * hk * dk + hv * dv), 0.1);
    const g = fill(t * hv, 0.5).map((x) => -Math.abs(x));
    const beta = fill(t * hv, 0.5).map((x) => Math.abs(x));
    const gk = k.alloc(g.length); gk.set(g);
    const bk = k.alloc(beta.length); bk.set(beta);
    const state = k.alloc(hv * dk * dv);
    const out = k.alloc(t * hv * dv);
    const dims = { numKeyHeads: hk, numValueHeads: hv, keyDim: dk, valueDim: dv };
    const ms = timed(() => { state.fill(0); k.gdnChunked(out, qkv, gk, bk, state, dims, t, start); });
    results.push({ op: 'gdnChunked', start, t, ms: round(ms.median), min_ms: round(ms.min) });
  }
}
process.stdout.write(JSON.stringify({ threads: k.threads, variant: k.variant, results }) + '\n');
k.dispose();
