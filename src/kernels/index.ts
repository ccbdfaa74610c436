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
  return k.limits.adapter;
}

/** Bytes of device memory the backend holds now (weights, once loaded), or null on the CPU. */
export function gpuMemoryBytes(k: AnyKernels): number | null {
  return k.limits.deviceMemoryBytes;
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
  try {
    return await openWebGpu(allowCpuEmulation);
  } catch (e) {
    throw new DeltaserveError('bad_config', `--kernels webgpu: ${(e as Error).message}`);
  }
}

/** The webgpu backend, or the loader's / device's own error. The modules (and Dawn) load
 * only here: nothing on the CPU path imports them. */
async function openWebGpu(allowCpuEmulation: boolean): Promise<AnyKernels> {
  const { foldQuantActs, launchProfile, nodeGpu, readbackPacing, submitChunks } = await import('./webgpu-node.js');
  const { WebGpuBoundaryKernels } = await import('./webgpu/kernels.js');
  return await WebGpuBoundaryKernels.create(await nodeGpu(), { allowCpuEmulation, readbackPacing: readbackPacing(), submitChunks: submitChunks(), launches: launchProfile(), foldQuantActs: foldQuantActs() }) as unknown as AnyKernels;
}

async function createAuto(threads?: number): Promise<AnyKernels> {
  const cpu = defaultKernels();
  let reason: string;
  try {
    const k = await openWebGpu(false);
    lastAuto = { pick: 'webgpu', reason: 'a GPU adapter was found' };
    return k;
  } catch (e) {
    reason = await autoReason(e);
  }
  lastAuto = { pick: cpu, reason };
  return createKernels(cpu, threads);
}

/** Why `auto` fell back to the CPU, as one clause (the device layer's own reasons are). */
async function autoReason(e: unknown): Promise<string> {
  const { WebGpuPackageError } = await import('./webgpu-node.js');
  const { NoGpuError } = await import('./webgpu/device.js');
  if (e instanceof NoGpuError) return e.message;
  if (e instanceof WebGpuPackageError) return `the optional npm package "webgpu" (Dawn) is not installed for ${process.platform}-${process.arch}`;
  return `the WebGPU device failed: ${(e as Error).message.split('\n')[0]}`;
}
