// Reference (plain TypeScript) dense kernels. Accumulation in float64, results rounded
// to float32 on store; every output element has one fixed reduction order (batch-invariant).
import type { AttentionDims, KvLayerView, RopeTable, Weight } from '../types.js';
import { isQuantType } from '../quant/formats.js';
import { dequantizeRow, f16ToF32 } from '../quant/dequant.js';

const f32Bits = new Float32Array(1);
const u32Bits = new Uint32Array(f32Bits.buffer);

export function bf16ToF32(bits: number): number {
  u32Bits[0] = bits << 16;
  return f32Bits[0]!;
}

/** Widen row `r` of a weight into `dst` ([cols]). */
export function weightRow(w: Weight, r: number, dst: Float32Array): Float32Array {
  if (w.layout) throw new Error(`ref kernels: weight [${w.rows}, ${w.cols}] is packed for another backend (${w.layout})`);
  const n = w.cols;
  const base = r * n;
  if (isQuantType(w.dtype)) {
    dequantizeRow(w.dtype, w.data as Uint8Array, n, r, dst);
  } else if (w.dtype === 'f32') {
    dst.set((w.data as Float32Array).subarray(base, base + n));
  } else if (w.dtype === 'f16') {
    const src = w.data as Uint16Array;
    for (let i = 0; i < n; i++) dst[i] = f16ToF32(src[base + i]!);
  } else {
    const src = w.data as Uint16Array;
    const dstBits = new Uint32Array(dst.buffer, dst.byteOffset, n);
    for (let i = 0; i < n; i++) dstBits[i] = src[base + i]! << 16;
  }
  return dst;
}

/** Widen a 1-row weight (a vector) into a fresh Float32Array. */
export function weightVector(w: Weight): Float32Array {
  return weightRow(w, 0, new Float32Array(w.cols));
}

export function matmul(out: Float32Array, x: Float32Array, w: Weight, m: number): void {
  const n = w.rows;
  const k = w.cols;
  const row = new Float32Array(k);
  for (let j = 0; j < n; j++) {
    weightRow(w, j, row);
    for (let i = 0; i < m; i++) {
      const xo = i * k;
      let acc = 0;
      for (let p = 0; p < k; p++) acc += x[xo + p]! * row[p]!;
      out[i * n + j] = acc;
    }
  }
}

export function embed(out: Float32Array, table: Weight, ids: ArrayLike<number>): void {
  const d = table.cols;
  for (let i = 0; i < ids.length; i++) {
    const id = ids[i]!;
    if (!(id >= 0 && id < table.rows)) throw new RangeError(`embed: token id ${id} out of range [0, ${table.rows})`);
    weightRow(table, ids[i]!, out.subarray(i * d, (i + 1) * d));
  }
}

export function rmsNorm(out: Float32Array, x: Float32Array, w: Weight, m: number, eps: number, zeroCentered: boolean): void {
  const d = w.cols;
  const wv = weightVector(w);
  for (let i = 0; i < m; i++) {
    const o = i * d;
    let ss = 0;
    for (let p = 0; p < d; p++) ss += x[o + p]! * x[o + p]!;
    const inv = 1 / Math.sqrt(ss / d + eps);
    for (let p = 0; p < d; p++) {
      const scale = zeroCentered ? 1 + wv[p]! : wv[p]!;
      out[o + p] = x[o + p]! * inv * scale;
    }
  }
}

export function silu(x: number): number {
  return x / (1 + Math.exp(-x));
}

export function sigmoid(x: number): number {
  return 1 / (1 + Math.exp(-x));
}

/** Row i of out gets the normed row src(i): i, or with headOrder (HV heads a token) the
 * token's head headOrder[i mod HV] (Kernels.gatedRmsNorm). */
export function gatedRmsNorm(out: Float32Array, o: Float32Array, z: Float32Array, w: Weight, m: number, eps: number, headOrder?: Int32Array): void {
  const d = w.cols;
  const wv = weightVector(w);
  const hv = headOrder?.length ?? 1;
  if (headOrder && m % hv !== 0) throw new RangeError(`gatedRmsNorm: ${m} rows are not whole tokens of ${hv} heads`);
  for (let i = 0; i < m; i++) {
    const b = (headOrder ? i - (i % hv) + headOrder[i % hv]! : i) * d;
    const ob = i * d;
    let ss = 0;
    for (let p = 0; p < d; p++) ss += o[b + p]! * o[b + p]!;
    const inv = 1 / Math.sqrt(ss / d + eps);
    for (let p = 0; p < d; p++) out[ob + p] = o[b + p]! * inv * wv[p]! * silu(z[b + p]!);
  }
}

export function rope(x: Float32Array, positions: ArrayLike<number>, t: number, heads: number, headDim: number,
  table: RopeTable, stride: number): void {
  const { invFreq, scale } = table;
  const half = invFreq.length;
  const cos = new Float64Array(half);
  const sin = new Float64Array(half);
  for (let i = 0; i < t; i++) {
    const pos = positions[i]!;
    for (let f = 0; f < half; f++) {
      const angle = pos * invFreq[f]!;
      cos[f] = Math.cos(angle) * scale;
      sin[f] = Math.sin(angle) * scale;
    }
    for (let h = 0; h < heads; h++) {
      const b = i * stride + h * headDim;
      for (let f = 0; f < half; f++) {
        const x1 = x[b + f]!;
        const x2 = x[b + f + half]!;
        x[b + f] = x1 * cos[f]! - x2 * sin[f]!;
        x[b + f + half] = x2 * cos[f]! + x1 * sin[f]!;
      }
    }
  }
}

/** Row of the paged cache holding position `pos`. */
export function kvRow(pageTable: ArrayLike<number>, pageSize: number, pos: number): number {
  return pageTable[Math.floor(pos / pageSize)]! * pageSize + (pos % pageSize);
}

export function kvWrite(kv: KvLayerView, pageTable: ArrayLike<number>, start: number, k: Float32Array,
  v: Float32Array, t: number, kvDim: number): void {
  for (let i = 0; i < t; i++) {
    const row = kvRow(pageTable, kv.pageSize, start + i);
    kv.k.set(k.subarray(i * kvDim, (i + 1) * kvDim), row * kvDim);
    kv.v.set(v.subarray(i * kvDim, (i + 1) * kvDim), row * kvDim);
  }
}

export function attention(out: Float32Array, q: Float32Array, qStride: number, kv: KvLayerView,
  pageTable: ArrayLike<number>, start: number, t: number, dims: AttentionDims): void {
  const { numHeads, numKvHeads, headDim } = dims;
  const group = numHeads / numKvHeads;
  const kvDim = numKvHeads * headDim;
  const scale = 1 / Math.sqrt(headDim);
  const scores = new Float64Array(start + t);
  const acc = new Float64Array(headDim);
  for (let i = 0; i < t; i++) {
    const n = start + i + 1; // keys 0..start+i
    for (let h = 0; h < numHeads; h++) {
      const qo = i * qStride + h * headDim;
      const ko = Math.floor(h / group) * headDim;
      let max = -Infinity;
      for (let p = 0; p < n; p++) {
        const kb = kvRow(pageTable, kv.pageSize, p) * kvDim + ko;
        let s = 0;
        for (let d = 0; d < headDim; d++) s += q[qo + d]! * kv.k[kb + d]!;
        s *= scale;
        scores[p] = s;
        if (s > max) max = s;
      }
      let sum = 0;
      for (let p = 0; p < n; p++) {
        const e = Math.exp(scores[p]! - max);
        scores[p] = e;
        sum += e;
      }
      acc.fill(0);
      for (let p = 0; p < n; p++) {
        const vb = kvRow(pageTable, kv.pageSize, p) * kvDim + ko;
        const wgt = scores[p]! / sum;
        for (let d = 0; d < headDim; d++) acc[d] = acc[d]! + wgt * kv.v[vb + d]!;
      }
      const oo = (i * numHeads + h) * headDim;
      for (let d = 0; d < headDim; d++) out[oo + d] = acc[d]!;
    }
  }
}

export function moeRoute(ids: Int32Array, weights: Float32Array, logits: Float32Array, m: number, e: number,
  topK: number, renormalize: boolean): void {
  const probs = new Float64Array(e);
  const taken = new Uint8Array(e);
  for (let i = 0; i < m; i++) {
    let max = -Infinity;
    for (let x = 0; x < e; x++) max = Math.max(max, logits[i * e + x]!);
    let sum = 0;
    for (let x = 0; x < e; x++) {
      probs[x] = Math.exp(logits[i * e + x]! - max);
      sum += probs[x]!;
    }
    taken.fill(0);
    let picked = 0;
    for (let s = 0; s < topK; s++) {
      let best = -1;
      for (let x = 0; x < e; x++) if (!taken[x] && (best < 0 || probs[x]! > probs[best]!)) best = x;
      taken[best] = 1;
      ids[i * topK + s] = best;
      weights[i * topK + s] = probs[best]! / sum;
      picked += probs[best]! / sum;
    }
    if (renormalize) for (let s = 0; s < topK; s++) weights[i * topK + s] = weights[i * topK + s]! / picked;
  }
}

export function mulSilu(out: Float32Array, a: Float32Array, b: Float32Array, n: number): void {
  for (let i = 0; i < n; i++) out[i] = a[i]! * silu(b[i]!);
}

export function mulSigmoid(out: Float32Array, a: Float32Array, b: Float32Array, n: number): void {
  for (let i = 0; i < n; i++) out[i] = a[i]! * sigmoid(b[i]!);
}

export function add(out: Float32Array, a: Float32Array, b: Float32Array, n: number): void {
  for (let i = 0; i < n; i++) out[i] = a[i]! + b[i]!;
}

export function argmax(out: Int32Array, x: Float32Array, m: number, n: number, stride = n): void {
  for (let i = 0; i < m; i++) {
    const base = i * stride;
    let best = 0;
    let bv = -Infinity;
    let found = false;
    for (let j = 0; j < n; j++) {
      const v = x[base + j]!;
      if (v > bv || (!found && v === bv)) {
        bv = v;
        best = j;
        found = true;
      }
    }
    out[i] = best;
  }
}
