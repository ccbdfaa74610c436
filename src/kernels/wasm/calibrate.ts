// Start-up calibration of the quantized matmul kernel families. Every family computes the
// same bits (exact integer sums, the same f32 chain: assembly/qmatmul.ts), but which one
// is fastest depends on the CPU and on V8's code for it, so each backend times them once,
// on all its threads, before any model weight is loaded, and keeps the winner for its
// lifetime. DELTASERVE_Q8X4=narrow|wide skips the timing and forces a family.
import type { Weight } from '../types.js';
import type { QuantKernelChoice, Q8x4Kernel } from './quant-layouts.js';

/** The part of the backend calibration drives (WasmKernels). */
export interface Calibratable {
  allocWeight(dtype: 'q8_0', rows: number, cols: number): { weight: Weight; bytes: Uint8Array };
  packWeight(w: Weight): Weight;
  alloc(n: number): Float32Array;
  matmul(out: Float32Array, x: Float32Array, w: Weight, m: number): void;
  setQuantKernels(choice: QuantKernelChoice): void;
  /** Give back the memory of a view allocated last (a no-op otherwise). */
  releaseLast(view: ArrayBufferView): void;
}

export interface CalibrationResult {
  readonly choice: QuantKernelChoice;
  /** Median ms of one M = 1 matmul on the probe weight, per family (empty when forced). */
  readonly q8x4M1Ms: Partial<Record<Q8x4Kernel, number>>;
  readonly forced: boolean;
}

const FAMILIES: readonly Q8x4Kernel[] = ['narrow', 'wide'];
// The probe weight: 65536×1024 Q8_0 (75 MB), larger than any L3 here, so it streams from
// memory as a decode step does (the families rank differently in cache: the wide one is
// 14% faster on an L3-resident 4 MB weight and was 1.9× slower out of cache before its
// streams were made long). 7 rounds take ~0.1 s on a quiet 2-core machine.
const PROBE_ROWS = 65536;
const PROBE_COLS = 1024;
const ROUNDS = 7;
const CALLS_PER_ROUND = 1;

function forcedFamily(): Q8x4Kernel | null {
  const env = process.env['DELTASERVE_Q8X4'];
  if (env === undefined || env === '') return null;
  if (env !== 'narrow' && env !== 'wide') throw new Error(`DELTASERVE_Q8X4 must be narrow or wide (got "${env}")`);
  return env;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[s.length >> 1]!;
}

/** Bytes of memory the probe needs (its weight, activations and output). */
export const PROBE_BYTES = (PROBE_ROWS / 4) * (PROBE_COLS / 32) * 144 + 4 * (PROBE_ROWS + PROBE_COLS);

/** Time the q8x4 families on a synthetic weight (rounds alternate between them, so a
 * machine whose load changes slows both alike), install the fastest, return the timings.
 * The probe's memory is given back afterwards. */
export function calibrateQuantKernels(k: Calibratable): CalibrationResult {
  const forced = forcedFamily();
  if (forced) {
    const choice = { q8x4M1: forced, q8x4Mn: forced };
    k.setQuantKernels(choice);
    return { choice, q8x4M1Ms: {}, forced: true };
  }
  const { weight, bytes } = k.allocWeight('q8_0', PROBE_ROWS, PROBE_COLS);
  // valid Q8_0 blocks: pseudo-random quants (a 64 KiB pattern repeated), every f16 scale 2^-7 (0x2000)
  const chunk = new Uint8Array(65536);
  let seed = 12345;
  for (let i = 0; i < chunk.length; i++) {
    seed = (seed * 1103515245 + 12345) >>> 0;
    chunk[i] = seed >>> 24;
  }
  for (let o = 0; o < bytes.length; o += chunk.length) bytes.set(chunk.subarray(0, Math.min(chunk.length, bytes.length - o)), o);
  for (let b = 0; b < bytes.length; b += 34) {
    bytes[b] = 0x00;
    bytes[b + 1] = 0x20;
  }
  const w = k.packWeight(weight);
  const x = k.alloc(PROBE_COLS);
  for (let i = 0; i < x.length; i++) x[i] = Math.sin(i * 0.37);
  const out = k.alloc(PROBE_ROWS);
  const times: Record<Q8x4Kernel, number[]> = { narrow: [], wide: [] };
  for (let r = 0; r <= ROUNDS; r++) {
    for (const f of FAMILIES) {
      k.setQuantKernels({ q8x4M1: f, q8x4Mn: f });
      const t0 = performance.now();
      for (let i = 0; i < CALLS_PER_ROUND; i++) k.matmul(out, x, w, 1);
      if (r > 0) times[f].push((performance.now() - t0) / CALLS_PER_ROUND); // round 0: warm-up
    }
  }
  const ms = { narrow: median(times.narrow), wide: median(times.wide) };
  k.releaseLast(out); // newest first: out, x, then the weight
  k.releaseLast(x);
  k.releaseLast(w.data);
  const best: Q8x4Kernel = ms.wide <= ms.narrow ? 'wide' : 'narrow';
  // M > 1: the families differ only in the rows left over after blocks of 4 (the same
  // single-row kernels), so the M = 1 winner serves both.
  const choice = { q8x4M1: best, q8x4Mn: best };
  k.setQuantKernels(choice);
  return { choice, q8x4M1Ms: ms, forced: false };
}
