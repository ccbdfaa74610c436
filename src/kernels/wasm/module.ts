// Loading build/kernels.wasm (compiled from assembly/ by `npm run build:wasm`) and the
// typed view of its exports. Pointers are byte offsets into the instance's (shared,
// imported) memory; JS numbers ≥ 2³¹ pass through ToInt32 and arrive as the same u32 bits.
import { readFileSync, existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import v8 from 'node:v8';
import { DeltaserveError } from '../../util/errors.js';

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
  Module: new (bytes: Uint8Array) => WasmModule;
  compile(bytes: Uint8Array): Promise<WasmModule>;
  validate(bytes: Uint8Array): boolean;
}
export const WA = (globalThis as unknown as { WebAssembly: WasmApi }).WebAssembly;

export interface KernelExports {
  heapBase(): number;
  packPanels(w: number, panels: number, k: number, elemBytes: number, tmp: number): void;
  matmulBf16(out: number, x: number, w: number, m: number, n: number, k: number, n0: number, n1: number, tmp: number): void;
  matmulF16(out: number, x: number, w: number, m: number, n: number, k: number, n0: number, n1: number, tmp: number): void;
  panelTmpBytes(k: number): number;
  matmulF32(out: number, x: number, w: number, m: number, n: number, k: number, n0: number, n1: number, tmp: number): void;
  streamRead(p: number, bytes: number): number;
  rmsNorm(out: number, x: number, w: number, wBf16: number, r0: number, r1: number, d: number, eps: number, zc: number): void;
  gatedRmsNorm(out: number, o: number, z: number, w: number, wBf16: number, r0: number, r1: number, d: number, eps: number, order: number, hv: number): void;
  rope(x: number, positions: number, t: number, heads: number, headDim: number, invFreq: number, half: number, scale: number, stride: number): void;
  mulSilu(out: number, a: number, b: number, lo: number, hi: number): void;
  mulSigmoid(out: number, a: number, b: number, lo: number, hi: number): void;
  add(out: number, a: number, b: number, n: number): void;
  layerNorm(out: number, x: number, w: number, b: number, r0: number, r1: number, d: number, eps: number): void;
  biasAct(out: number, x: number, bias: number, r0: number, r1: number, d: number, act: number): void;
  gdnGates(g: number, beta: number, a: number, b: number, aLog: number, aLogBf16: number, dtBias: number, dtBf16: number,
    t: number, hv: number): void;
  argmax(out: number, x: number, m: number, n: number, stride: number): void;
  moeRoute(ids: number, weights: number, logits: number, m: number, e: number, topK: number, renorm: number, tmp: number): void;
  attention(out: number, q: number, qStride: number, kc: number, vc: number, pageTable: number, pageSize: number,
    start: number, nH: number, nKV: number, hd: number, u0: number, u1: number, scratch: number, per: number, qb: number,
    t: number): void;
  attentionTmpBytes(rows: number, nMax: number): number;
  causalConv(out: number, x: number, window: number, w: number, wBf16: number, t: number, c: number, kw: number,
    scratch: number, c0: number, c1: number): void;
  causalConvSeqs(desc: number, count: number, w: number, wBf16: number, c: number, kw: number, c0: number, c1: number): void;
  gdnRecurrent(out: number, qkv: number, g: number, beta: number, state: number, scratch: number, t: number, hk: number,
    hv: number, dk: number, dv: number, h0: number, h1: number, tmp: number): void;
  gdnRecurrentSeqs(desc: number, count: number, hk: number, hv: number, dk: number, dv: number, u0: number, u1: number,
    tmp: number): void;
  gdnChunked(out: number, qkv: number, g: number, beta: number, state: number, t: number, hk: number, hv: number,
    dk: number, dv: number, h0: number, h1: number, tmp: number, pos0: number): void;
  chunkedTmpBytes(dk: number, dv: number): number;
  sampleRows(desc: number, r0: number, r1: number, tmp: number): void;
  sampleTmpBytes(n: number): number;
  quantizeActs(x: number, m: number, k: number, q16: number, q8: number, d: number, s: number): void;
  qmatmul(type: number, out: number, q16: number, q8: number, d: number, s: number, w: number, m: number, n: number, k: number,
    n0: number, n1: number, tmp: number): void;
  qmatmulTmpBytes(k: number): number;
  matmulGroup(desc: number, count: number, x: number, q16: number, d: number, s: number, m: number, k: number, lo: number,
    hi: number, tmp: number): void;
  repackQ8x4(w: number, rows: number, k: number, tmp: number): void;
  interleaveActs4(q16: number, m: number, k: number, x4: number): void;
  repackQ4kx4(w: number, rows: number, k: number, tmp: number): void;
  interleaveQ4kx4Acts(q16: number, q8: number, m: number, k: number): void;
  repackQ6kx4(w: number, rows: number, k: number, tmp: number): void;
  q6kx4ActSums(q8: number, m: number, k: number): void;
  quantizeBlocks(type: number, src: number, bf16: number, dst: number, lo: number, hi: number, tmp: number): void;
  quantizeTmpBytes(): number;
  repackQ32x4(type: number, w: number, rows: number, k: number, tmp: number): void;
  repackQ5kx4(w: number, rows: number, k: number, tmp: number): void;
  repackQ8u4(w: number, rows: number, k: number, tmp: number): void;
}

/** The builds of assembly/: `fma` (relaxed SIMD: f32x4.relaxed_madd, a fused multiply-add
 * on x86-64 with FMA3), `vnni` (the fma build whose unsigned-quant kernels, Q4_K and Q6_K,
 * accumulate i32x4.relaxed_dot_i8x16_i7x16_add_s straight into i32 lanes: one `vpdpbusd`
 * where V8 lowers it to AVX-VNNI, five instructions where it does not; and where it is
 * AVX-VNNI, the backend packs Q8_0 into q8u4, whose kernel feeds it w + 128, outside i7:
 * exact only there) and `plain`
 * (SIMD128 only: multiply then add). All have the same exports and the same reduction
 * orders; fma and vnni compute the same bits (the same exact integers), plain differs from
 * them in the rounding of mac(). */
export type KernelVariant = 'fma' | 'vnni' | 'plain';

const BUILD_FILES: Record<KernelVariant, string> = { plain: 'kernels.wasm', fma: 'kernels-fma.wasm', vnni: 'kernels-vnni.wasm' };

/** build/kernels[-fma|-vnni].wasm at the repository (package) root. */
export function wasmPath(variant: KernelVariant = 'plain'): string {
  return fileURLToPath(new URL(`../../../../build/${BUILD_FILES[variant]}`, import.meta.url));
}

function readBuild(variant: KernelVariant): Uint8Array {
  const path = wasmPath(variant);
  if (!existsSync(path)) {
    throw new DeltaserveError('bad_config', `the WebAssembly kernels are missing: ${path} does not exist. In a source checkout ` +
      'build them with `npm run build`; an installed package ships them (reinstall it); or run with --kernels ref (slower)');
  }
  return readFileSync(path);
}

/** Whether this runtime accepts the relaxed-SIMD build. Node 20 (V8 11.3) ships relaxed
 * SIMD behind --experimental-wasm-relaxed-simd; V8 flags are process-wide, so turning it on
 * here, before any module using it is compiled, covers the worker threads too. */
function relaxedSimdUsable(bytes: Uint8Array): boolean {
  if (WA.validate(bytes)) return true;
  v8.setFlagsFromString('--experimental-wasm-relaxed-simd');
  return WA.validate(bytes);
}

/** `(a, b) => lane 0 of i32x4.relaxed_dot_i8x16_i7x16_add_s(splat a, splat b, 0)`: 36 bytes. */
const DOT_PROBE = new Uint8Array([
  0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version
  0x01, 0x07, 0x01, 0x60, 0x02, 0x7f, 0x7f, 0x01, 0x7f, // type: (i32, i32) → i32
  0x03, 0x02, 0x01, 0x00, // one function of that type
  0x07, 0x05, 0x01, 0x01, 0x64, 0x00, 0x00, // export "d"
  0x0a, 0x16, 0x01, 0x14, 0x00, // code: one body of 20 bytes, no locals
  0x20, 0x00, 0xfd, 0x0f, 0x20, 0x01, 0xfd, 0x0f, // i8x16.splat a, i8x16.splat b
  0x41, 0x00, 0xfd, 0x11, // i32x4.splat 0
  0xfd, 0x93, 0x02, 0xfd, 0x1b, 0x00, 0x0b, // relaxed dot-add, extract lane 0, end
]);

/** Lane 0 of the relaxed i8×i7 dot-add on splats of a and b (outside i7 for b), compiled by
 * the optimising tier the kernels run on; null where relaxed SIMD is not accepted. */
export function dotAddProbe(a: number, b: number): number | null {
  try {
    v8.setFlagsFromString('--no-liftoff'); // what the kernels run on (compileKernels)
    const inst = new WA.Instance(new WA.Module(DOT_PROBE), {});
    const { d } = inst.exports as { d: (a: number, b: number) => number };
    return d(a, b);
  } catch {
    return null;
  }
}

/** Whether V8 lowers the relaxed i8×i7 dot-add to AVX-VNNI here (`vpdpbusd`: the second
 * operand unsigned, products summed in i32 without saturation). Read from its result on an
 * operand outside i7, where the lowerings differ: vpdpbusd gives 4·127·255 = 129540;
 * `vpmaddubsw` + `vpmaddwd` saturates each pair sum (65534); a signed lowering (ARM sdot)
 * gives −508. The kernels feed it operands within i7, where all agree, except q8u4's
 * (assembly/q8u4.ts), which the backend uses only where this holds; so this picks the
 * faster code and never changes a result. */
export function dotAddIsVnni(): boolean {
  return dotAddProbe(127, 255) === 129540 && dotAddProbe(-128, 255) === -130560;
}

/** Pick the variant: `DELTASERVE_WASM_FMA=0|1` forces plain or fma, `DELTASERVE_WASM_FMA=vnni`
 * the vnni build; by default vnni when the runtime validates relaxed SIMD and lowers its
 * dot-add to AVX-VNNI, else fma when it validates relaxed SIMD, else plain. */
export function chooseVariant(requested: KernelVariant | 'auto' = 'auto'): { variant: KernelVariant; bytes: Uint8Array } {
  const env = process.env['DELTASERVE_WASM_FMA'];
  const forced = env === '0' ? 'plain' : env === '1' ? 'fma' : env === 'vnni' ? 'vnni' : 'auto';
  const want = requested !== 'auto' ? requested : forced;
  if (want === 'plain') return { variant: 'plain', bytes: readBuild('plain') };
  const fma = readBuild('fma');
  if (relaxedSimdUsable(fma)) {
    if (want === 'vnni' || (want === 'auto' && dotAddIsVnni())) return { variant: 'vnni', bytes: readBuild('vnni') };
    return { variant: 'fma', bytes: fma };
  }
  if (want !== 'auto') throw new Error(`this runtime rejects the relaxed-SIMD kernel builds (kernels-${want}.wasm)`);
  return { variant: 'plain', bytes: readBuild('plain') };
}

export async function compileKernels(requested: KernelVariant | 'auto' = 'auto'): Promise<{ module: WasmModule; variant: KernelVariant }> {
  const { variant, bytes } = chooseVariant(requested);
  // Compile straight to optimised code: the kernels are small, and the baseline tier
  // (Liftoff) runs them several times slower until tier-up, which skews first requests
  // and benchmarks.
  v8.setFlagsFromString('--no-liftoff');
  return { module: await WA.compile(bytes), variant };
}

/** Instantiate synchronously on a memory (used on the main thread and in workers). */
export function instantiate(module: WasmModule, memory: WasmMemory): KernelExports {
  const abort = (): never => {
    throw new Error('wasm kernel abort');
  };
  const inst = new WA.Instance(module, { env: { memory, abort } });
  return inst.exports as unknown as KernelExports;
}
