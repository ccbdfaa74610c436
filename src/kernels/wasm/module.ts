// Loading build/kernels.wasm (compiled from assembly/ by `npm run build:wasm`) and the
// typed view of its exports. Pointers are byte offsets into the instance's (shared,
// imported) memory; JS numbers ≥ 2³¹ pass through ToInt32 and arrive as the same u32 bits.
import { readFileSync, existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

// The project's TS lib (ES2022, @types/node 20) has no WebAssembly typings: the few parts
// used are typed here, locally, so nothing global is declared.
export interface WasmMemory {
  readonly buffer: ArrayBufferLike;
  grow(pages: number): number;
}
export type WasmModule = { readonly __wasmModule?: never } & object;
interface WasmApi {
  Memory: new (d: { initial: number; maximum: number; shared: boolean }) => WasmMemory;
  Instance: new (m: WasmModule, imports: object) => { exports: object };
  compile(bytes: Uint8Array): Promise<WasmModule>;
}
export const WA = (globalThis as unknown as { WebAssembly: WasmApi }).WebAssembly;

export interface KernelExports {
  heapBase(): number;
  prepBf16X(dst: number, src: number, m: number, k: number): void;
  matmulBf16(out: number, x: number, w: number, m: number, n: number, k: number, n0: number, n1: number): void;
  matmulF32(out: number, x: number, w: number, m: number, n: number, k: number, n0: number, n1: number): void;
  streamRead(p: number, bytes: number): number;
  rmsNorm(out: number, x: number, w: number, wBf16: number, r0: number, r1: number, d: number, eps: number, zc: number): void;
  gatedRmsNorm(out: number, o: number, z: number, w: number, wBf16: number, r0: number, r1: number, d: number, eps: number): void;
  rope(x: number, positions: number, t: number, heads: number, headDim: number, rotaryDim: number, theta: number, stride: number): void;
  mulSilu(out: number, a: number, b: number, n: number): void;
  mulSigmoid(out: number, a: number, b: number, n: number): void;
  add(out: number, a: number, b: number, n: number): void;
  gdnGates(g: number, beta: number, a: number, b: number, aLog: number, aLogBf16: number, dtBias: number, dtBf16: number,
    t: number, hv: number): void;
  moeRoute(ids: number, weights: number, logits: number, m: number, e: number, topK: number, renorm: number, tmp: number): void;
  attention(out: number, q: number, qStride: number, kc: number, vc: number, pageTable: number, pageSize: number,
    start: number, nH: number, nKV: number, hd: number, u0: number, u1: number, scores: number): void;
  causalConv(out: number, x: number, window: number, w: number, wBf16: number, t: number, c: number, kw: number,
    scratch: number, c0: number, c1: number): void;
  gdnRecurrent(out: number, qkv: number, g: number, beta: number, state: number, scratch: number, t: number, hk: number,
    hv: number, dk: number, dv: number, h0: number, h1: number, tmp: number): void;
  gdnChunked(out: number, qkv: number, g: number, beta: number, state: number, t: number, hk: number, hv: number,
    dk: number, dv: number, h0: number, h1: number, tmp: number, pos0: number): void;
  chunkedTmpBytes(dk: number, dv: number): number;
}

/** build/kernels.wasm at the repository (package) root. */
export function wasmPath(): string {
  return fileURLToPath(new URL('../../../../build/kernels.wasm', import.meta.url));
}

export async function compileKernels(): Promise<WasmModule> {
  const path = wasmPath();
  if (!existsSync(path)) throw new Error(`${path} is missing: run \`npm run build\` (build:wasm compiles assembly/)`);
  return WA.compile(readFileSync(path));
}

/** Instantiate synchronously on a memory (used on the main thread and in workers). */
export function instantiate(module: WasmModule, memory: WasmMemory): KernelExports {
  const abort = (): never => {
    throw new Error('wasm kernel abort');
  };
  const inst = new WA.Instance(module, { env: { memory, abort } });
  return inst.exports as unknown as KernelExports;
}
