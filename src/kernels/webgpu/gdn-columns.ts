// How the recurrent GDN kernels are launched on an adapter (the fused gated recurrence,
// Kernels.gdnRecurrentGatedSeqs, as below; the plain one, gdnRecurrentSeqs, likewise
// without the norm pass):
// 'head', one workgroup per (value head, sequence) holding every state column and norming
// the output row in the workgroup (wgsl/gdn-gated.ts, one dispatch); or 'columns', one
// workgroup per (value head, block of GDN_COLUMNS columns, sequence) and the gated norm as
// a second dispatch (wgsl/gdn-columns.ts). Both give the same bits
// (test/webgpu-gdn-columns.test.ts). The choice is the backend's gdnLaunch (launches.ts: by
// adapter, never by batch), so every recurrent row of a device (decode, verify, alone or
// batched) takes it.
import type { WebGpuKernels } from './backend.js';
import type { StepEncoder } from './encoder.js';
import { GDN_COLUMNS, GDN_GATED_COLUMNS, gdnGatedNormShader } from './wgsl/gdn-columns.js';
import { gdnGatedThreads } from './wgsl/gdn-gated.js';
import { gdnGatedNormQuantShader } from './wgsl/gated-norm.js';
import type { QuantActs } from './backend-types.js';

/** The fused kernel's bindings (OUT, QKV, A, B, S, SCR, DS, AL, DB, Z, NW) and the normed
 * rows' tensor (DST) each pass takes. */
const RECURRENCE_BINDINGS = [0, 1, 2, 3, 4, 5, 6, 7, 8];
const NORM_BINDINGS = [0, 9, 10, 6, 11];

/** One buffer group's sequences of the fused gated recurrence, as the 'columns' launch:
 * the recurrence over (head, column block, sequence), then the norm over (head, token,
 * sequence) unless `normFolded` (true: none; activations: the pass quantizes the normed rows
 * into them instead of storing them). `buffers`: the fused kernel's eleven and DST; `params`: its
 * gdn_gated_seqs block. */
export function gdnGatedColumnsRun(g: WebGpuKernels, enc: StepEncoder, params: readonly number[], buffers: readonly GPUBuffer[],
  dims: { hv: number; dv: number }, seqs: number, maxT: number, normFolded: boolean | QuantActs = false): void {
  if (maxT > 65535) throw new RangeError(`gdnRecurrentGatedSeqs: ${maxT} recurrent tokens in one sequence exceed the norm pass's dispatch grid (65535)`);
  const pick = (at: readonly number[]): GPUBuffer[] => at.map((i) => buffers[i]!);
  g.run(enc, 'gdn_gated_columns', () => GDN_GATED_COLUMNS, params, null, pick(RECURRENCE_BINDINGS),
    [dims.hv, Math.ceil(dims.dv / GDN_COLUMNS), seqs], 'gdn_recurrent');
  if (normFolded === true) return; // out_proj forms the norm of OUT's rows (gated-norm.ts outProjHeadNorm)
  const wg = gdnGatedThreads(dims.dv);
  if (normFolded) { // the pass writes out_proj's quantized input (gated-norm.ts normQuantFolds)
    if (normFolded.qx.offset !== 0 || normFolded.dx.offset !== 0 || normFolded.sx.offset !== 0) throw new RangeError('gdnRecurrentGatedSeqs: the activations must start their buffers');
    const dot4 = g.adapter.features.dot4I8;
    g.run(enc, `gdn_gated_norm_quant_${wg}${dot4 ? '' : '_nodot4'}`, () => gdnGatedNormQuantShader(wg, dot4), params, null,
      [...pick(NORM_BINDINGS.slice(0, 4)), normFolded.qx.buffer, normFolded.dx.buffer, normFolded.sx.buffer], [dims.hv, maxT, seqs], 'gdn_gated_norm_quant');
    return;
  }
  g.run(enc, `gdn_gated_norm_${wg}`, () => gdnGatedNormShader(wg), params, null, pick(NORM_BINDINGS), [dims.hv, maxT, seqs], 'gdn_gated_norm');
}
