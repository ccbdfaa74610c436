// Row descriptors of the SAMPLE command (assembly/sampling.ts): DESC f64 slots per row,
// staged in the call's arena; outputs are read back from them after the run.
import type { SampleResult, SampleRow } from '../types.js';
import type { Arena } from './memory.js';
import type { Operands } from './operands.js';

/** Slots of one row descriptor (same numbering as the D_* constants of assembly/sampling.ts;
 * test/kernel-commands.test.ts checks them against it, and DESC and the F_* flags). */
export const D = {
  LOGITS: 0, N: 1, INV_T: 2, TOP_K: 3, TOP_P: 4, MIN_P: 5, U: 6, PATCH_IDS: 7, PATCH_VALS: 8, PATCH_N: 9,
  TOP_N: 10, FLAGS: 11, TOP_IDS: 12, TOP_VALS: 13, DIST: 14, OUT_TOKEN: 15, OUT_RAW_MAX: 16, OUT_RAW_SUM: 17, OUT_MASS: 18,
} as const;
export const DESC = 20;
export const FLAGS = { DRAW: 1, LOGPROBS: 2, DIST: 4 } as const;
const F_DRAW = FLAGS.DRAW;
const F_LOGPROBS = FLAGS.LOGPROBS;
const F_DIST = FLAGS.DIST;

export interface StagedRows {
  readonly ptr: number;
  /** Staged top-N outputs per row (pointers), 0 when none. */
  readonly topIds: number[];
  readonly topVals: number[];
}

/** Stage the descriptors (and patches, top-N outputs) of `rows` in the call `c`. */
export function packSampleRows(c: Operands, rows: readonly SampleRow[]): StagedRows {
  const ptr = c.arena.stage(rows.length * DESC * 8);
  const d = new Float64Array(c.arena.buffer(), ptr, rows.length * DESC);
  const topIds: number[] = [];
  const topVals: number[] = [];
  rows.forEach((r, i) => {
    const o = i * DESC;
    if (r.n <= 0) throw new RangeError('sample: empty row');
    d[o + D.LOGITS] = c.in(r.logits, r.n);
    d[o + D.N] = r.n;
    d[o + D.INV_T] = Math.fround(r.invTemperature);
    d[o + D.TOP_K] = r.topK;
    d[o + D.TOP_P] = r.topP;
    d[o + D.MIN_P] = r.minP;
    d[o + D.U] = r.u;
    const pn = r.patchCount;
    d[o + D.PATCH_N] = pn;
    d[o + D.PATCH_IDS] = pn > 0 ? c.ints(r.patchIds!, pn) : 0;
    d[o + D.PATCH_VALS] = pn > 0 ? c.in(r.patchVals!, pn) : 0;
    const topN = r.logprobs ? r.topN : 0;
    d[o + D.TOP_N] = topN;
    topIds.push(topN > 0 ? c.arena.stage(topN * 4) : 0);
    topVals.push(topN > 0 ? c.arena.stage(topN * 4) : 0);
    d[o + D.TOP_IDS] = topIds[i]!;
    d[o + D.TOP_VALS] = topVals[i]!;
    d[o + D.FLAGS] = (r.draw ? F_DRAW : 0) | (r.logprobs ? F_LOGPROBS : 0) | (r.dist ? F_DIST : 0);
    d[o + D.DIST] = r.dist ? c.out(r.dist, r.n) : 0;
  });
  return { ptr, topIds, topVals };
}

/** Copy the outputs of a run into `results`. */
export function readSampleResults(arena: Arena, staged: StagedRows, rows: readonly SampleRow[], results: readonly SampleResult[]): void {
  const d = new Float64Array(arena.buffer(), staged.ptr, rows.length * DESC);
  rows.forEach((r, i) => {
    const o = i * DESC;
    const res = results[i]!;
    if (r.draw) res.token = d[o + D.OUT_TOKEN]!;
    if (r.draw || r.dist) res.keptMass = d[o + D.OUT_MASS]!;
    if (r.logprobs) {
      res.rawMax = d[o + D.OUT_RAW_MAX]!;
      res.rawSumExp = d[o + D.OUT_RAW_SUM]!;
      const topN = r.topN;
      if (topN > 0) {
        res.topIds.set(arena.i32(staged.topIds[i]!, topN));
        res.topVals.set(arena.f32(staged.topVals[i]!, topN));
      }
    }
  });
}
