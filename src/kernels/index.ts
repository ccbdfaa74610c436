// Choose a kernel backend by name.
import type { AnyKernels } from './types.js';
import { createRefKernels } from './ref/index.js';
import { DeltaserveError } from '../util/errors.js';
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export type KernelsChoice = 'auto' | 'ref' | 'wasm' | AnyKernels;

/** wasm when it is built (npm run build), else ref; DELTASERVE_KERNELS overrides. */
export function defaultKernels(): 'ref' | 'wasm' {
  const env = process.env['DELTASERVE_KERNELS'];
  if (env === 'ref' || env === 'wasm') return env;
  const here = fileURLToPath(new URL('.', import.meta.url)); // dist/src/kernels/
  const built = existsSync(resolve(here, '..', '..', '..', 'build', 'kernels.wasm')) && existsSync(resolve(here, 'wasm', 'index.js'));
  return built ? 'wasm' : 'ref';
}

export async function createKernels(choice: KernelsChoice, threads?: number): Promise<AnyKernels> {
  if (typeof choice !== 'string') return choice;
  if (choice === 'auto') return createKernels(defaultKernels(), threads);
  if (choice === 'ref') return createRefKernels();
  if (choice === 'wasm') {
    const wasmModule = './wasm/index.js';
    const mod = (await import(wasmModule)) as { createWasmKernels(o?: { threads?: number }): Promise<AnyKernels> };
    return mod.createWasmKernels(threads !== undefined ? { threads } : {});
  }
  throw new DeltaserveError('bad_config', `unknown kernels "${String(choice)}" (choose auto, ref or wasm)`);
}
