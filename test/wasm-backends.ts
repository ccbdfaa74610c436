// The wasm kernel builds every fast-vs-ref suite runs: the default build (fma where the
// runtime takes relaxed SIMD) on 1 and 2 threads, and the plain SIMD128 build, which
// runtimes without relaxed SIMD fall back to. Disposed after the file's tests.
import { after } from 'node:test';
import type { Kernels } from '../src/kernels/types.js';
import { createWasmKernels } from '../src/kernels/wasm/index.js';

export async function wasmBackendsUnderTest(): Promise<{ label: string; k: Kernels }[]> {
  const backends = [
    { label: 'wasm threads=1', k: await createWasmKernels({ threads: 1 }) },
    { label: 'wasm threads=2', k: await createWasmKernels({ threads: 2 }) },
    { label: 'wasm plain threads=2', k: await createWasmKernels({ threads: 2, variant: 'plain' }) },
  ];
  after(() => backends.forEach((b) => b.k.dispose()));
  return backends;
}
