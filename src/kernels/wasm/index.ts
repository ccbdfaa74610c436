// The WebAssembly SIMD backend: createWasmKernels() and the bandwidth probe for bench.
import os from 'node:os';
import type { Kernels } from '../types.js';
import { WasmKernels } from './backend.js';
import { MemorySet, MAX_PAGES, PAGE } from './memory.js';
import { compileKernels, type KernelVariant, type WasmMemory } from './module.js';
import { Pool } from './pool.js';
import { calibrateQuantKernels, PROBE_BYTES } from './calibrate.js';

export interface WasmKernelOptions {
  /** Threads computing kernels (the main thread + threads − 1 workers). Default: all cores. */
  threads?: number;
  /** Bytes of one WasmMemory (default and maximum: 4 GiB − 64 KiB). Models larger
   * than this spill into further memories; small values exercise that path in tests. */
  memoryBytes?: number;
  /** Kernel build: 'fma' (relaxed SIMD), 'vnni' (fma, with i32 dot-adds in the Q4_K / Q6_K
   * kernels), 'plain' (SIMD128), or 'auto' (default: vnni when V8 lowers the relaxed dot-add
   * to AVX-VNNI, else fma when the runtime accepts relaxed SIMD, else plain;
   * DELTASERVE_WASM_FMA=0|1|vnni overrides). Results are identical across fma and vnni. */
  variant?: KernelVariant | 'auto';
  /** Time the quantized matmul kernel families of a loaded model's formats and keep the
   * fastest (calibrate.ts, at weightsLoaded(); default true; skipped when one memory is under 16× the probe's size,
   * as in tests of tiny memories). Off: the default families. Results are identical. */
  calibrate?: boolean;
  /** Q8_0's repacked layout: 'q8u4' (assembly/q8u4.ts) where the vnni build's dot-add is
   * AVX-VNNI, else 'q8x4' (default 'auto'; DELTASERVE_WASM_Q8=q8x4 overrides). The same bits. */
  q8Layout?: 'q8x4' | 'auto';
}

export async function createWasmKernels(opts: WasmKernelOptions = {}): Promise<Kernels> {
  const threads = Math.max(1, Math.floor(opts.threads ?? os.availableParallelism()));
  const memoryBytes = Math.min(opts.memoryBytes ?? MAX_PAGES * PAGE, MAX_PAGES * PAGE);
  const { module, variant } = await compileKernels(opts.variant);
  let pool: Pool | null = null;
  const pending: WasmMemory[] = [];
  const mem = new MemorySet(module, memoryBytes, (arena) => {
    if (pool) pool.addMemory(arena.memory);
    else pending.push(arena.memory);
  });
  pool = await Pool.start(threads, module, pending);
  const q8u4Wanted = (opts.q8Layout ?? (process.env.DELTASERVE_WASM_Q8 === 'q8x4' ? 'q8x4' : 'auto')) === 'auto';
  const kernels = new WasmKernels(threads, mem, pool, variant, q8u4Wanted);
  try {
    // forced families (and bad variable values) apply now; formats are timed once a model's
    // weights are loaded, only those it has (weightsLoaded)
    if (opts.calibrate !== false && memoryBytes >= 16 * PROBE_BYTES) {
      kernels.calibration = calibrateQuantKernels(kernels, new Set());
      kernels.calibrateOnLoad = true;
    }
  } catch (e) {
    kernels.dispose();
    throw e;
  }
  return kernels;
}

/** Memory bandwidth in GB/s measured by a WebAssembly SIMD streaming read over `bytes`
 * (default 256 MiB) on all of the backend's threads. */
export function probeBandwidth(kernels: Kernels, bytes = 256 << 20): number {
  if (!(kernels instanceof WasmKernels)) throw new Error(`probeBandwidth needs the wasm backend (got ${kernels.name})`);
  return kernels.probeBandwidth(bytes);
}

export { WasmKernels };
