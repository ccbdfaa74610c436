// Reference Gated DeltaNet kernels: causal conv, gates, recurrence and the chunked form.
// Math: ../shared/MODEL-NOTES.md "Gated DeltaNet layer". The recurrent state is float32
// on store; per-step arithmetic is float64.
import { GDN_CHUNK, type GdnDims, type Weight } from '../types.js';
import { silu, sigmoid, weightRow, weightVector } from './dense.js';

/** Causal depthwise conv + SiLU. Virtual input = [window (K−1 rows) ; x (T rows)].
 * x: [T, C], window: [K−1, C], w: [C, K], out: [T, C], scratch: [T, K−1, C]. */
export function causalConv(out: Float32Array, x: Float32Array, window: Float32Array, w: Weight, t: number,
  scratch?: Float32Array): void {
  const c = w.rows;
  const k = w.cols;
  const hist = k - 1;
  const wk = new Float32Array(c * k);
  const row = new Float32Array(k);
  for (let ch = 0; ch < c; ch++) wk.set(weightRow(w, ch, row), ch * k);
  // virtual row r (0 ≤ r < hist + t)
  const at = (r: number, ch: number): number => (r < hist ? window[r * c + ch]! : x[(r - hist) * c + ch]!);
  for (let i = 0; i < t; i++) {
    for (let ch = 0; ch < c; ch++) {
      let acc = 0;
      for (let j = 0; j < k; j++) acc += wk[ch * k + j]! * at(i + j, ch);
      out[i * c + ch] = silu(acc);
    }
    if (scratch) {
      for (let r = 0; r < hist; r++) {
        for (let ch = 0; ch < c; ch++) scratch[(i * hist + r) * c + ch] = at(i + 1 + r, ch);
      }
    }
  }
  if (!scratch) {
    const next = new Float32Array(hist * c);
    for (let r = 0; r < hist; r++) for (let ch = 0; ch < c; ch++) next[r * c + ch] = at(t + r, ch);
    window.set(next);
  }
}

export function softplus(x: number): number {
  return x > 20 ? x : Math.log1p(Math.exp(x));
}

export function gdnGates(g: Float32Array, beta: Float32Array, a: Float32Array, b: Float32Array,
  aLog: Weight, dtBias: Weight, t: number): void {
  const hv = aLog.cols;
  const al = weightVector(aLog);
  const db = weightVector(dtBias);
  for (let i = 0; i < t; i++) {
    for (let h = 0; h < hv; h++) {
      const o = i * hv + h;
      g[o] = -Math.exp(al[h]!) * softplus(a[o]! + db[h]!);
      beta[o] = sigmoid(b[o]!);
    }
  }
}

/** L2-normalised q̂ (·dk^−½) and k̂ of token i, key head kh, into qOut/kOut ([dk]). */
function normalizedQK(qkv: Float32Array, i: number, kh: number, dims: GdnDims, qOut: Float64Array, kOut: Float64Array): void {
  const { numKeyHeads: hk, numValueHeads: hv, keyDim: dk, valueDim: dv } = dims;
  const width = 2 * hk * dk + hv * dv;
  const qo = i * width + kh * dk;
  const ko = i * width + hk * dk + kh * dk;
  let sq = 0;
  let sk = 0;
  for (let d = 0; d < dk; d++) {
    sq += qkv[qo + d]! * qkv[qo + d]!;
    sk += qkv[ko + d]! * qkv[ko + d]!;
  }
  const qs = 1 / Math.sqrt(sq + 1e-6) / Math.sqrt(dk);
  const ks = 1 / Math.sqrt(sk + 1e-6);
  for (let d = 0; d < dk; d++) {
    qOut[d] = qkv[qo + d]! * qs;
    kOut[d] = qkv[ko + d]! * ks;
  }
}

export function gdnRecurrent(out: Float32Array, qkv: Float32Array, g: Float32Array, beta: Float32Array,
  state: Float32Array, dims: GdnDims, t: number, scratch?: Float32Array): void {
  const { numKeyHeads: hk, numValueHeads: hv, keyDim: dk, valueDim: dv } = dims;
  const width = 2 * hk * dk + hv * dv;
  const r = hv / hk;
  const stateSize = hv * dk * dv;
  const q = new Float64Array(dk);
  const k = new Float64Array(dk);
  const kv = new Float64Array(dv);
  const delta = new Float64Array(dv);
  const acc = new Float64Array(dv);
  for (let i = 0; i < t; i++) {
    // state evolves src → dst: in place without scratch; otherwise step i reads the
    // previous step's scratch (or the untouched committed state) and writes scratch[i].
    const src = !scratch ? state : i === 0 ? state : scratch.subarray((i - 1) * stateSize, i * stateSize);
    const dst = !scratch ? state : scratch.subarray(i * stateSize, (i + 1) * stateSize);
    for (let h = 0; h < hv; h++) {
      normalizedQK(qkv, i, Math.floor(h / r), dims, q, k);
      const decay = Math.exp(g[i * hv + h]!);
      const bt = beta[i * hv + h]!;
      const vo = i * width + 2 * hk * dk + h * dv;
      const so = h * dk * dv;
      kv.fill(0);
      for (let a = 0; a < dk; a++) {
        for (let c = 0; c < dv; c++) kv[c] = kv[c]! + src[so + a * dv + c]! * decay * k[a]!;
      }
      for (let c = 0; c < dv; c++) delta[c] = bt * (qkv[vo + c]! - kv[c]!);
      acc.fill(0);
      for (let a = 0; a < dk; a++) {
        for (let c = 0; c < dv; c++) {
          const s = src[so + a * dv + c]! * decay + k[a]! * delta[c]!;
          dst[so + a * dv + c] = s;
          acc[c] = acc[c]! + s * q[a]!;
        }
      }
      const oo = (i * hv + h) * dv;
      for (let c = 0; c < dv; c++) out[oo + c] = acc[c]!;
    }
  }
}

/** Chunked form (C = GDN_CHUNK, boundaries at absolute positions multiple of C) for one
 * sequence; equals the recurrence up to rounding. */
export function gdnChunked(out: Float32Array, qkv: Float32Array, g: Float32Array, beta: Float32Array,
  state: Float32Array, dims: GdnDims, t: number, pos0 = 0): void {
  const { numKeyHeads: hk, numValueHeads: hv, keyDim: dk, valueDim: dv } = dims;
  const r = hv / hk;
  const width = 2 * hk * dk + hv * dv;
  const C = GDN_CHUNK;
  const qh = new Float64Array(C * dk); // [c, dk]
  const kh = new Float64Array(C * dk);
  const gam = new Float64Array(C); // cumulative log decay Γ
  const u = new Float64Array(C * dv); // U = T·(V⊙β)
  const w = new Float64Array(C * dk); // W = T·(K̂⊙β⊙exp Γ)
  const vnew = new Float64Array(C * dv);
  const s = new Float64Array(dk * dv);
  const kk = new Float64Array(C * C);
  for (let h = 0; h < hv; h++) {
    const so = h * dk * dv;
    for (let i = 0; i < dk * dv; i++) s[i] = state[so + i]!;
    // chunk boundaries at absolute multiples of C: the first chunk ends at the next one
    for (let c0 = 0, n = 0; c0 < t; c0 += n) {
      n = Math.min(c0 === 0 ? C - (pos0 % C) : C, t - c0);
      loadChunk(qkv, g, c0, n, h, Math.floor(h / r), dims, qh, kh, gam);
      // A[i][j] = β_i (k̂_i·k̂_j) exp(Γ_i − Γ_j), j < i; forward substitution for U and W.
      for (let i = 0; i < n; i++) {
        const bi = beta[(c0 + i) * hv + h]!;
        for (let j = 0; j < i; j++) {
          let dot = 0;
          for (let d = 0; d < dk; d++) dot += kh[i * dk + d]! * kh[j * dk + d]!;
          kk[i * C + j] = dot;
        }
        const vo = (c0 + i) * width + 2 * hk * dk + h * dv;
        const eg = Math.exp(gam[i]!);
        for (let c = 0; c < dv; c++) u[i * dv + c] = bi * qkv[vo + c]!;
        for (let d = 0; d < dk; d++) w[i * dk + d] = bi * eg * kh[i * dk + d]!;
        for (let j = 0; j < i; j++) {
          const aij = bi * kk[i * C + j]! * Math.exp(gam[i]! - gam[j]!);
          for (let c = 0; c < dv; c++) u[i * dv + c] = u[i * dv + c]! - aij * u[j * dv + c]!;
          for (let d = 0; d < dk; d++) w[i * dk + d] = w[i * dk + d]! - aij * w[j * dk + d]!;
        }
      }
      // Vnew = U − W·S
      for (let i = 0; i < n; i++) {
        for (let c = 0; c < dv; c++) {
          let acc = u[i * dv + c]!;
          for (let d = 0; d < dk; d++) acc -= w[i * dk + d]! * s[d * dv + c]!;
          vnew[i * dv + c] = acc;
        }
      }
      // O = (Q̂⊙exp Γ)·S + lower_incl(Q̂K̂ᵀ ⊙ L)·Vnew
      for (let i = 0; i < n; i++) {
        const eg = Math.exp(gam[i]!);
        const oo = ((c0 + i) * hv + h) * dv;
        for (let c = 0; c < dv; c++) {
          let acc = 0;
          for (let d = 0; d < dk; d++) acc += qh[i * dk + d]! * s[d * dv + c]!;
          acc *= eg;
          for (let j = 0; j <= i; j++) {
            let dot = 0;
            for (let d = 0; d < dk; d++) dot += qh[i * dk + d]! * kh[j * dk + d]!;
            acc += dot * Math.exp(gam[i]! - gam[j]!) * vnew[j * dv + c]!;
          }
          out[oo + c] = acc;
        }
      }
      // S = S·exp(Γ_last) + (K̂ ⊙ exp(Γ_last − Γ))ᵀ·Vnew
      const gl = gam[n - 1]!;
      const el = Math.exp(gl);
      for (let d = 0; d < dk; d++) {
        for (let c = 0; c < dv; c++) {
          let acc = s[d * dv + c]! * el;
          for (let j = 0; j < n; j++) acc += kh[j * dk + d]! * Math.exp(gl - gam[j]!) * vnew[j * dv + c]!;
          // rounded to f32 at every chunk boundary: a prefill split at multiples of 64
          // gives bit-identical results to one call
          s[d * dv + c] = Math.fround(acc);
        }
      }
    }
    for (let i = 0; i < dk * dv; i++) state[so + i] = s[i]!;
  }
}

function loadChunk(qkv: Float32Array, g: Float32Array, c0: number, n: number, h: number, keyHead: number,
  dims: GdnDims, qh: Float64Array, kh: Float64Array, gam: Float64Array): void {
  const dk = dims.keyDim;
  const q = new Float64Array(dk);
  const k = new Float64Array(dk);
  let cum = 0;
  for (let i = 0; i < n; i++) {
    normalizedQK(qkv, c0 + i, keyHead, dims, q, k);
    qh.set(q, i * dk);
    kh.set(k, i * dk);
    cum += g[(c0 + i) * dims.numValueHeads + h]!;
    gam[i] = cum;
  }
}
