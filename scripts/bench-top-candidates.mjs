// The device candidate kernels' cost per row on the webgpu backend (on this machine: lavapipe,
// whose shader invocations run on the CPU threads of this process): Kernels.topCandidates over
// rows of a vocabulary (Qwen3.5's 248,320 by default) at each candidate count c, and Kernels.
// candidateDraws over those candidates (c ≤ MAX_DRAW_CANDIDATES). Each measurement is one
// submitted step holding `reps` calls, less a step holding none; it prints one JSON object with,
// per c, wall ms and process CPU ms (every lavapipe thread included) per row.
// Usage: node scripts/bench-top-candidates.mjs [--vocab N] [--rows M] [--cs 64,512,1024,2048]
//        [--reps R] [--trials T]   (needs dist/: npx tsc)
import { parseArgs } from 'node:util';
import { nodeGpu } from '../dist/src/kernels/webgpu-node.js';
import { WebGpuKernels } from '../dist/src/kernels/webgpu/backend.js';
import { topCandidatesOn, topSegments } from '../dist/src/kernels/webgpu/top-candidates.js';
import { candidateDrawsOn, packDrawTable } from '../dist/src/kernels/webgpu/candidate-draws.js';
import { MAX_DRAW_CANDIDATES } from '../dist/src/kernels/candidate-draws.js';

const { values: v } = parseArgs({
  options: {
    vocab: { type: 'string', default: '248320' },
    rows: { type: 'string', default: '1' },
    cs: { type: 'string', default: '64,512,1024,2048' },
    reps: { type: 'string', default: '4' },
    trials: { type: 'string', default: '3' },
  },
});
const [n, m, reps, trials] = [Number(v.vocab), Number(v.rows), Number(v.reps), Number(v.trials)];
const g = await WebGpuKernels.create(await nodeGpu(), { allowCpuEmulation: true });

// logits-like rows: a few peaks over a gaussian-ish body (seeded LCG)
let seed = 12345;
const next = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32);
const x = Float32Array.from({ length: m * n }, (_, i) => 3 * (next() + next() + next() - 1.5) + (i % 9973 === 0 ? 12 : 0));
const gx = g.alloc.upload(x);

/** Median wall and CPU ms of a step recording `body` reps times (less an empty step). */
async function timed(body) {
  const step = async (k) => {
    const enc = g.encoder();
    for (let r = 0; r < k; r++) body(enc);
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    await enc.submit();
    const c = process.cpuUsage(c0);
    return { wall: performance.now() - t0, cpu: (c.user + c.system) / 1000 };
  };
  await step(1); // pipelines compiled, buffers made
  const med = (a) => a.sort((p, q) => p - q)[a.length >> 1];
  const full = [];
  const empty = [];
  for (let t = 0; t < trials; t++) { full.push(await step(reps)); empty.push(await step(0)); }
  const per = (key) => Math.max(0, med(full.map((s) => s[key])) - med(empty.map((s) => s[key]))) / (reps * m);
  return { wallMsPerRow: +per('wall').toFixed(3), cpuMsPerRow: +per('cpu').toFixed(3) };
}

const out = { vocab: n, rows: m, reps, trials, node: process.version, device: 'lavapipe (webgpu, CPU)', topCandidates: {}, candidateDraws: {} };
for (const c of v.cs.split(',').map(Number)) {
  const ids = g.alloc.tensor([m * c], 'i32');
  const vals = g.alloc.tensor([m * c]);
  out.topCandidates[c] = { segments: topSegments(m, n, c), ...await timed((enc) => topCandidatesOn(g, enc, { ids, vals, outOffset: 0, x: gx, m, n, stride: n, c })) };
  if (c > MAX_DRAW_CANDIDATES) continue;
  const rows = Array.from({ length: m }, () => ({ invTemperature: 1, topK: c / 2, topP: 0.9, minP: 0, u: 0.37 }));
  const table = g.alloc.upload(new Float32Array(packDrawTable(rows).buffer));
  const picks = g.alloc.tensor([m], 'i32');
  out.candidateDraws[c] = await timed((enc) => candidateDrawsOn(g, enc, { out: picks, outOffset: 0, ids, vals, candOffset: 0, c, m }, table));
}
g.dispose();
console.log(JSON.stringify(out, null, 1));
