// The GPU memory-access model (access-model.ts) at M > 1 rows per step
// (scripts/gpu-batch-model.mjs): a dispatch's bytes split by what they scale with —
// weights once per tile of rows, activations per row, KV and recurrent state per sequence
// (and GDN states written per token: the verify path's scratch) — plus a compute bound
// (the shaders' f32 multiply-adds; WGSL reaches no tensor core), and the host's cost of
// the step's dispatches. At one row of one sequence every figure is the batch-1 model's.
import { estimate, type GpuSpec, type ModelledDispatch } from './access-model.js';

/** FP32 multiply-add throughput (FLOP/s, an FMA = 2) of the public spec sheets: H100 SXM
 * and H200 both 67 TFLOPS (non-tensor). Keyed by GpuSpec.name's first word. */
export const FP32_FLOPS: Readonly<Record<string, number>> = { H100: 67e12, H200: 67e12 };

export function fp32FlopsOf(gpu: GpuSpec): number {
  const f = FP32_FLOPS[gpu.name.split(' ')[0] ?? ''];
  if (f === undefined) throw new RangeError(`batch model: no FP32 throughput for GPU "${gpu.name}"`);
  return f;
}

/** What a dispatch's work scales with. Invariant: at rows = seqs = 1 and tiles = 1,
 * weightBytes + rowBytes + seqBytes + tokenStateBytes is the batch-1 model's bytes. */
export interface BatchParts {
  /** Weight bytes: read once per tile of rows (a workgroup runs one tile). */
  readonly weightBytes: number;
  /** Activation bytes in and out per row. */
  readonly rowBytes: number;
  /** Per sequence: KV read (attention), recurrent state read (GDN). */
  readonly seqBytes: number;
  /** Per row: a recurrent state written (decode: the working slot; verify: a scratch state a token). */
  readonly tokenStateBytes: number;
  /** Multiply-adds per row. */
  readonly macsPerRow: number;
  /** L1 sectors per main-loop iteration that each further row of a tile adds (its activation loads). */
  readonly rowL1Sectors: number;
}

/** The rows, sequences and tiles of one recorded dispatch. */
export interface BatchUse {
  readonly rows: number;
  readonly seqs: number;
  /** Tiles of rows the grid launches (grid z of a dense matmul: ceil(rows / tile)); 1 otherwise. */
  readonly tiles: number;
}

/** Tiles of `rows` rows at a tile of `tile` rows. */
export function tilesOf(rows: number, tile: number): number {
  if (!(rows >= 1 && tile >= 1)) throw new RangeError(`batch model: ${rows} rows in tiles of ${tile}`);
  return Math.ceil(rows / tile);
}

/** The bytes the dispatch moves at `use`. */
export function batchBytes(p: BatchParts, use: BatchUse): number {
  return p.weightBytes * use.tiles + (p.rowBytes + p.tokenStateBytes) * use.rows + p.seqBytes * use.seqs;
}

/** Weight bytes per row: falls as 1/rows while the rows fit one tile. */
export function weightBytesPerRow(p: BatchParts, use: BatchUse): number {
  return (p.weightBytes * use.tiles) / use.rows;
}

/** The batch-1 dispatch `d` (recorded grid, batch-1 bytes and load pattern) at `use`: its
 * bytes, and each main-loop iteration's L1 sectors with the tile's further rows' loads. */
export function atBatch(d: ModelledDispatch, p: BatchParts, use: BatchUse): ModelledDispatch {
  const rowsPerTile = use.rows / use.tiles;
  const it = d.iteration;
  const l1Sectors = it.l1Sectors + (p.weightBytes > 0 ? (rowsPerTile - 1) * p.rowL1Sectors : 0);
  return { ...d, bytes: batchBytes(p, use), iteration: { ...it, l1Sectors } };
}

export interface BatchEstimate {
  readonly us: number;
  readonly memoryUs: number;
  readonly computeUs: number;
  readonly bound: 'dram' | 'latency' | 'l1' | 'compute';
}

/** µs of the dispatch: max(the memory model's bound, multiply-adds on the SMs it keeps busy)
 * plus the dispatch gap. */
export function estimateAtBatch(d: ModelledDispatch, p: BatchParts, use: BatchUse, gpu: GpuSpec): BatchEstimate {
  const at = atBatch(d, p, use);
  const e = estimate(at, gpu);
  const memoryUs = e.us - gpu.gapUs;
  const computeUs = (1e6 * 2 * p.macsPerRow * use.rows) / (fp32FlopsOf(gpu) * (e.smsBusy / gpu.sms));
  const bound = computeUs > memoryUs ? 'compute' : e.bound;
  return { us: Math.max(memoryUs, computeUs) + gpu.gapUs, memoryUs, computeUs, bound };
}

/** A step's time with the host: the engine records and encodes a step, submits it and waits
 * for its read-back before recording the next (engine.ts: steps never overlap), so the
 * times add; `overlapped` is the bound if the host encoded the next step while the GPU ran. */
export function stepTime(gpuUs: number, dispatches: number, hostUsPerDispatch: number): { hostUs: number; serialUs: number; overlappedUs: number } {
  const hostUs = dispatches * hostUsPerDispatch;
  return { hostUs, serialUs: hostUs + gpuUs, overlappedUs: Math.max(hostUs, gpuUs) };
}

/** A step encoded and submitted in chunks of `chunk` dispatches (the encoder submits a chunk
 * while it records the next: the GPU runs chunk i while the host encodes chunk i + 1).
 * `gpuUs`: each dispatch's GPU µs in the step's order. Chunk i (1-based, its last dispatch
 * n_i) is submitted at host time n_i · h and runs on the GPU once submitted and once chunk
 * i − 1 is done: end_i = max(n_i · h, end_{i−1}) + its GPU µs. The step is end of the last
 * chunk: between the first chunk's host time + the GPU's (a GPU that never waits: the GPU
 * bound) and all the host time + the last chunk's GPU µs (a GPU that waits on the host
 * between chunks: the host bound); ≈ first chunk's host + max(remaining host, GPU). */
export function chunkedStepTime(gpuUs: readonly number[], hostUsPerDispatch: number, chunk: number): { chunks: number; firstChunkHostUs: number; chunkedUs: number } {
  if (!(Number.isInteger(chunk) && chunk >= 1) || !(hostUsPerDispatch >= 0)) throw new RangeError(`batch model: chunks of ${chunk} dispatches at ${hostUsPerDispatch} µs`);
  let end = 0;
  let chunks = 0;
  for (let start = 0; start < gpuUs.length; start += chunk) {
    const stop = Math.min(gpuUs.length, start + chunk);
    let us = 0;
    for (let i = start; i < stop; i++) us += gpuUs[i]!;
    end = Math.max(stop * hostUsPerDispatch, end) + us;
    chunks++;
  }
  return { chunks, firstChunkHostUs: Math.min(chunk, gpuUs.length) * hostUsPerDispatch, chunkedUs: end };
}

/** Expected tokens a speculative round commits with k drafts, each accepted independently
 * with probability p while the previous ones were (engine/speculative/accept-rate.ts), plus
 * the verify step's own token: 1 + p + … + p^k. */
export function expectedTokensPerRound(p: number, k: number): number {
  if (!(p >= 0 && p <= 1) || !(Number.isInteger(k) && k >= 0)) throw new RangeError(`batch model: accept rate ${p}, k ${k}`);
  let sum = 0;
  for (let i = 0; i <= k; i++) sum += p ** i;
  return sum;
}
