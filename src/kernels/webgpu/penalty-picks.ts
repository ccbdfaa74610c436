/// <reference types="@webgpu/types" />
// Kernels.penaltyPicks on the GPU: the rows' penalty tables packed into one u32 array
// (uploaded with the step, once for the calls of a step that pass the same rows: kernels.ts)
// and one dispatch of wgsl/penalty-picks.ts, a workgroup per row.
import type { PenaltyPickRow, PenaltyPicksCall } from '../kernel-operands.js';
import type { WebGpuKernels } from './backend.js';
import type { StepEncoder } from './encoder.js';
import type { GpuTensor } from './tensor.js';
import { packParams } from './params.js';
import { grid } from './wgsl/common.js';
import { PENALTY_PICKS } from './wgsl/penalty-picks.js';
import { penaltyValsAt } from '../penalty-picks.js';

const f32Bits = new Float32Array(1);
const u32Bits = new Uint32Array(f32Bits.buffer);
function bits(x: number): number {
  f32Bits[0] = x;
  return u32Bits[0]!;
}

/** The table of wgsl/penalty-picks.ts: per row an 8-word header (its last word: the values
 * of the rows before it less their drafts' slots, Σ (1 + ids.length)), then every row's
 * entries (4 words an id) and untouched mask (ceil(n / 32) words; missing words: clear). The
 * table of rows serves every call over a prefix of them. */
export function packPenaltyTable(rows: readonly PenaltyPickRow[], n: number): Uint32Array {
  const words = Math.ceil(n / 32);
  const size = rows.reduce((s, r) => s + 4 * r.ids.length + words, 8 * rows.length);
  const out = new Uint32Array(size);
  let at = 8 * rows.length;
  let before = 0;
  rows.forEach((r, i) => {
    const h = 8 * i;
    out.set([bits(r.repetition), bits(r.presence), bits(r.frequency), r.countsDrafts ? 1 : 0, r.ids.length, at, at + 4 * r.ids.length, before], h);
    before += 1 + r.ids.length;
    r.ids.forEach((id, e) => out.set([id, bits(r.bias[e]!), r.prompt[e]!, r.counts[e]!], at + 4 * e));
    at += 4 * r.ids.length;
    out.set(r.untouched.length > words ? r.untouched.subarray(0, words) : r.untouched, at);
    at += words;
  });
  return out;
}

/** One dispatch over rows [0, m) of `table` (packPenaltyTable of a.rows, or of rows a.rows
 * begins). */
export function penaltyPicksOn(g: WebGpuKernels, enc: StepEncoder, ids: GpuTensor, x: GpuTensor, vals: GpuTensor, a: PenaltyPicksCall, table: GpuTensor): void {
  const { m, n, stride, steps, idsStride, bestOffset, valsOffset, rows } = a;
  if (m <= 0) return;
  if (rows.length !== m) throw new RangeError(`penaltyPicks: ${rows.length} rows for ${m}`);
  if (n > stride || (m - 1) * stride + n > x.length) throw new RangeError(`penaltyPicks: ${m} rows of ${n} past the logits`);
  if (steps * idsStride + m > ids.length || bestOffset + m > ids.length || m > idsStride) throw new RangeError(`penaltyPicks: ${m} rows past the ids`);
  if (penaltyValsAt(a, m) > vals.length) throw new RangeError(`penaltyPicks: ${m} rows' values past vals`);
  const params = packParams('penalty_picks', {
    m, n, stride, steps, idsStride, idsOff: ids.offset, bestOff: ids.offset + bestOffset, xOff: x.offset, valsOff: vals.offset + valsOffset,
    tableOff: table.offset, negInf: -Infinity, apply: a.apply ? 1 : 0,
  });
  g.run(enc, 'penalty_picks', () => PENALTY_PICKS, params, null, [ids.buffer, x.buffer, vals.buffer, table.buffer], grid(m), 'penalty_picks');
}
