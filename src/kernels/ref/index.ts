// The reference backend: plain TypeScript, the oracle every fast kernel is tested against.
import { HOST_LIMITS, type Kernels, type Weight, type WeightDType } from '../types.js';
import * as dense from './dense.js';
import * as gdn from './gdn.js';
import * as tower from './tower-ops.js';
import { sample } from './sampling.js';
import { matmulQuant } from './quant.js';
import { isQuantType, quantRowBytes } from '../quant/formats.js';
import { rowMajorPrefix, weightBytes } from '../weight-view.js';
import * as cpu from '../cpu-ops.js';
import { topCandidates } from '../top-candidates.js';
import { penaltyPicks } from '../penalty-picks.js';
import { candidateDraws } from '../candidate-draws.js';
import { matmulAddByCalls, matmulGroupByCalls } from '../matmul-group.js';
import { convSeqsByCalls, gdnChunkedSeqsByCalls, gdnGatedSeqsByCalls, gdnSeqsByCalls } from '../seqs-by-calls.js';
import { attentionByCalls, attentionInputsByCalls, kvWriteByCalls, ropeByCalls, stepBatchOnHost } from '../batch-by-calls.js';
import { startRefQuantizer } from '../quant/row-quantizer.js';
import { mtpInputsByCalls } from '../mtp-inputs-by-calls.js';

export function createRefKernels(): Kernels {
  const k: Kernels = {
    name: 'ref',
    threads: 1,
    limits: HOST_LIMITS,
    dispose: () => {},
    alloc: (n) => new Float32Array(n),
    allocI32: (n) => new Int32Array(n),
    view: cpu.view,
    copyRows: cpu.copyRows,
    gatherRows: cpu.gatherRows,
    fill: cpu.fill,
    fillRuns: cpu.fillRuns,
    write: cpu.write,
    readBack: cpu.readBack,
    stage: cpu.stage,
    allocWeight(dtype: WeightDType, rows: number, cols: number) {
      if (isQuantType(dtype)) {
        const data = new Uint8Array(rows * quantRowBytes(dtype, cols));
        return { weight: { dtype, rows, cols, data }, bytes: data };
      }
      const n = rows * cols;
      const data = dtype === 'f32' ? new Float32Array(n) : new Uint16Array(n);
      const weight: Weight = { dtype, rows, cols, data };
      return { weight, bytes: new Uint8Array(data.buffer, data.byteOffset, data.byteLength) };
    },
    startQuantizer: startRefQuantizer,
    packWeight: (w) => {
      if (w.layout) throw new Error(`ref kernels: weight [${w.rows}, ${w.cols}] is packed for another backend (${w.layout})`);
      return w;
    },
    weightRows: rowMajorPrefix,
    storedWeightBytes: weightBytes,
    matmul: (out, x, w, m) => (isQuantType(w.dtype) ? matmulQuant(out, x, w, m) : dense.matmul(out, x, w, m)),
    matmulGroup: (x, m, group, norm, conv) => matmulGroupByCalls(k, x, m, group, norm, conv),
    matmulAdd: (out, x, w, m, tmp, gate) => matmulAddByCalls(k, out, x, w, m, tmp, gate),
    embed: dense.embed,
    embedIds: (out, table, ids, idsOffset, m) => dense.embed(out, table, cpu.idsIn(ids, idsOffset, m)),
    rmsNorm: dense.rmsNorm,
    mtpInputs: (a) => mtpInputsByCalls(k, a),
    gatedRmsNorm: dense.gatedRmsNorm,
    rope: dense.rope,
    causalConv: gdn.causalConv,
    causalConvSeqs: (out, x, w, seqs) => convSeqsByCalls(k, out, x, w, seqs),
    gdnGates: gdn.gdnGates,
    gdnRecurrent: gdn.gdnRecurrent,
    gdnRecurrentSeqs: (out, qkv, g, beta, dims, seqs) => gdnSeqsByCalls(k, out, qkv, g, beta, dims, seqs),
    gdnRecurrentGatedSeqs: (out, qkv, gating, dims, seqs) => gdnGatedSeqsByCalls(k, out, qkv, gating, dims, seqs),
    gdnChunked: gdn.gdnChunked,
    gdnChunkedSeqs: (out, qkv, g, beta, dims, seqs) => gdnChunkedSeqsByCalls(k, out, qkv, g, beta, dims, seqs),
    kvWrite: dense.kvWrite,
    attention: dense.attention,
    stepBatch: stepBatchOnHost,
    ropeBatch: (x, batch, heads, headDim, stride) => ropeByCalls(k, x, batch, heads, headDim, stride),
    kvWriteBatch: (kv, batch, kk, v, kvDim) => kvWriteByCalls(k, kv, batch, kk, v, kvDim),
    attentionBatch: (out, q, qStride, kv, batch, dims, inputs) => {
      if (inputs) attentionInputsByCalls(k, inputs, batch, dims);
      attentionByCalls(k, out, q, qStride, kv, batch, dims);
    },
    attentionInputs: (a, batch, dims) => attentionInputsByCalls(k, a, batch, dims),
    moeRoute: dense.moeRoute,
    moeExperts: (out, x, ids, weights, m, topK, experts, scratch, fused) => cpu.moeExperts(k, out, x, ids, weights, m, topK, experts, scratch, fused),
    addSigmoidScaled: cpu.addSigmoidScaled,
    argmax: dense.argmax,
    argmaxRows: (out, outOffset, x, m, n, stride) => dense.argmax(out.subarray(outOffset, outOffset + m), x, m, n, stride),
    argmaxRowsMasked: (out, outOffset, x, m, n, stride, masks) => cpu.argmaxRowsMasked(dense.argmax, out, outOffset, x, m, n, stride, masks),
    gatherPicked: (out, outOffset, x, ids, m, stride) => cpu.gatherPicked(out, outOffset, x, ids, m, stride),
    topCandidates: (ids, vals, outOffset, x, m, n, stride, c) => topCandidates(ids, vals, outOffset, x, m, n, stride, c),
    penaltyPicks,
    candidateDraws,
    sample,
    mulSilu: dense.mulSilu,
    mulSigmoid: dense.mulSigmoid,
    add: dense.add,
    layerNorm: tower.layerNorm,
    biasAct: tower.biasAct,
  };
  return k;
}
