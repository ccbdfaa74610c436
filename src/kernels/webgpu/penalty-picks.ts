/// <reference types="@webgpu/types" />
// Kernels.penaltyPicks on the GPU: the rows' penalty tables packed into one u32 array
// (uploaded with the step) and one dispatch of wgsl/penalty-picks.ts, a workgroup per row.
import type { PenaltyPickRow, PenaltyPicksCall } from '../kernel-operands.js';
import type { WebGpuKernels } from './backend.js';
import type { StepEncoder } from './encoder.js';
import type { GpuTensor } from './tensor.js';
import { packParams } from './params.js';
import { grid } from './wgsl/common.js';
import { PENALTY_PICKS } from './wgsl/penalty-picks.js';

const f32Bits = new Float32Array(1);
const u32Bits = new Uint32Array(f32Bits.buffer);
function bits(x: number): number {
  f32Bits[0] = x;
  return u32Bits[0]!;
}

/** The table of wgsl/penalty-picks.ts: per row an 8-word header, then every row's entries
 * (4 words an id) and untouched mask (ceil(n / 32) words; missing words: clear). */
export function packPenaltyTable(rows: readonly PenaltyPickRow[], n: number): Uint32Array {
  const words = Math.ceil(n / 32);
  const size = rows.reduce((s, r) => s + 4 * r.ids.length + words, 8 * rows.length);
  const out = new Uint32Array(size);
  let at = 8 * rows.length;
  rows.forEach((r, i) => {
    const h = 8 * i;
    out.set([bits(r.repetition), bits(r.presence), bits(r.frequency), r.countsDrafts ? 1 : 0, r.ids.length, at, at + 4 * r.ids.length, r.valsAt], h);
    r.ids.forEach((id, e) => out.set([id, bits(r.bias[e]!), r.prompt[e]!, r.counts[e]!], at + 4 * e));
    at += 4 * r.ids.length;
    out.set(r.untouched.length > words ? r.untouched.subarray(0, words) : r.untouched, at);
    at += words;
  });
  return out;
}

export function penaltyPicksOn(g: WebGpuKernels, enc: StepEncoder, ids: GpuTensor, x: GpuTensor, vals: GpuTensor, a: PenaltyPicksCall,
  upload: (words: Uint32Array) => GpuTensor): void {
  const { m, n, stride, steps, idsStride, bestOffset, rows } = a;
  if (m <= 0) return;
  if (rows.length !== m) throw new RangeError(`penaltyPicks: ${rows.length} rows for ${m}`);
  if (n > stride || (m - 1) * stride + n > x.length) throw new RangeError(`penaltyPicks: ${m} rows of ${n} past the logits`);
  if (steps * idsStride + m > ids.length || bestOffset + m > ids.length || m > idsStride) throw new RangeError(`penaltyPicks: ${m} rows past the ids`);
  rows.forEach((r, i) => {
    if (r.valsAt + 1 + r.ids.length + steps > vals.length) throw new RangeError(`penaltyPicks: row ${i}'s values past vals`);
    if (r.ids.some((id) => !(id >= 0 && id < n))) throw new RangeError(`penaltyPicks: row ${i} has an id outside [0, ${n})`);
  });
  const table = upload(packPenaltyTable(rows, n));
  const params = packParams('penalty_picks', {
    m, n, stride, steps, idsStride, idsOff: ids.offset, bestOff: ids.offset + bestOffset, xOff: x.offset, valsOff: vals.offset, tableOff: table.offset, negInf: -Infinity,
  });
  g.run(enc, 'penalty_picks', () => PENALTY_PICKS, params, null, [ids.buffer, x.buffer, vals.buffer, table.buffer], grid(m), 'penalty_picks');
}
