// Calibration of the quantized matmul kernel families. Every family computes the same
// bits (exact integer sums, the same f32 chain: assembly/qmatmul.ts), but which one is
// fastest depends on the CPU and on V8's code for it, so each backend times them once, on
// all its threads, and keeps the winner for its lifetime. Only the formats of the loaded
// model's weights are timed, once they are loaded (the probe weight is allocated after them
// and given back; a BF16 model times none, saving ~0.1 s a format at start).
// DELTASERVE_Q8X4, DELTASERVE_Q4KX4, DELTASERVE_Q6KX4 and DELTASERVE_Q5KX4 (narrow|wide)
// skip the timing of their layout and force a family.
import type { Weight } from '../types.js';
import type { QuantKernelChoice, QuantKernelFamily } from './quant-layouts.js';

/** The part of the backend calibration drives (WasmKernels). */
export interface Calibratable {
  allocWeight(dtype: ProbeType, rows: number, cols: number): { weight: Weight; bytes: Uint8Array };
  packWeight(w: Weight): Weight;
  alloc(n: number): Float32Array;
  matmul(out: Float32Array, x: Float32Array, w: Weight, m: number): void;
  setQuantKernels(choice: QuantKernelChoice): void;
  readonly quantKernelChoice: QuantKernelChoice;
  /** Whether Q8_0 packs into q8u4 (one kernel: its q8x4 families are not timed). */
  readonly q8u4: boolean;
  /** Give back the memory of a view allocated last (a no-op otherwise). */
  releaseLast(view: ArrayBufferView): void;
}

export interface CalibrationResult {
  readonly choice: QuantKernelChoice;
  /** Fastest ms of one M = 1 matmul on the q8x4 probe weight over the rounds, per family
   * (empty when forced, or when Q8_0 packs into q8u4). */
  readonly q8x4M1Ms: Partial<Record<QuantKernelFamily, number>>;
  /** The same on the q4kx4, q6kx4 and q5kx4 probe weights (empty when forced). */
  readonly q4kx4M1Ms: Partial<Record<QuantKernelFamily, number>>;
  readonly q6kx4M1Ms: Partial<Record<QuantKernelFamily, number>>;
  readonly q5kx4M1Ms: Partial<Record<QuantKernelFamily, number>>;
  /** Whether every layout's family was forced by its environment variable. */
  readonly forced: boolean;
}

const FAMILIES: readonly QuantKernelFamily[] = ['narrow', 'wide'];
export type ProbeType = 'q8_0' | 'q4_k' | 'q6_k' | 'q5_k';
export const PROBE_TYPES: readonly ProbeType[] = ['q8_0', 'q4_k', 'q6_k', 'q5_k'];

/** One layout's probe: a synthetic weight larger than any L3 here, so it streams from memory
 * as a decode step does (the families rank differently in cache: the wide q8x4 one is 14%
 * faster on an L3-resident 4 MB weight and was 1.9× slower out of cache before its streams
 * were made long). */
interface Probe {
  readonly env: string;
  readonly dtype: ProbeType;
  readonly rows: number;
  readonly cols: number;
  /** GGML bytes of one block, and the byte offsets of its f16 scales (set to 2^-7). */
  readonly blockBytes: number;
  readonly f16At: readonly number[];
  /** The choice with this layout's M = 1 (and, for q8x4, M = 2, 3) family set to f. */
  set(c: QuantKernelChoice, f: QuantKernelFamily): QuantKernelChoice;
}

// q8x4: 65536×1024 Q8_0 (75 MB); q4kx4: 32768×2048 Q4_K (40 MB); q6kx4: 32768×2048 Q6_K
// (56 MB); q5kx4: 32768×2048 Q5_K (48 MB).
// 7 rounds of all four take ~0.4 s on a quiet 2-core machine.
const PROBES: readonly Probe[] = [
  { env: 'DELTASERVE_Q8X4', dtype: 'q8_0', rows: 65536, cols: 1024, blockBytes: 34, f16At: [0], set: (c, f) => ({ ...c, q8x4M1: f, q8x4Mn: f }) },
  { env: 'DELTASERVE_Q4KX4', dtype: 'q4_k', rows: 32768, cols: 2048, blockBytes: 144, f16At: [0, 2], set: (c, f) => ({ ...c, q4kx4M1: f }) },
  { env: 'DELTASERVE_Q6KX4', dtype: 'q6_k', rows: 32768, cols: 2048, blockBytes: 210, f16At: [208], set: (c, f) => ({ ...c, q6kx4M1: f }) },
  { env: 'DELTASERVE_Q5KX4', dtype: 'q5_k', rows: 32768, cols: 2048, blockBytes: 176, f16At: [0, 2], set: (c, f) => ({ ...c, q5kx4M1: f }) },
];
const ROUNDS = 7;

/** Bytes of memory the probes need (the larger weight, its activations and output). */
export const PROBE_BYTES = Math.max(
  (65536 / 4) * (1024 / 32) * 144 + 4 * (65536 + 1024),
  (32768 / 4) * (2048 / 256) * 608 + 4 * (32768 + 2048),
  (32768 / 4) * (2048 / 256) * 848 + 4 * (32768 + 2048),
  (32768 / 4) * (2048 / 256) * 736 + 4 * (32768 + 2048),
);

function forcedFamily(env: string): QuantKernelFamily | null {
  const v = process.env[env];
  if (v === undefined || v === '') return null;
  if (v !== 'narrow' && v !== 'wide') throw new Error(`${env} must be narrow or wide (got "${v}")`);
  return v;
}


/** Valid GGML blocks: pseudo-random bytes (a 64 KiB pattern repeated), every f16 scale 2^-7. */
function fillProbe(bytes: Uint8Array, p: Probe): void {
  const chunk = new Uint8Array(65536);
  let seed = 12345;
  for (let i = 0; i < chunk.length; i++) {
    seed = (seed * 1103515245 + 12345) >>> 0;
    chunk[i] = seed >>> 24;
  }
  for (let o = 0; o < bytes.length; o += chunk.length) bytes.set(chunk.subarray(0, Math.min(chunk.length, bytes.length - o)), o);
  const blocks = (p.rows * p.cols) / (p.dtype === 'q8_0' ? 32 : 256);
  for (let b = 0; b < blocks; b++) {
    for (const at of p.f16At) {
      bytes[b * p.blockBytes + at] = 0x00;
      bytes[b * p.blockBytes + at + 1] = 0x20;
    }
  }
}

/** Fastest ms per family of one M = 1 matmul on the probe's weight (rounds alternate between
 * the families, so a machine whose load changes slows both alike). The fastest round, not
 * the median: other processes only add time, and on a loaded 2-core machine the median
 * picked the family 1.7× slower (measured: q4kx4 'narrow'). The probe's memory is given
 * back afterwards; the backend's choice is left as `base`. */
function timeFamilies(k: Calibratable, p: Probe, base: QuantKernelChoice): Record<QuantKernelFamily, number> {
  const { weight, bytes } = k.allocWeight(p.dtype, p.rows, p.cols);
  fillProbe(bytes, p);
  const w = k.packWeight(weight);
  const x = k.alloc(p.cols);
  for (let i = 0; i < x.length; i++) x[i] = Math.sin(i * 0.37);
  const out = k.alloc(p.rows);
  const times: Record<QuantKernelFamily, number[]> = { narrow: [], wide: [] };
  for (let r = 0; r <= ROUNDS; r++) {
    for (const f of FAMILIES) {
      k.setQuantKernels(p.set(base, f));
      const t0 = performance.now();
      k.matmul(out, x, w, 1);
      if (r > 0) times[f].push(performance.now() - t0); // round 0: warm-up
    }
  }
  k.setQuantKernels(base);
  k.releaseLast(out); // newest first: out, x, then the weight
  k.releaseLast(x);
  k.releaseLast(w.data);
  return { narrow: Math.min(...times.narrow), wide: Math.min(...times.wide) };
}

/** Time the families of each layout of `types` on a synthetic weight (unless forced by its
 * variable; every variable is checked and applied whatever `types`), install the fastest,
 * return the timings. `prev`: an earlier result whose timed layouts are kept, not re-timed. */
export function calibrateQuantKernels(k: Calibratable, types: ReadonlySet<ProbeType> = new Set(PROBE_TYPES),
  prev: CalibrationResult | null = null): CalibrationResult {
  let choice = k.quantKernelChoice;
  const ms: Partial<Record<QuantKernelFamily, number>>[] = [];
  let forcedAll = true;
  const before = prev ? [prev.q8x4M1Ms, prev.q4kx4M1Ms, prev.q6kx4M1Ms, prev.q5kx4M1Ms] : [];
  for (const [i, p] of PROBES.entries()) {
    const forced = forcedFamily(p.env);
    if (forced) {
      choice = p.set(choice, forced);
      ms.push({});
      continue;
    }
    if (p.dtype === 'q8_0' && k.q8u4) { // q8u4 has one kernel
      ms.push({});
      continue;
    }
    forcedAll = false;
    const timed = before[i];
    if (timed && Object.keys(timed).length > 0) { // an earlier call chose it
      ms.push(timed);
      continue;
    }
    if (!types.has(p.dtype)) { // not in the model: the default family, untimed
      ms.push({});
      continue;
    }
    const t = timeFamilies(k, p, choice);
    // q8x4 at M > 1: the families differ only in the rows left over after blocks of 4 (the
    // same single-row kernels), so the M = 1 winner serves both
    choice = p.set(choice, t.wide <= t.narrow ? 'wide' : 'narrow');
    ms.push(t);
  }
  k.setQuantKernels(choice);
  return { choice, q8x4M1Ms: ms[0]!, q4kx4M1Ms: ms[1]!, q6kx4M1Ms: ms[2]!, q5kx4M1Ms: ms[3]!, forced: forcedAll };
}
