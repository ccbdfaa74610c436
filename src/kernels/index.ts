// Choose a kernel backend by name.
import type { Kernels } from './types.js';
import { createRefKernels } from './ref/index.js';
import { DeltaserveError } from '../util/errors.js';

export type KernelsChoice = 'ref' | 'wasm' | Kernels;

export async function createKernels(choice: KernelsChoice, threads?: number): Promise<Kernels> {
  if (typeof choice !== 'string') return choice;
  if (choice === 'ref') return createRefKernels();
  if (choice === 'wasm') {
    const wasmModule = './wasm/index.js';
    const mod = (await import(wasmModule)) as { createWasmKernels(o?: { threads?: number }): Promise<Kernels> };
    return mod.createWasmKernels(threads !== undefined ? { threads } : {});
  }
  throw new DeltaserveError('bad_config', `unknown kernels "${String(choice)}" (choose ref or wasm)`);
}
