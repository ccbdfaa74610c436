// The wasm kernel builds every fast-vs-ref suite runs: the default build (fma where the
// runtime takes relaxed SIMD, vnni where V8 also lowers its i8 dot-add to AVX-VNNI) on 1
// and 2 threads (Q8_0 in q8u4 where that dot-add is AVX-VNNI), the vnni build explicitly
// with Q8_0 in q8x4 (exact on every runtime that takes relaxed SIMD, whatever the
// lowering), and the plain SIMD128 build, which runtimes without
// relaxed SIMD fall back to. Disposed after the file's tests.
import { after } from 'node:test';
import type { Kernels } from '../src/kernels/types.js';
import { createWasmKernels } from '../src/kernels/wasm/index.js';

export async function wasmBackendsUnderTest(): Promise<{ label: string; k: Kernels }[]> {
  const backends = [
    { label: 'wasm threads=1', k: await createWasmKernels({ threads: 1 }) },
    { label: 'wasm threads=2', k: await createWasmKernels({ threads: 2 }) },
    { label: 'wasm vnni q8x4 threads=2', k: await createWasmKernels({ threads: 2, variant: 'vnni', q8Layout: 'q8x4' }) },
    { label: 'wasm plain threads=2', k: await createWasmKernels({ threads: 2, variant: 'plain' }) },
  ];
  after(() => backends.forEach((b) => b.k.dispose()));
  return backends;
}
