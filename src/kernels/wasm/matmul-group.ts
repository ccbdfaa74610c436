// How the wasm backend splits a matmul over the pool, the activation buffers of a quantized
// matmul, and the group form (Kernels.matmulGroup): several weights of one input x in ONE
// pool run (assembly/matmulgroup.ts), x quantized once for all the quantized ones.
//
// Exactness (split / batch invariance, DESIGN.md §8): a group gives each weight exactly
// the chunks a separate matmul call gives it (`matmulSplit`: the same count, so the same
// column ranges), the same export with the same format id (quantFormatId for the same M and
// kernel choice) and activation buffers whose bytes — every byte the kernel reads — equal
// the separate call's (`stageQuantActs`). So every output element is computed by the same
// code on the same operands as alone; only the launch and the quantization are shared.
import type { GroupMatmul, Weight, WeightDType } from '../types.js';
import { isQuantType } from '../quant/formats.js';
import { storedQuantBytes } from './layouts.js';
import { quantFormatId, usesQuadActs, type QuantKernelChoice } from './quant-layouts.js';
import type { Arena } from './memory.js';
import type { Operands } from './operands.js';
import { packArgs } from './commands.js';
import { Cmd } from './exec.js';

// A matmul below this many weight elements (~10–20 µs on one thread) runs on the main
// thread alone: a pool launch costs a few µs and, on a busy machine, far more.
export const PAR_MATMUL = 1 << 18;
// Matmul weight bytes per pool chunk. Single rows (M < 4) are bound by the memory's stream
// rate: long sequential streams keep the prefetchers busy (M = 1 on 2 threads: ~54 GB/s
// with 2 MiB chunks vs ~47 with 512 KiB, same run). Blocks of rows are compute-bound, and
// there smaller chunks win: the threads claim a run in even shares (a 4 MB weight was 2
// chunks, so one slow thread stalled the other), and a chunk's weights stay in L2 while
// its row blocks pass over them. AMD EPYC (Zen 4), 2 threads, 2 MiB → 512 KiB alternating
// in one process: 3584×1024 at M = 512 Q8_0 36.7 → 41.7 GMAC/s, F16 41.0 → 42.8, Q4_K
// 60.4 → 71.5, at M = 8 Q8_0 27.9 → 32.9; qwen3.5-0.8b Q8_0 prefill of 512 tokens
// 6925 → 6289 ms, 8 streams 187 → 164 ms a step (128 KiB: 6742 and 175).
const STREAM_CHUNK_BYTES = 2 << 20;
const BLOCK_CHUNK_BYTES = 512 << 10;
/** Rows from which a matmul takes BLOCK_CHUNK_BYTES chunks. */
const BLOCK_ROWS = 4;
/** The pool's chunk count limit (the CLAIM word's low 16 bits). */
const MAX_CHUNKS = 0xffff;

export function elemBytes(dtype: WeightDType): number {
  if (isQuantType(dtype)) throw new Error(`elemBytes: ${dtype} has no per-element size`);
  return dtype === 'f32' ? 4 : 2;
}

/** The chunks of a matmul of M rows against w on `threads` threads: output columns in
 * units of 8 (panels) or 4 (quantized groups), ≥ 1 chunk per thread, ~STREAM_CHUNK_BYTES
 * (M < BLOCK_ROWS) or ~BLOCK_CHUNK_BYTES of weight each; 1 chunk (the main thread alone)
 * below PAR_MATMUL or on one thread. Chunk c covers columns share(w.rows, c, chunks, unit)
 * (commands.ts). Every kernel computes a column the same way whatever range it is in, so
 * the split never changes a result (test/matmul-group.test.ts, kernels-invariance). */
export function matmulSplit(w: Weight, threads: number, m: number): { readonly chunks: number; readonly unit: 4 | 8 } {
  const n = w.rows;
  const quant = isQuantType(w.dtype);
  const unit = quant ? 4 : 8;
  const units = Math.ceil(n / unit);
  const bytes = quant ? storedQuantBytes(w) : n * w.cols * elemBytes(w.dtype);
  if (threads < 2 || n * w.cols < PAR_MATMUL || units < 2) return { chunks: 1, unit };
  const chunkBytes = m < BLOCK_ROWS ? STREAM_CHUNK_BYTES : BLOCK_CHUNK_BYTES;
  return { chunks: Math.min(units, Math.max(threads, Math.ceil(bytes / chunkBytes)), MAX_CHUNKS), unit };
}

/** Activations of quantized matmuls of x [M, K] (pointer xp, K a multiple of 32) against
 * `weights`, staged in arena a: q16 [M, K] i16, d [M·K/32], s [2, M·K/32] (quantizeActs), and each
 * weight's q8 buffer (`q8For`). The q8 bytes a weight's kernel reads are the same as in a
 * call for that weight alone (the bytes a separate call stages but its kernel never reads
 * may differ):
 *  - GGML blocks: the int8 quants, [0, MK);
 *  - quad layouts (usesQuadActs): the int8 quants, then (M ≥ 4) the rows interleaved by 4
 *    at [MK, 3MK) (interleaveQ4kx4Acts), and for q6kx4 the sums of 16 quants at 3MK (i32
 *    −32·X in the vnni build, i16 X in the others: MK/4 bytes staged);
 *  - q8x4: M < 4 the int8 quants; M ≥ 4 interleaveActs4 of q16 (rows [0, 4⌊M/4⌋) as i16,
 *    [0, 8K⌊M/4⌋)) written over the int8 copy, which it covers (8K⌊M/4⌋ ≥ MK) — so in a
 *    buffer of its own, with the same bytes, when another layout needs the int8 quants. */
export function stageQuantActs(a: Arena, xp: number, m: number, k: number, weights: readonly Weight[]):
  { q16: number; d: number; s: number; q8For(w: Weight): number } {
  const mk = m * k;
  const nb = mk / 32;
  const q8x4 = weights.some((w) => w.layout === 'q8x4');
  const quad = weights.some(usesQuadActs);
  const sums = weights.some((w) => w.layout === 'q6kx4');
  const onlyQ8x4 = weights.every((w) => w.layout === 'q8x4');
  const q16 = a.stage(mk * 2);
  const q8 = a.stage(Math.max(q8x4 && onlyQ8x4 ? 2 * mk : mk, quad ? 3 * mk + (sums ? mk / 4 : 0) : 0));
  const d = a.stage(nb * 4);
  const s = a.stage(nb * 8); // i32 sums, then the same as f32 (assembly/qdecode.ts sumsF32)
  a.exports.quantizeActs(xp, m, k, q16, q8, d, s);
  if (quad && m >= 4) a.exports.interleaveQ4kx4Acts(q16, q8, m, k);
  if (sums) a.exports.q6kx4ActSums(q8, m, k);
  let x4 = q8; // q8x4's buffer
  if (q8x4 && m >= 4) {
    if (!onlyQ8x4) x4 = a.stage(2 * mk);
    a.exports.interleaveActs4(q16, m, k, x4);
  }
  return { q16, d, s, q8For: (w) => (w.layout === 'q8x4' ? x4 : q8) };
}

/** Kinds of a group entry (assembly/matmulgroup.ts GROUP_*). */
const KIND: Readonly<Record<string, number>> = { f32: 0, bf16: 1, f16: 2 };
const KIND_QUANT = 3;
/** i32 slots of one descriptor (assembly/matmulgroup.ts: [kind, type, out, w, n, q8, first, chunks]). */
const DESC_INTS = 8;

/** What the group needs of the backend. */
export interface GroupHost {
  readonly threads: number;
  readonly args: Float64Array;
  /** Run MATMUL_GROUP: on the pool when `parallel`, else every chunk on this thread. */
  run(cmd: number, arena: Arena, parallel: boolean, chunks: number): void;
}

/** Whether a group of these weights fits one run (≤ MAX_CHUNKS chunks). */
export function groupFits(group: readonly GroupMatmul[], threads: number, m: number): boolean {
  let chunks = 0;
  for (const g of group) chunks += matmulSplit(g.w, threads, m).chunks;
  return chunks <= MAX_CHUNKS;
}

/** out_j = x · W_jᵀ for every entry, as one MATMUL_GROUP run in arena `arena` (every
 * weight lives there; dense ones packed), quantized weights on the kernel families of
 * `choice`. x: [M, K]; K = every w.cols. */
export function runMatmulGroup(host: GroupHost, choice: QuantKernelChoice, ops: Operands, arena: Arena, x: Float32Array, m: number, k: number,
  group: readonly GroupMatmul[]): void {
  const quant = group.filter((g) => isQuantType(g.w.dtype)).map((g) => g.w);
  const dense = group.some((g) => !isQuantType(g.w.dtype));
  const tmp = Math.max(quant.length > 0 ? arena.exports.qmatmulTmpBytes(k) : 0, dense ? arena.exports.panelTmpBytes(k) : 0);
  const c = ops.begin(arena, tmp, host.threads);
  const xp = c.in(x, m * k);
  const acts = quant.length > 0 ? stageQuantActs(c.arena, xp, m, k, quant) : null;
  const descPtr = c.arena.stage(group.length * DESC_INTS * 4);
  const desc = c.arena.i32(descPtr, group.length * DESC_INTS);
  let first = 0;
  let work = 0;
  for (let j = 0; j < group.length; j++) {
    const { out, w } = group[j]!;
    const n = w.rows;
    const isQuant = isQuantType(w.dtype);
    if (!isQuant && w.layout !== 'panel8') throw new Error(`wasm matmulGroup: weight [${n}, ${w.cols}] is not packed (call packWeight once after loading it)`);
    const { chunks } = matmulSplit(w, host.threads, m);
    const o = j * DESC_INTS;
    desc[o] = isQuant ? KIND_QUANT : KIND[w.dtype]!;
    desc[o + 1] = isQuant ? quantFormatId(w, m, choice) : 0;
    desc[o + 2] = c.out(out, m * n) | 0; // pointers as u32 bits
    desc[o + 3] = c.weight(w) | 0;
    desc[o + 4] = n;
    desc[o + 5] = acts && isQuant ? acts.q8For(w) | 0 : 0;
    desc[o + 6] = first;
    desc[o + 7] = chunks;
    first += chunks;
    work += n * k;
  }
  packArgs(host.args, 'MATMUL_GROUP', {
    desc: descPtr, count: group.length, x: xp, q16: acts?.q16 ?? 0, d: acts?.d ?? 0, s: acts?.s ?? 0, m, k, chunks: first,
    tmpBase: c.tmp.base, tmpStride: c.tmp.stride,
  });
  host.run(Cmd.MATMUL_GROUP, c.arena, first >= 2 && work >= PAR_MATMUL, first);
  c.end();
}
