// Same-run A/B of webgpu attention: two builds (dist folders) loaded in one process, each on
// its own device, one attentionBatch call per timed step (recorded, submitted, read back),
// cases interleaved before/after, median and min wall ms of `--reps`, and the median CPU ms of
// the process (lavapipe's threads are in it: less sensitive to a loaded machine than wall time). Also each build's largest
// |Δ| and relative error against the reference kernel (f64-free f32 host code) per case.
// Usage: node scripts/ab-webgpu-attention.mjs --before /tmp/old/dist --after dist [--reps 5] [--cases a,b]
//   [--workgroup-storage 16384] (both devices capped at that many bytes of workgroup memory, as
//   a 16 KiB GPU: the after build's test/webgpu-limits.js)
// Cases: <model>-<kind>-<context>: tiny-think (4 heads, 2 KV, hd 64) / qwen3.5-0.8b (8, 2, 256) /
// qwen3.5-4b (16, 4, 256); decode (1 row), verify4 (4 rows), prefill (T rows from 0).
import { parseArgs } from 'node:util';
import { resolve } from 'node:path';

const { values: v } = parseArgs({ options: { before: { type: 'string' }, after: { type: 'string', default: 'dist' }, reps: { type: 'string', default: '5' }, cases: { type: 'string' }, 'workgroup-storage': { type: 'string' } } });
if (!v.before) throw new Error('--before DIST is required (a dist folder built from the base commit)');
const reps = Number(v.reps);
const PAGE = 16;
const DIMS = { 'tiny-think': { numHeads: 4, numKvHeads: 2, headDim: 64 }, 'qwen3.5-0.8b': { numHeads: 8, numKvHeads: 2, headDim: 256 }, 'qwen3.5-4b': { numHeads: 16, numKvHeads: 4, headDim: 256 } };
const ALL = ['tiny-think-decode-256', 'tiny-think-decode-2048', 'tiny-think-verify4-2048', 'tiny-think-prefill-256', 'qwen3.5-0.8b-decode-2048', 'qwen3.5-0.8b-verify4-2048', 'qwen3.5-0.8b-prefill-256'];
const cases = (v.cases ? v.cases.split(',') : ALL).map((name) => {
  const m = /^(.*)-(decode|verify4|prefill)-(\d+)$/.exec(name);
  if (!m || !DIMS[m[1]]) throw new Error(`unknown case ${name}`);
  const ctx = Number(m[3]);
  const t = m[2] === 'decode' ? 1 : m[2] === 'verify4' ? 4 : ctx;
  return { name, d: DIMS[m[1]], t, start: ctx - t };
});

/** The GPU object as is, or with --workgroup-storage applied to its adapters. */
async function capped(gpu) {
  if (!v['workgroup-storage']) return gpu;
  const { gpuWithWorkgroupStorage } = await import(`${resolve(v.after)}/test/webgpu-limits.js`);
  return gpuWithWorkgroupStorage(gpu, Number(v['workgroup-storage']));
}

async function load(dir) {
  const root = resolve(dir);
  const { nodeGpu } = await import(`${root}/src/kernels/webgpu-node.js`);
  const { WebGpuKernels } = await import(`${root}/src/kernels/webgpu/backend.js`);
  const { WebGpuBoundaryKernels } = await import(`${root}/src/kernels/webgpu/kernels.js`);
  const { plainRopeTable } = await import(`${root}/src/kernels/rope-table.js`);
  const { createRefKernels } = await import(`${root}/src/kernels/ref/index.js`);
  const k = new WebGpuBoundaryKernels(await WebGpuKernels.create(await capped(await nodeGpu()), { allowCpuEmulation: true }));
  return { k, rope: plainRopeTable(1e6, 8), ref: createRefKernels() };
}

let seed = 7;
const rnd = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32) * 2 - 1;

/** Host data of a case: q rows, the cache (pages in reverse order), the page table. */
function data(c) {
  const qd = c.d.numHeads * c.d.headDim;
  const kvd = c.d.numKvHeads * c.d.headDim;
  const pages = Math.ceil((c.start + c.t) / PAGE);
  const n = pages * PAGE * kvd;
  return { qd, n, q: Float32Array.from({ length: c.t * qd }, rnd), cache: Float32Array.from({ length: 2 * n }, rnd),
    pageTable: Array.from({ length: pages }, (_, i) => pages - 1 - i) };
}

/** One timed call on a build: upload once, then per rep record + read back. */
function setup(b, c, h) {
  const { k } = b;
  const up = (a) => { const t = k.alloc(a.length); k.write(t, 0, a); return t; };
  const q = up(h.q);
  const cache = up(h.cache);
  const kv = { k: k.view(cache, 0, h.n), v: k.view(cache, h.n, h.n), pageSize: PAGE };
  const out = k.alloc(c.t * h.qd);
  const seqs = [{ row: 0, t: c.t, start: c.start, pageTable: h.pageTable }];
  return async () => {
    const t0 = performance.now();
    const c0 = process.cpuUsage();
    k.attentionBatch(out, q, h.qd, [kv], k.stepBatch(seqs, b.rope), c.d);
    const [o] = await k.readBack([{ t: out, offset: 0, length: out.length }]);
    const c1 = process.cpuUsage(c0);
    return { ms: performance.now() - t0, cpuMs: (c1.user + c1.system) / 1000, out: o };
  };
}

const median = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];
const builds = { before: await load(v.before), after: await load(v.after) };
const result = [];
for (const c of cases) {
  const h = data(c);
  const want = new Float32Array(c.t * h.qd);
  builds.after.ref.attention(want, h.q, h.qd, { k: h.cache.subarray(0, h.n), v: h.cache.subarray(h.n), pageSize: PAGE }, h.pageTable, c.start, c.t, c.d);
  const calls = { before: setup(builds.before, c, h), after: setup(builds.after, c, h) };
  const row = { case: c.name };
  const outs = {};
  for (const [name, call] of Object.entries(calls)) { // warm-up (pipelines) and the error vs ref
    const { out } = await call();
    outs[name] = new Uint32Array(out.buffer, out.byteOffset, out.length);
    let d = 0; let m = 0;
    for (let i = 0; i < want.length; i++) { d = Math.max(d, Math.abs(out[i] - want[i])); m = Math.max(m, Math.abs(want[i])); }
    row[`${name}_max_abs_delta`] = d;
    row[`${name}_rel_err`] = d / m;
  }
  row.elements_differing = outs.before.reduce((n, x, i) => n + (x === outs.after[i] ? 0 : 1), 0);
  row.elements = want.length;
  const ms = { before: [], after: [] };
  const cpu = { before: [], after: [] };
  for (let r = 0; r < reps; r++) {
    for (const name of r % 2 ? ['after', 'before'] : ['before', 'after']) {
      const x = await calls[name]();
      ms[name].push(x.ms);
      cpu[name].push(x.cpuMs);
    }
  }
  for (const name of ['before', 'after']) {
    row[`${name}_ms_median`] = +median(ms[name]).toFixed(2);
    row[`${name}_ms_min`] = +Math.min(...ms[name]).toFixed(2);
    row[`${name}_cpu_ms_median`] = +median(cpu[name]).toFixed(2);
  }
  result.push(row);
  console.error(JSON.stringify(row));
}
console.log(JSON.stringify({ reps, page: PAGE, node: process.version, workgroup_storage: Object.fromEntries(Object.entries(builds).map(([n, b]) => [n, b.k.g.device.limits.maxComputeWorkgroupStorageSize])), cases: result }, null, 1));
for (const b of Object.values(builds)) b.k.dispose();
