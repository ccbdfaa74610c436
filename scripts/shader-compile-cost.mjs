// What a run's shaders cost lavapipe to compile: each WGSL source that scripts/pipeline-log.mjs
// logged, compiled cold (its pipeline created and dispatched once: llvmpipe compiles on the
// first dispatch) and timed; then the seconds per test file (all its pipelines; those no other
// file compiles) and per kernel family. Prints JSON. The Mesa shader cache must be off, and the
// vector width the suite's (scripts/test-tiers.mjs LAVAPIPE_ENV):
//   MESA_SHADER_CACHE_DISABLE=true LP_NATIVE_VECTOR_WIDTH=128 node scripts/shader-compile-cost.mjs DIR [--shard I/N] [--costs FILE]
// --shard I/N times every N-th source from the I-th (run N processes side by side); --costs FILE
// reuses "HASH MS" lines already measured (appending the new ones), so a later log costs only its new sources.
import { appendFileSync, existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { cpus } from 'node:os';
import { parseArgs } from 'node:util';
import { nodeGpu } from '../dist/src/kernels/webgpu-node.js';
import { acquireGpu } from '../dist/src/kernels/webgpu/device.js';
import { layoutEntriesOf } from '../dist/src/kernels/webgpu/pipelines.js';

const { values: v, positionals } = parseArgs({ allowPositionals: true, options: { shard: { type: 'string', default: '0/1' }, costs: { type: 'string' } } });
const dir = positionals[0];
if (!dir || !existsSync(join(dir, 'pipelines.log'))) throw new Error('usage: shader-compile-cost.mjs DIR (a PIPELINE_LOG_DIR of scripts/pipeline-log.mjs)');
if (process.env.MESA_SHADER_CACHE_DISABLE !== 'true') throw new Error('set MESA_SHADER_CACHE_DISABLE=true: a cached shader costs nothing to compile');
const [shard, shards] = v.shard.split('/').map(Number);
const costsFile = v.costs ?? join(dir, `costs-${shard}.txt`);

const readCosts = (file) => existsSync(file) ? Object.fromEntries(readFileSync(file, 'utf8').split('\n').filter(Boolean).map((l) => l.split(' ')).map(([h, ms]) => [h, Number(ms)])) : {};
const have = readCosts(costsFile);
const sources = readdirSync(join(dir, 'src')).filter((f) => f.endsWith('.wgsl')).map((f) => f.slice(0, -5)).sort()
  .filter((_, i) => i % shards === shard).filter((h) => have[h] === undefined);

const { device } = await acquireGpu(await nodeGpu(), { allowCpuEmulation: true });
const uniform = device.createBuffer({ size: 256, usage: GPUBufferUsage.UNIFORM });
// written and read-only bindings in two buffers (WebGPU forbids one buffer in both in a dispatch), 4 KiB windows
const rwBuffer = device.createBuffer({ size: 1 << 16, usage: GPUBufferUsage.STORAGE });
const roBuffer = device.createBuffer({ size: 1 << 16, usage: GPUBufferUsage.STORAGE });
for (const hash of sources) {
  const code = readFileSync(join(dir, 'src', `${hash}.wgsl`), 'utf8');
  // the backend's layout rule (pipelines.ts); bind each storage binding by its kind
  const entries = layoutEntriesOf(code);
  const rw = entries.filter((e) => e.buffer.type === 'storage').map((e) => e.binding);
  const ro = entries.filter((e) => e.buffer.type === 'read-only-storage').map((e) => e.binding);
  const layout = device.createBindGroupLayout({ entries });
  const t0 = performance.now();
  const pipeline = device.createComputePipeline({ layout: device.createPipelineLayout({ bindGroupLayouts: [layout] }), compute: { module: device.createShaderModule({ code }), entryPoint: 'main' } });
  const group = device.createBindGroup({ layout, entries: [{ binding: 0, resource: { buffer: uniform, size: 256 } },
    ...rw.map((binding, i) => ({ binding, resource: { buffer: rwBuffer, offset: i * 4096, size: 4096 } })),
    ...ro.map((binding, i) => ({ binding, resource: { buffer: roBuffer, offset: i * 4096, size: 4096 } }))] });
  const enc = device.createCommandEncoder();
  const pass = enc.beginComputePass();
  pass.setPipeline(pipeline);
  pass.setBindGroup(0, group, [0]); // all-zero parameters: the kernels' loops run empty
  pass.dispatchWorkgroups(1);
  pass.end();
  device.queue.submit([enc.finish()]);
  await device.queue.onSubmittedWorkDone();
  appendFileSync(costsFile, `${hash} ${Math.round(performance.now() - t0)}\n`);
}
device.destroy();

// every costs file of the directory, and the one named
const cost = Object.assign({}, ...readdirSync(dir).filter((f) => /^costs-\d+\.txt$/.test(f)).map((f) => readCosts(join(dir, f))), readCosts(costsFile));
const users = new Map(); // hash → Set of files
const keyOf = new Map();
for (const line of readFileSync(join(dir, 'pipelines.log'), 'utf8').split('\n').filter(Boolean)) {
  const [hash, file, key] = line.split(' ');
  if (!users.has(hash)) users.set(hash, new Set());
  users.get(hash).add(file);
  if (!keyOf.has(hash)) keyOf.set(hash, key);
}
const s = (ms) => Math.round(ms / 100) / 10;
const measured = [...users.keys()].filter((h) => cost[h] !== undefined);
const files = {};
for (const h of measured) {
  for (const f of users.get(h)) {
    const e = (files[f] ??= { all_s: 0, only_here_s: 0, pipelines: 0, only_here: 0 });
    e.all_s += cost[h]; e.pipelines++;
    if (users.get(h).size === 1) { e.only_here_s += cost[h]; e.only_here++; }
  }
}
const families = {};
for (const h of measured) {
  // the key without its segment count and alias suffix: matmul_group_bf16_N_tm16_sg_norm_vec4_cols8
  const fam = keyOf.get(h).replace(/\|.*/, '').replace(/^(\w+?_(?:bf16|f16|f32|q\d_[01k]))_\d+/, '$1_N').replace(/_g\d+/, '_gN');
  const e = (families[fam] ??= { s: 0, pipelines: 0 });
  e.s += cost[h]; e.pipelines++;
}
const byCost = (o, k) => Object.fromEntries(Object.entries(o).sort((a, b) => b[1][k] - a[1][k]).map(([n, e]) => [n, Object.fromEntries(Object.entries(e).map(([x, y]) => [x, x.endsWith('_s') || x === 's' ? s(y) : y]))]));
console.log(JSON.stringify({
  bench: 'shader-compile-cost', date: new Date().toISOString(), cpu: cpus()[0]?.model ?? null, cores: cpus().length, node: process.version,
  sources: users.size, measured: measured.length, compile_s: s(measured.reduce((a, h) => a + cost[h], 0)),
  vector_width: process.env.LP_NATIVE_VECTOR_WIDTH ?? 'default',
  files: byCost(files, 'only_here_s'), families: Object.fromEntries(Object.entries(byCost(families, 's')).slice(0, 30)),
  costliest: measured.sort((a, b) => cost[b] - cost[a]).slice(0, 30).map((h) => ({ key: keyOf.get(h), s: s(cost[h]), files: [...users.get(h)] })),
}, null, 1));
process.exit(0);
