// The webgpu backend under test: Dawn (npm `webgpu`) on whatever adapter the machine has —
// on machines without a GPU, Mesa's lavapipe (`npm run test:setup` installs it).
// No adapter is a failure with the reason, never a skip.
import { launchProfile, nodeGpu, submitChunks } from '../src/kernels/webgpu-node.js';
import { WebGpuKernels } from '../src/kernels/webgpu/backend.js';
import { takeUncapturedError, type AcquireOptions } from '../src/kernels/webgpu/device.js';
import type { StepEncoder } from '../src/kernels/webgpu/encoder.js';
import type { GpuTensor } from '../src/kernels/webgpu/tensor.js';
import { gpuWithWorkgroupStorage } from './webgpu-limits.js';
import type { CandidateDraw } from '../src/kernels/types.js';
import { candidateDrawsOn, packDrawTable } from '../src/kernels/webgpu/candidate-draws.js';
import { idsOf } from '../src/engine/device-picks.js';
import type { WebGpuBoundaryKernels } from '../src/kernels/webgpu/kernels.js';

/** `workgroupStorage`: a device with at most that much workgroup memory (webgpu-limits.ts). */
export async function gpuUnderTest(opts: { maxBindingOverride?: number; disable?: AcquireOptions['disable']; workgroupStorage?: number;
  launches?: AcquireOptions['launches']; foldQuantActs?: boolean } = {}): Promise<WebGpuKernels> {
  try {
    const gpu = opts.workgroupStorage === undefined ? await nodeGpu() : gpuWithWorkgroupStorage(await nodeGpu(), opts.workgroupStorage);
    // DELTASERVE_SUBMIT_CHUNK and DELTASERVE_LAUNCHES as the engine reads them: kernel suites can
    // run with chunked submits or the other launch profile forced
    const chunks = submitChunks();
    const launches = launchProfile();
    return await WebGpuKernels.create(gpu, { allowCpuEmulation: true, ...(chunks ? { submitChunks: chunks } : {}), ...(launches ? { launches } : {}), ...opts });
  } catch (e) {
    throw new Error(`webgpu tests need a WebGPU adapter (on a machine without a GPU: Mesa lavapipe, mesa-vulkan-drivers >= 23 from bookworm-backports; run \`npm run test:setup\`): ${(e as Error).message}`);
  }
}

/** Record with `body`, read back `outs`, submit once; throws on any device error. */
export async function run<T extends readonly GpuTensor[]>(g: WebGpuKernels, body: (enc: StepEncoder) => void, ...outs: T):
  Promise<{ [K in keyof T]: Float32Array }> {
  const enc = g.encoder();
  body(enc);
  const reads = outs.map((t) => enc.read(t.elem === 'f32' ? t : { ...t, elem: 'f32' }));
  await enc.submit();
  const err = takeUncapturedError();
  if (err) throw new Error(`webgpu device error: ${err}`);
  return reads.map((r) => r.data as Float32Array) as unknown as { [K in keyof T]: Float32Array };
}

/** Read tensors back as int32 (ids). */
export async function readI32(g: WebGpuKernels, t: GpuTensor): Promise<Int32Array> {
  const enc = g.encoder();
  const r = enc.read<Int32Array>({ ...t, elem: 'i32' });
  await enc.submit();
  return r.data!;
}

/** The engine's webgpu kernels can be had here (a failure names the reason, never a skip). */
export async function webgpuEngineKernels(): Promise<void> {
  const k = await gpuUnderTest();
  k.dispose();
}

/** The WGSL candidateDraws' picks of `rows` over candidates (ids, vals) of c per row, written
 * at [1, m] of an m + 1 output prefilled with −7 (slot 0 must stay −7: nothing before the output). */
export async function drawsOnGpu(g: WebGpuKernels, ids: Int32Array, vals: Float32Array, c: number, rows: readonly (CandidateDraw | null)[]): Promise<Int32Array> {
  const m = rows.length;
  const idsT = g.alloc.tensor([ids.length], 'i32');
  g.alloc.write(idsT, ids, 0);
  const valsT = g.alloc.tensor([vals.length], 'f32');
  g.alloc.write(valsT, vals, 0);
  const out = g.alloc.tensor([m + 1], 'i32');
  g.alloc.write(out, new Int32Array(m + 1).fill(-7), 0);
  const words = packDrawTable(rows);
  const table = g.alloc.tensor([words.length], 'i32');
  g.alloc.write(table, words, 0);
  const [got] = await run(g, (e) => candidateDrawsOn(g, e, { out, outOffset: 1, ids: idsT, vals: valsT, candOffset: 0, c, m }, table), out);
  return idsOf(got!);
}

/** The dispatches of each step from now on (one entry per read-back call, the step's end),
 * counted by wrapping the kernels' readBack: the returned array fills as the engine runs. */
export function dispatchesPerReadBack(k: WebGpuBoundaryKernels): number[] {
  const steps: number[] = [];
  const readBack = k.readBack.bind(k);
  let last = k.counters.dispatches;
  k.readBack = async (ranges) => {
    const got = await readBack(ranges);
    steps.push(k.counters.dispatches - last);
    last = k.counters.dispatches;
    return got;
  };
  return steps;
}
