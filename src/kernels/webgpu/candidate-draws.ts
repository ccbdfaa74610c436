/// <reference types="@webgpu/types" />
// Kernels.candidateDraws on the GPU: the rows' cuts and uniforms packed into a small table
// (uploaded with the step) and one dispatch of wgsl/candidate-draws.ts, a workgroup per row.
import type { CandidateDraw } from '../kernel-operands.js';
import type { WebGpuKernels } from './backend.js';
import type { StepEncoder } from './encoder.js';
import type { GpuTensor } from './tensor.js';
import { packParams } from './params.js';
import { grid } from './wgsl/common.js';
import { CANDIDATE_DRAW_WORDS, CANDIDATE_DRAWS } from './wgsl/candidate-draws.js';
import { checkCandidateDraws } from '../candidate-draws.js';

/** The row table: CANDIDATE_DRAW_WORDS words a row (wgsl/candidate-draws.ts). */
export function packDrawTable(rows: readonly (CandidateDraw | null)[]): Int32Array {
  const out = new Int32Array(rows.length * CANDIDATE_DRAW_WORDS);
  const f = new Float32Array(out.buffer);
  rows.forEach((r, i) => {
    if (!r) return;
    const h = i * CANDIDATE_DRAW_WORDS;
    out[h] = 1;
    f[h + 1] = r.invTemperature;
    out[h + 2] = r.topK;
    f[h + 3] = r.topP;
    f[h + 4] = r.minP;
    f[h + 5] = r.u;
  });
  return out;
}

/** One dispatch over rows [0, m) (`table`: packDrawTable of the call's rows). */
export function candidateDrawsOn(g: WebGpuKernels, enc: StepEncoder,
  a: { out: GpuTensor; outOffset: number; ids: GpuTensor; vals: GpuTensor; candOffset: number; c: number; m: number }, table: GpuTensor): void {
  const { out, outOffset, ids, vals, candOffset, c, m } = a;
  checkCandidateDraws(out.length, outOffset, ids.length, vals.length, candOffset, c, m);
  if (m <= 0) return;
  const params = packParams('candidate_draws', {
    m, c, idsOff: ids.offset + candOffset, valsOff: vals.offset + candOffset, outOff: out.offset + outOffset, tableOff: table.offset,
    negInf: -Infinity, inf: Infinity,
  });
  g.run(enc, 'candidate_draws', () => CANDIDATE_DRAWS, params, null, [out.buffer, ids.buffer, vals.buffer, table.buffer], grid(m), 'candidate_draws');
}
