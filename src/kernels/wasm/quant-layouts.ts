// The wasm backend's repacked layouts of quantized weights (q8x4, q4kx4, q6kx4, q5kx4 and
// q40x4 / q41x4 / q50x4 / q51x4: assembly/q8x4.ts, q4kx4.ts, q6kx4.ts, q5kx4.ts, q32x4.ts):
// which GGML type packWeight repacks into which layout, its size, the kernel's format id,
// the repack export and the row dequantizer (embed). Every GGML type has one; the GGML-block
// kernels (assembly/qdecode.ts ids) still run a weight that was not packed.
import type { Weight, WeightDType } from '../types.js';
import { isQuantType, type QuantType } from '../quant/formats.js';
import { dequantizeRow } from '../quant/dequant.js';
import { dequantizeQ8u4Row, dequantizeQ8x4Row, q8x4Bytes } from '../quant/q8x4.js';
import { dequantizeQ4kx4Row, q4kx4Bytes } from '../quant/q4kx4.js';
import { dequantizeQ6kx4Row, q6kx4Bytes } from '../quant/q6kx4.js';
import { dequantizeQ32x4Row, q32x4Bytes, type Q32Type } from '../quant/q32x4.js';
import { dequantizeQ5kx4Row, q5kx4Bytes } from '../quant/q5kx4.js';
import type { KernelExports } from './module.js';

/** The repacked layouts' `Weight.layout` tags (layouts.ts's WasmLayout adds 'panel8'). */
export type RepackedLayout = 'q8x4' | 'q8u4' | 'q4kx4' | 'q6kx4' | 'q5kx4' | 'q40x4' | 'q41x4' | 'q50x4' | 'q51x4';

interface LayoutSpec {
  readonly layout: RepackedLayout;
  /** Format id of assembly/qmatmul.ts's dispatcher. */
  readonly id: number;
  /** GGML bytes of one block (the repack's per-thread scratch holds 4 rows of them). */
  readonly blockBytes: number;
  readonly blockSize: number;
  bytes(rows: number, cols: number): number;
  repack(ex: KernelExports, w: number, rows: number, k: number, tmp: number): void;
  dequantizeRow(data: Uint8Array, cols: number, r: number, dst: Float32Array): Float32Array;
}

/** Format ids of assembly/qdecode.ts for weights kept as GGML blocks. */
const GGML_ID: Readonly<Record<QuantType, number>> = { q8_0: 0, q4_0: 1, q4_1: 2, q5_0: 3, q5_1: 4, q4_k: 5, q5_k: 6, q6_k: 7 };

const REPACKED: Partial<Record<WeightDType, LayoutSpec>> = {
  q8_0: { layout: 'q8x4', id: 8, blockBytes: 34, blockSize: 32, bytes: q8x4Bytes, repack: (ex, ...a) => ex.repackQ8x4(...a), dequantizeRow: dequantizeQ8x4Row },
  q4_k: { layout: 'q4kx4', id: 9, blockBytes: 144, blockSize: 256, bytes: q4kx4Bytes, repack: (ex, ...a) => ex.repackQ4kx4(...a), dequantizeRow: dequantizeQ4kx4Row },
  q6_k: { layout: 'q6kx4', id: 10, blockBytes: 210, blockSize: 256, bytes: q6kx4Bytes, repack: (ex, ...a) => ex.repackQ6kx4(...a), dequantizeRow: dequantizeQ6kx4Row },
  q4_0: q32x4Spec('q4_0', 'q40x4', 18),
  q4_1: q32x4Spec('q4_1', 'q41x4', 20),
  q5_0: q32x4Spec('q5_0', 'q50x4', 22),
  q5_1: q32x4Spec('q5_1', 'q51x4', 24),
  q5_k: { layout: 'q5kx4', id: 16, blockBytes: 176, blockSize: 256, bytes: q5kx4Bytes, repack: (ex, ...a) => ex.repackQ5kx4(...a), dequantizeRow: dequantizeQ5kx4Row },
};

/** Q8_0's layout where the relaxed dot-add is AVX-VNNI (assembly/q8u4.ts; the backend's
 * `q8u4`): q8x4's size and scales, quants as column quads of w + 128; one kernel, every M. */
const Q8U4: LayoutSpec = { layout: 'q8u4', id: 24, blockBytes: 34, blockSize: 32, bytes: q8x4Bytes, repack: (ex, ...a) => ex.repackQ8u4(...a), dequantizeRow: dequantizeQ8u4Row };

/** Every repacked layout's spec, by layout name. */
const BY_LAYOUT: ReadonlyMap<string, LayoutSpec> = new Map([...Object.values(REPACKED), Q8U4].map((s) => [s.layout, s]));

/** The spec of the layout w is stored in (undefined: GGML blocks, or not quantized). */
export function storedSpec(w: Weight): LayoutSpec | undefined {
  return w.layout === undefined || !isQuantType(w.dtype) ? undefined : BY_LAYOUT.get(w.layout);
}

/** The spec of a 32-element-block format's repacked layout (assembly/q32x4.ts): kernel
 * format id = GGML id + 10, the repack export takes the GGML id. */
function q32x4Spec(type: Q32Type, layout: RepackedLayout, blockBytes: number): LayoutSpec {
  const ggml = GGML_ID[type];
  return {
    layout, id: ggml + 10, blockBytes, blockSize: 32, bytes: (rows, cols) => q32x4Bytes(type, rows, cols),
    repack: (ex, ...a) => ex.repackQ32x4(ggml, ...a), dequantizeRow: (data, cols, r, dst) => dequantizeQ32x4Row(type, data, cols, r, dst),
  };
}

/** Layouts whose M ≥ 4 kernels read the activations as interleaved quads
 * (interleaveQ4kx4Acts; q8 staging of 3·M·K bytes). */
const QUAD_ACTS: ReadonlySet<string> = new Set(['q8u4', 'q4kx4', 'q6kx4', 'q40x4', 'q41x4', 'q50x4', 'q51x4', 'q5kx4']);

/** Whether a weight's layout reads interleaved activation quads (see QUAD_ACTS). */
export function usesQuadActs(w: Weight): boolean {
  return w.layout !== undefined && QUAD_ACTS.has(w.layout);
}



/** The repacked layout packWeight gives `dtype` (Q8_0: q8u4 when `q8u4`, else q8x4), or
 * undefined (kept as GGML blocks). */
export function repackSpec(dtype: WeightDType, q8u4 = false): LayoutSpec | undefined {
  return dtype === 'q8_0' && q8u4 ? Q8U4 : REPACKED[dtype];
}

/** Bytes of a quantized weight after packWeight's repack (0: kept as GGML blocks). */
export function repackedBytes(dtype: WeightDType, rows: number, cols: number): number {
  return REPACKED[dtype]?.bytes(rows, cols) ?? 0;
}

/** Repack scratch bytes (4 rows of GGML blocks). */
export function repackTmpBytes(spec: LayoutSpec, cols: number): number {
  return 4 * (cols / spec.blockSize) * spec.blockBytes;
}

/** The weight after an in-place repack: the same memory, viewed at the layout's size. */
export function repackedView(w: Weight, spec: LayoutSpec): Weight {
  const data = new Uint8Array(w.data.buffer, w.data.byteOffset, spec.bytes(w.rows, w.cols));
  return { dtype: w.dtype, rows: w.rows, cols: w.cols, data, layout: spec.layout };
}

/** Kernel families of one repacked layout: the same bits, different speed per CPU
 * (q8x4: assembly/q8x4.ts 'narrow', 4 columns per pass, or q8x4wide.ts 'wide', 8; q4kx4 /
 * q6kx4: q4kx4.ts / q6kx4.ts 'narrow' or q4kx4wide.ts / q6kx4wide.ts 'wide', 8 columns per
 * pass, single rows only; q5kx4: q5kx4.ts per group 'narrow', or four weight streams per
 * thread 'wide', single rows of the relaxed builds only). */
export type QuantKernelFamily = 'narrow' | 'wide';
export type Q8x4Kernel = QuantKernelFamily;

/** Which kernel family runs the q8x4 matmul, for M = 1 (decode) and for M = 2, 3 (M ≥ 4:
 * always narrow), and the q4kx4, q6kx4 and q5kx4 matmuls at M = 1. Fixed for a backend's lifetime
 * (chosen at start-up by calibrate.ts; q8u4 has one kernel). */
export interface QuantKernelChoice {
  readonly q8x4M1: QuantKernelFamily;
  readonly q8x4Mn: QuantKernelFamily;
  readonly q4kx4M1: QuantKernelFamily;
  readonly q6kx4M1: QuantKernelFamily;
  readonly q5kx4M1: QuantKernelFamily;
}

export const DEFAULT_QUANT_KERNELS: QuantKernelChoice = { q8x4M1: 'wide', q8x4Mn: 'wide', q4kx4M1: 'wide', q6kx4M1: 'wide', q5kx4M1: 'wide' };

/** Format ids of assembly/qmatmul.ts's 'wide' kernels (Q8X4W, Q4KX4W, Q6KX4W, Q5KX4W): clear
 * of the repacked ids (GGML id + 10) and of q8u4's (24). */
const Q8X4_WIDE_ID = 20;
const Q4KX4_WIDE_ID = 21;
const Q6KX4_WIDE_ID = 22;
const Q5KX4_WIDE_ID = 23;

/** assembly/qmatmul.ts format id of a quantized weight (its layout's, else its type's);
 * for q8x4, q4kx4 and q6kx4, the family `choice` names for this M. */
export function quantFormatId(w: Weight, m = 1, choice: QuantKernelChoice = DEFAULT_QUANT_KERNELS): number {
  const spec = storedSpec(w);
  if (!spec) return GGML_ID[w.dtype as QuantType];
  // M ≥ 4 stays narrow: its entry point runs blocks of 4 rows × 8 columns over two weight
  // streams (q8x4.ts pairRows4); the wide family's kernels are single-row ones
  if (spec.layout === 'q8x4' && m < 4 && (m === 1 ? choice.q8x4M1 : choice.q8x4Mn) === 'wide') return Q8X4_WIDE_ID;
  if (spec.layout === 'q4kx4' && m === 1 && choice.q4kx4M1 === 'wide') return Q4KX4_WIDE_ID;
  if (spec.layout === 'q6kx4' && m === 1 && choice.q6kx4M1 === 'wide') return Q6KX4_WIDE_ID;
  if (spec.layout === 'q5kx4' && m === 1 && choice.q5kx4M1 === 'wide') return Q5KX4_WIDE_ID;
  return spec.id;
}

/** Row r of a quantized weight as f32, in whichever layout it is stored. */
export function dequantizeStoredRow(w: Weight, r: number, dst: Float32Array): Float32Array {
  const spec = storedSpec(w);
  const data = w.data as Uint8Array;
  if (spec) return spec.dequantizeRow(data, w.cols, r, dst);
  return dequantizeRow(w.dtype as QuantType, data, w.cols, r, dst);
}
