// temp: compile (first dispatch) time of each WGSL source in a dir, cold Mesa cache
import { readdirSync, readFileSync, appendFileSync } from 'node:fs';
import { nodeGpu } from './dist/src/kernels/webgpu-node.js';
import { acquireGpu } from './dist/src/kernels/webgpu/device.js';
const [dir, out, shard, shards] = process.argv.slice(2);
const gpu = await nodeGpu();
const { device } = await acquireGpu(gpu, { allowCpuEmulation: true });
const STORAGE_DECL = /@group\(0\) @binding\((\d+)\) var<storage, read_write> (\w+)\s*:[^;]*;\n?/g;
const READ_DECL = /@group\(0\) @binding\((\d+)\) var<storage, read> (\w+)\s*:[^;]*;\n?/g;
const files = readdirSync(dir).filter((f) => f.endsWith('.wgsl')).sort().filter((_, i) => i % Number(shards ?? 1) === Number(shard ?? 0));
const uni = device.createBuffer({ size: 256, usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST });
const buf = device.createBuffer({ size: 1 << 16, usage: GPUBufferUsage.STORAGE });
const rbuf = device.createBuffer({ size: 1 << 16, usage: GPUBufferUsage.STORAGE });
for (const f of files) {
  const code = readFileSync(`${dir}/${f}`, 'utf8');
  const rw = [...code.matchAll(STORAGE_DECL)].map((m) => Number(m[1]));
  const ro = [...code.matchAll(READ_DECL)].map((m) => Number(m[1]));
  const layout = device.createBindGroupLayout({ entries: [
    { binding: 0, visibility: 4, buffer: { type: 'uniform', hasDynamicOffset: true } },
    ...rw.map((binding) => ({ binding, visibility: 4, buffer: { type: 'storage' } })),
    ...ro.map((binding) => ({ binding, visibility: 4, buffer: { type: 'read-only-storage' } }))] });
  const t0 = performance.now();
  const pipeline = device.createComputePipeline({ layout: device.createPipelineLayout({ bindGroupLayouts: [layout] }), compute: { module: device.createShaderModule({ code }), entryPoint: 'main' } });
  // each binding its own 4 KiB window (WebGPU forbids one buffer in two writable bindings at overlapping ranges)
  const bg = device.createBindGroup({ layout, entries: [{ binding: 0, resource: { buffer: uni, size: 256 } },
    ...rw.map((binding, i) => ({ binding, resource: { buffer: buf, offset: i * 4096, size: 4096 } })), ...ro.map((binding, i) => ({ binding, resource: { buffer: rbuf, offset: i * 4096, size: 4096 } }))] });
  const enc = device.createCommandEncoder();
  const pass = enc.beginComputePass();
  pass.setPipeline(pipeline); pass.setBindGroup(0, bg, [0]); pass.dispatchWorkgroups(1); pass.end();
  device.queue.submit([enc.finish()]);
  await device.queue.onSubmittedWorkDone();
  const ms = performance.now() - t0;
  appendFileSync(out, `${f.replace('.wgsl', '')} ${ms.toFixed(0)}\n`);
}
device.destroy();
process.exit(0);
