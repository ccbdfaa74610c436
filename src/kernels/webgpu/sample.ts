/// <reference types="@webgpu/types" />
// Sampling on the GPU: one dispatch per row (its parameters in the uniform block), results
// in one small tensor that the step reads back with the ids. The definition is
// kernels/ref/sampling.ts with f32 sums in a fixed order (wgsl/sample.ts), so the kept
// weights agree with the ref within f32 rounding and the draw picks the same token except
// when u·(kept mass) falls within that rounding of a token boundary.
import type { SampleResult, SampleRow } from '../types.js';
import type { WebGpuKernels } from './backend.js';
import type { StepEncoder } from './encoder.js';
import type { GpuTensor } from './tensor.js';
import { packParams } from './params.js';
import { SAMPLE, SAMPLE_RESULT_WORDS } from './wgsl/sample.js';

/** One row: as SampleRow, with the logits and the optional dist as GPU views. Patch ids
 * must be distinct (penalties patch each id once). */
export interface GpuSampleRow extends Omit<SampleRow, 'logits' | 'dist'> {
  readonly logits: GpuTensor;
  readonly dist: GpuTensor | null;
}

/** Record the sampling of `rows`; returns the results tensor ([rows, 44] words) to read. */
export function recordSample(g: WebGpuKernels, enc: StepEncoder, rows: readonly GpuSampleRow[]): GpuTensor {
  const res = g.alloc.tensor([rows.length, SAMPLE_RESULT_WORDS], 'i32', 'sample results');
  let patches = 0;
  let wlen = 0;
  for (const r of rows) {
    if (r.topN > 20) throw new RangeError(`sample: topN ${r.topN} > 20`);
    patches += r.patchCount;
    wlen += r.n;
  }
  const pids = new Int32Array(Math.max(1, patches));
  const pvals = new Float32Array(Math.max(1, patches));
  let po = 0;
  for (const r of rows) {
    for (let j = 0; j < r.patchCount; j++) {
      pids[po + j] = r.patchIds![j]!;
      pvals[po + j] = r.patchVals![j]!;
    }
    po += r.patchCount;
  }
  const w = g.scratchTensor('sample.w', wlen);
  // uploaded before the dispatches are recorded (a chunked encoder may submit some of them
  // before this function returns: encoder.ts)
  const pidT = g.alloc.upload(pids);
  const pvalT = g.alloc.upload(pvals);
  po = 0;
  let wo = 0;
  rows.forEach((r, i) => {
    const flags = (r.draw ? 1 : 0) | (r.logprobs ? 2 : 0) | (r.dist ? 4 : 0);
    const dist = r.dist ?? w;
    g.run(enc, 'sample', () => SAMPLE, packParams('sample', { xOff: r.logits.offset, n: r.n, invT: r.invTemperature, topK: r.topK,
      topP: r.topP, minP: r.minP, u: r.u, patchOff: po, patchCount: r.patchCount, flags, topN: r.logprobs ? r.topN : 0, distOff: dist.offset,
      wOff: w.offset + wo, resultOff: i * SAMPLE_RESULT_WORDS, inf: Infinity }), null,
    [r.logits.buffer, pidT.buffer, pvalT.buffer, w.buffer, res.buffer, dist.buffer], [1, 1, 1], 'sample');
    po += r.patchCount;
    wo += r.n;
  });
  return res;
}

/** Unpack read-back result words into SampleResult objects. */
export function decodeSampleResults(words: Int32Array, rows: readonly GpuSampleRow[], out: readonly SampleResult[]): void {
  const f = new Float32Array(words.buffer, words.byteOffset, words.length);
  rows.forEach((r, i) => {
    const o = i * SAMPLE_RESULT_WORDS;
    const res = out[i]!;
    if (r.draw) res.token = words[o]!;
    if (r.logprobs) {
      res.rawMax = f[o + 1]!;
      res.rawSumExp = f[o + 2]!;
      for (let j = 0; j < r.topN; j++) {
        res.topIds[j] = words[o + 4 + j]!;
        res.topVals[j] = f[o + 24 + j]!;
      }
    }
    if (r.draw || r.dist) res.keptMass = f[o + 3]!;
  });
}
