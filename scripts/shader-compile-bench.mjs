// What a driver spends compiling the matmul groups' WGSL (a cold pipeline: a fresh machine's
// first run, and every test file on a machine whose shader cache is empty). For each variant:
// createComputePipeline plus the first dispatch of one workgroup (lavapipe compiles a
// pipeline with LLVM at its first dispatch), with Mesa's shader cache off. `--base DIR` (a
// checkout with its own dist/) times the same variants as that tree generates them, in the
// same process, alternately: a same-run A/B of a kernel source change. Prints one JSON object.
// Usage: node scripts/shader-compile-bench.mjs [--base DIR] [--runs 3] [--only 'SUBSTRING|SUBSTRING']
// (llvmpipe's vector width, LP_NATIVE_VECTOR_WIDTH, changes the figures: it is reported.)
import { parseArgs } from 'node:util';
import { cpus } from 'node:os';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

process.env.MESA_SHADER_CACHE_DISABLE = 'true';
const { values: v } = parseArgs({ options: { base: { type: 'string' }, runs: { type: 'string', default: '3' }, only: { type: 'string' } } });
const here = resolve(new URL('..', import.meta.url).pathname);

/** The variants, as the tree at `root` generates them (sg: subgroups, dot4: the packed builtin). */
async function variants(root, sg, dot4) {
  const at = (f) => import(pathToFileURL(`${root}/dist/src/kernels/webgpu/wgsl/${f}.js`).href);
  const { floatColumnsShader } = await at('matmul-columns');
  const { floatMatmulGroupShader } = await at('matmul-group');
  const { quantMatmulActsGroupShader } = await at('qmatmul-acts-group');
  const { quantMatmulGroupShader } = await at('qmatmul-group');
  const { quantColumnsShader } = await at('qmatmul-columns');
  const conv = { taps: 4, mask: 1, steps: false };
  return {
    'float 8 columns, 4 parts, norm (bf16 in_proj, GPU launch)': () => floatColumnsShader('bf16', 4, sg, false, 16, true, 8, true),
    'float 8 columns, 4 parts, norm, conv fold': () => floatColumnsShader('bf16', 4, sg, false, 16, true, 8, true, null, conv),
    'float 1 column, 4 parts, norm (bf16 in_proj, CPU adapter)': () => floatMatmulGroupShader('bf16', 4, sg, false, true),
    'acts-quantizing q8_0, 8 columns, 4 parts, norm': () => quantMatmulActsGroupShader('q8_0', 4, dot4, false, 'norm', 8, true),
    'acts-quantizing q4_k, 8 columns, 2 parts, norm': () => quantMatmulActsGroupShader('q4_k', 2, dot4, false, 'norm', 8, true),
    'acts-quantizing q8_0, 8 columns, head norm of 32 heads (out_proj)': () => quantMatmulActsGroupShader('q8_0', 1, dot4, true, 'headnorm', 8, true, 32),
    'float 8 columns, head norm of 16 heads (bf16 out_proj)': () => floatColumnsShader('bf16', 1, sg, true, 16, true, 8, false, null, null, 16),
    'acts-quantizing q8_0, 8 columns, 4 parts, norm, conv fold': () => quantMatmulActsGroupShader('q8_0', 4, dot4, false, 'norm', 8, true, 0, conv),
    'quantized q8_0, 4 parts, block layout (CPU adapter)': () => quantMatmulGroupShader('q8_0', 4, dot4, false, 16, 'block'),
    'quantized q4_k, 2 parts, block layout (CPU adapter)': () => quantMatmulGroupShader('q4_k', 2, dot4, false, 16, 'block'),
    'quantized q6_k, 4 parts, lanes layout (GPU)': () => quantMatmulGroupShader('q6_k', 4, dot4, false, 16, 'lanes'),
    'quantized q4_k, 4 columns, 4 parts, 8 rows (GPU launch at M >= 2)': () => quantColumnsShader('q4_k', 4, dot4, false, 8),
    'quantized q6_k, 4 columns, 1 part, 16 rows': () => quantColumnsShader('q6_k', 1, dot4, false, 16),
  };
}

const STORAGE = /@group\(0\) @binding\((\d+)\) var<storage, read_write>/g;
const READ = /@group\(0\) @binding\((\d+)\) var<storage, read>/g;

/** ms to create `code`'s pipeline and run one workgroup of it (its first dispatch). */
async function compileMs(device, code) {
  const rw = [...code.matchAll(STORAGE)].map((m) => Number(m[1]));
  const ro = [...code.matchAll(READ)].map((m) => Number(m[1]));
  const layout = device.createBindGroupLayout({ entries: [
    { binding: 0, visibility: 4, buffer: { type: 'uniform', hasDynamicOffset: true } },
    ...rw.map((binding) => ({ binding, visibility: 4, buffer: { type: 'storage' } })),
    ...ro.map((binding) => ({ binding, visibility: 4, buffer: { type: 'read-only-storage' } }))] });
  const uniform = device.createBuffer({ size: 256, usage: GPUBufferUsage.UNIFORM });
  const entries = [{ binding: 0, resource: { buffer: uniform, size: 256 } },
    ...[...rw, ...ro].map((binding) => ({ binding, resource: { buffer: device.createBuffer({ size: 1 << 16, usage: GPUBufferUsage.STORAGE }) } }))];
  device.pushErrorScope('validation');
  const t0 = performance.now();
  const pipeline = device.createComputePipeline({ layout: device.createPipelineLayout({ bindGroupLayouts: [layout] }),
    compute: { module: device.createShaderModule({ code }), entryPoint: 'main' } });
  const enc = device.createCommandEncoder();
  const pass = enc.beginComputePass();
  pass.setPipeline(pipeline);
  pass.setBindGroup(0, device.createBindGroup({ layout, entries }), [0]);
  pass.dispatchWorkgroups(1);
  pass.end();
  device.queue.submit([enc.finish()]);
  await device.queue.onSubmittedWorkDone();
  const ms = performance.now() - t0;
  const err = await device.popErrorScope();
  if (err) throw new Error(`shader-compile-bench: ${err.message}`);
  return ms;
}

const { nodeGpu } = await import(pathToFileURL(`${here}/dist/src/kernels/webgpu-node.js`).href);
const gpu = await nodeGpu();
const adapter = await gpu.requestAdapter();
if (!adapter) throw new Error('shader-compile-bench: no WebGPU adapter (npm run test:setup installs lavapipe)');
const sg = adapter.features.has('subgroups');
const dot4 = gpu.wgslLanguageFeatures?.has('packed_4x8_integer_dot_product') ?? false;
const device = await adapter.requestDevice({ requiredFeatures: sg ? ['subgroups'] : [],
  requiredLimits: { maxStorageBuffersPerShaderStage: adapter.limits.maxStorageBuffersPerShaderStage,
    maxComputeWorkgroupStorageSize: adapter.limits.maxComputeWorkgroupStorageSize } });
const trees = { tree: await variants(here, sg, dot4), ...(v.base ? { base: await variants(resolve(v.base), sg, dot4) } : {}) };
const names = Object.keys(trees.tree).filter((n) => !v.only || v.only.split('|').some((o) => n.includes(o)));
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const rows = [];
for (const name of names) {
  const ms = Object.fromEntries(Object.keys(trees).map((t) => [t, []]));
  const bytes = Object.fromEntries(Object.keys(trees).map((t) => [t, trees[t][name]().length]));
  for (let r = 0; r < Number(v.runs); r++) {
    // a distinct comment a compile: Dawn would hand back its own pipeline for a source it has seen
    for (const t of Object.keys(trees)) ms[t].push(Math.round(await compileMs(device, `${trees[t][name]()}\n// ${t} ${r}`)));
  }
  const row = { variant: name, wgsl_bytes: bytes.tree, ms: median(ms.tree), runs: ms.tree };
  if (v.base) Object.assign(row, { base_wgsl_bytes: bytes.base, base_ms: median(ms.base), base_runs: ms.base, base_over_tree: +(median(ms.base) / median(ms.tree)).toFixed(2) });
  rows.push(row);
  console.error(JSON.stringify(row));
}
const info = adapter.info ?? {};
console.log(JSON.stringify({ bench: 'shader-compile', date: new Date().toISOString(), cpu: cpus()[0]?.model, cores: cpus().length, node: process.version,
  adapter: `${info.vendor ?? ''} ${info.architecture ?? ''} ${info.description ?? ''}`.trim(), lp_native_vector_width: process.env.LP_NATIVE_VECTOR_WIDTH ?? null,
  subgroups: sg, dot4, base: v.base ?? null, rows }, null, 1));
device.destroy();
process.exit(0);
