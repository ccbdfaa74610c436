// Choose a kernel backend by name.
import type { AnyKernels } from './types.js';
import { createRefKernels } from './ref/index.js';
import { DeltaserveError } from '../util/errors.js';
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { GpuAdapterSummary } from './webgpu/adapter-summary.js';

/** 'auto': webgpu on a GPU that is not a CPU emulation, else the CPU default (wasm when
 * built, else ref). 'cpu': the CPU default without looking for a GPU. */
export type KernelsChoice = 'auto' | 'cpu' | 'ref' | 'wasm' | 'webgpu' | AnyKernels;
export const KERNEL_NAMES = ['auto', 'cpu', 'ref', 'wasm', 'webgpu'] as const;

/** wasm when it is built (npm run build), else ref; DELTASERVE_KERNELS=ref|wasm overrides. */
export function defaultKernels(): 'ref' | 'wasm' {
  const env = process.env['DELTASERVE_KERNELS'];
  if (env === 'ref' || env === 'wasm') return env;
  const here = fileURLToPath(new URL('.', import.meta.url)); // dist/src/kernels/
  const built = existsSync(resolve(here, '..', '..', '..', 'build', 'kernels.wasm')) && existsSync(resolve(here, 'wasm', 'index.js'));
  return built ? 'wasm' : 'ref';
}

/** What `auto` decided and why (printed by `serve`'s ready line and `bench`). */
export interface AutoDecision {
  readonly pick: 'webgpu' | 'ref' | 'wasm';
  readonly reason: string;
}

let lastAuto: AutoDecision | null = null;
/** The decision of the last createKernels('auto'), or null. */
export function autoDecision(): AutoDecision | null {
  return lastAuto;
}

/** The backend's adapter when it runs on a GPU (null on the CPU backends). */
export function gpuAdapterOf(k: AnyKernels): GpuAdapterSummary | null {
  const g = (k as { g?: { adapter?: GpuAdapterSummary } }).g;
  return k.name === 'webgpu' && g?.adapter ? g.adapter : null;
}

/** Bytes of device memory the backend holds now (weights, once loaded), or null on the CPU. */
export function gpuMemoryBytes(k: AnyKernels): number | null {
  const g = (k as { g?: { alloc?: { bytes?: number } } }).g;
  return k.name === 'webgpu' && typeof g?.alloc?.bytes === 'number' ? g.alloc.bytes : null;
}

export async function createKernels(choice: KernelsChoice, threads?: number): Promise<AnyKernels> {
  if (typeof choice !== 'string') return choice;
  if (choice === 'cpu') return createKernels(defaultKernels(), threads);
  if (choice === 'auto') return createAuto(threads);
  if (choice === 'ref') return createRefKernels();
  if (choice === 'wasm') {
    const wasmModule = './wasm/index.js';
    const mod = (await import(wasmModule)) as { createWasmKernels(o?: { threads?: number }): Promise<AnyKernels> };
    return mod.createWasmKernels(threads !== undefined ? { threads } : {});
  }
  if (choice === 'webgpu') return createWebGpu(true);
  throw new DeltaserveError('bad_config', `unknown kernels "${String(choice)}" (choose ${KERNEL_NAMES.join(', ')})`);
}

/** The webgpu backend through Dawn (the optional npm package `webgpu`). `allowCpuEmulation`:
 * accept lavapipe / SwiftShader (an explicit --kernels webgpu does). */
async function createWebGpu(allowCpuEmulation: boolean): Promise<AnyKernels> {
  const { nodeGpu } = await import('./webgpu-node.js');
  const { WebGpuBoundaryKernels } = await import('./webgpu/kernels.js');
  let gpu: GPU;
  try {
    gpu = await nodeGpu();
  } catch (e) {
    throw new DeltaserveError('bad_config', `--kernels webgpu: ${(e as Error).message}`);
  }
  try {
    return await WebGpuBoundaryKernels.create(gpu, { allowCpuEmulation }) as unknown as AnyKernels;
  } catch (e) {
    throw new DeltaserveError('bad_config', `--kernels webgpu: ${(e as Error).message}`);
  }
}

async function createAuto(threads?: number): Promise<AnyKernels> {
  const cpu = defaultKernels();
  let reason: string;
  try {
    const k = await createWebGpu(false);
    const a = gpuAdapterOf(k);
    lastAuto = { pick: 'webgpu', reason: a ? `a GPU adapter: ${a.vendor} ${a.architecture} ${a.description}`.trim() : 'a GPU adapter' };
    return k;
  } catch (e) {
    reason = (e as Error).message.replace(/^--kernels webgpu: /, '');
  }
  lastAuto = { pick: cpu, reason: `no usable GPU (${reason})` };
  return createKernels(cpu, threads);
}
