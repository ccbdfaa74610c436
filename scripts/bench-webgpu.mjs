// GPU kernel benchmark (webgpu backend): a synthetic decode / verify step of a model shape
// (random weights of one storage type) for M rows, timed on the machine's WebGPU adapter.
// Prints one JSON object: the adapter (vendor, architecture, limits, CPU emulation or
// not), and per M: wall ms per step (median; one submit + one read-back of the argmax
// ids), GPU ms per step and per kernel from timestamp queries (profiled run: one pass per
// dispatch), dispatches per step, weight bytes streamed per step vs the ideal (each
// weight byte once per step), KV bytes read.
// Usage: node scripts/bench-webgpu.mjs [--shape qwen3.5-0.8b] [--layers 4] [--dtype q8_0]
//        [--m 1,4,16] [--ctx 256] [--steps 5]
// Run `npm run build` first (imports dist/). Dawn's stderr warnings are the driver's, not ours.
import { parseArgs } from 'node:util';
import { nodeGpu } from '../dist/src/kernels/webgpu-node.js';
import { WebGpuKernels } from '../dist/src/kernels/webgpu/backend.js';
import { BenchModel, encodeStep } from '../dist/src/kernels/webgpu/bench-step.js';
import { describeAdapter, takeUncapturedError } from '../dist/src/kernels/webgpu/device.js';
import { SHAPES } from '../dist/src/model/make-model.js';

const { values: v } = parseArgs({
  options: {
    shape: { type: 'string', default: 'qwen3.5-0.8b' }, layers: { type: 'string', default: '4' },
    dtype: { type: 'string', default: 'q8_0' }, m: { type: 'string', default: '1,4,16' },
    ctx: { type: 'string', default: '256' }, steps: { type: 'string', default: '5' },
  },
});
const spec = SHAPES[v.shape];
if (!spec) { console.error(`bench-webgpu: unknown --shape ${v.shape} (${Object.keys(SHAPES).join(', ')})`); process.exit(2); }
const shape = { ...spec, layers: Math.min(spec.layers, Number(v.layers)) };
const ms = v.m.split(',').map(Number);
const ctx = Number(v.ctx);
const steps = Number(v.steps);

const g = await WebGpuKernels.create(await nodeGpu(), { allowCpuEmulation: true });
const t0 = performance.now();
const model = new BenchModel(g, shape, v.dtype, 16, ctx + 1);
const uploadMs = performance.now() - t0;
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };
const runs = [];
for (const m of ms) {
  const out = g.alloc.tensor([m], 'i32');
  const wall = [];
  let traffic = null;
  let dispatches = 0;
  for (let i = 0; i < steps + 1; i++) {
    const enc = g.encoder();
    traffic = encodeStep(model, enc, m, ctx, out);
    enc.read(out);
    const s = performance.now();
    await enc.submit();
    if (i > 0) wall.push(performance.now() - s); // the first run compiles pipelines
    dispatches = enc.dispatchCount;
  }
  const prof = g.encoder(true);
  encodeStep(model, prof, m, ctx, out);
  await prof.submit();
  const byKernel = {};
  let gpuNs = 0;
  for (const t of prof.timings) { byKernel[t.label] = (byKernel[t.label] ?? 0) + t.ns / 1e6; gpuNs += t.ns; }
  for (const k of Object.keys(byKernel)) byKernel[k] = Number(byKernel[k].toFixed(3));
  const err = takeUncapturedError();
  if (err) throw new Error(`device error: ${err}`);
  runs.push({
    m, wall_ms_per_step: Number(median(wall).toFixed(2)),
    gpu_ms_per_step: prof.timings.length ? Number((gpuNs / 1e6).toFixed(2)) : null,
    dispatches_per_step: dispatches,
    weight_bytes_read: traffic.weightBytesRead, weight_bytes_ideal: traffic.weightBytesIdeal,
    weight_read_ratio: Number((traffic.weightBytesRead / traffic.weightBytesIdeal).toFixed(3)),
    kv_bytes_read: traffic.kvBytesRead,
    gb_per_s_wall: Number(((traffic.weightBytesRead + traffic.kvBytesRead) / (median(wall) / 1e3) / 1e9).toFixed(2)),
    gpu_ms_by_kernel: byKernel,
  });
}
console.log(JSON.stringify({
  adapter: g.adapter, adapter_line: describeAdapter(g.adapter), shape: v.shape, layers: shape.layers, dtype: v.dtype, ctx,
  weight_bytes: model.weightBytes, upload_ms: Math.round(uploadMs), runs,
}, null, 1));
g.dispose();
