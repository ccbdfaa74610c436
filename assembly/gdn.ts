// Gated DeltaNet: causal conv (+SiLU) and the token-by-token recurrence.
// Math: ../../shared/MODEL-NOTES.md "Gated DeltaNet layer". f32 arithmetic; per element a
// fixed order that depends only on the element's own inputs, so results are identical
// whatever T, the head/channel split across threads, and with or without scratch.
import { sumSq, scaleTo, zero, wAt, f32At, f32Set, siluf, silu4 } from './common';

/** Causal depthwise conv + SiLU over channels [c0, c1). Virtual input rows:
 * [window (K−1 rows) ; x (T rows)]; x: [T, C], window: [K−1, C], w: [C, K] (bf16|f32),
 * out: [T, C]. acc = Σ_{j<K} w[ch, j]·row[i + j][ch] in increasing j, out = silu(acc).
 * scratch != 0 ([T, K−1, C]): window is read only, scratch[i] = window after step i.
 * scratch == 0: window ← its last K−1 virtual rows (rows written in increasing order, which
 * never overwrites a row still to be read). */
export function causalConv(out: usize, x: usize, window: usize, w: usize, wBf16: i32, t: i32, c: i32, kw: i32,
  scratch: usize, c0: i32, c1: i32): void {
  const hist = kw - 1;
  // 4 channels per vector while they fit in [c0, c1), then single channels; both compute
  // acc = Σ_j w[ch, j]·v_j in increasing j with plain mul/add, so they agree bit for bit.
  const c4 = c0 + ((c1 - c0) & ~3);
  for (let i = 0; i < t; i++) {
    for (let ch = c0; ch < c4; ch += 4) {
      let acc = f32x4.splat(0);
      for (let j = 0; j < kw; j++) {
        const wv = f32x4(wAt(w, ch * kw + j, wBf16), wAt(w, (ch + 1) * kw + j, wBf16),
          wAt(w, (ch + 2) * kw + j, wBf16), wAt(w, (ch + 3) * kw + j, wBf16));
        acc = f32x4.add(acc, f32x4.mul(wv, virt4(window, x, c, hist, i + j, ch)));
      }
      v128.store(out + ((<usize>i * <usize>c + <usize>ch) << 2), silu4(acc));
    }
    for (let ch = c4; ch < c1; ch++) {
      let acc: f32 = 0;
      for (let j = 0; j < kw; j++) acc += wAt(w, ch * kw + j, wBf16) * virt(window, x, c, hist, i + j, ch);
      f32Set(out, i * c + ch, siluf(acc));
    }
    if (scratch) {
      for (let r = 0; r < hist; r++) {
        const so = scratch + ((<usize>(i * hist + r) * <usize>c) << 2);
        for (let ch = c0; ch < c1; ch++) f32Set(so, ch, virt(window, x, c, hist, i + 1 + r, ch));
      }
    }
  }
  if (!scratch) {
    for (let r = 0; r < hist; r++) {
      for (let ch = c0; ch < c1; ch++) f32Set(window, r * c + ch, virt(window, x, c, hist, t + r, ch));
    }
  }
}

/** Channels ch..ch+3 of virtual row r (window rows, then x rows). */
// @ts-ignore: decorator
@inline function virt4(window: usize, x: usize, c: i32, hist: i32, r: i32, ch: i32): v128 {
  return r < hist ? v128.load(window + ((<usize>(r * c + ch)) << 2)) : v128.load(x + ((<usize>((r - hist) * c + ch)) << 2));
}

// @ts-ignore: decorator
@inline function virt(window: usize, x: usize, c: i32, hist: i32, r: i32, ch: i32): f32 {
  return r < hist ? f32At(window, r * c + ch) : f32At(x, (r - hist) * c + ch);
}

/** q̂ = q/√(Σq²+1e−6)·dk^−½ and k̂ = k/√(Σk²+1e−6) of token i, key head kh → qn, kn ([dk]).
 * Scales in f64, rounded once; products in f32. */
export function normQK(qkv: usize, width: i32, i: i32, kh: i32, hk: i32, dk: i32, qn: usize, kn: usize): void {
  const qr = qkv + ((<usize>i * <usize>width + <usize>kh * <usize>dk) << 2);
  const kr = qkv + ((<usize>i * <usize>width + <usize>(hk + kh) * <usize>dk) << 2);
  const qs = <f32>(1.0 / Math.sqrt(<f64>sumSq(qr, dk) + 1e-6) / Math.sqrt(<f64>dk));
  const ks = <f32>(1.0 / Math.sqrt(<f64>sumSq(kr, dk) + 1e-6));
  scaleTo(qn, qs, qr, dk);
  scaleTo(kn, ks, kr, dk);
}

/** kv[c] += (s[c]·decay)·ka. */
function kvAcc(kv: usize, s: usize, decay: f32, ka: f32, n: i32): void {
  const dv = f32x4.splat(decay);
  const kv4 = f32x4.splat(ka);
  const n4 = n & ~3;
  let c = 0;
  for (; c < n4; c += 4) {
    const o = <usize>c << 2;
    v128.store(kv + o, f32x4.add(v128.load(kv + o), f32x4.mul(f32x4.mul(v128.load(s + o), dv), kv4)));
  }
  for (; c < n; c++) f32Set(kv, c, f32At(kv, c) + f32At(s, c) * decay * ka);
}

/** s' = s[c]·decay + ka·delta[c] → d[c] (d may equal s); o[c] += s'·qa. */
function rowUpdate(d: usize, s: usize, decay: f32, ka: f32, delta: usize, qa: f32, o: usize, n: i32): void {
  const dv = f32x4.splat(decay);
  const k4 = f32x4.splat(ka);
  const q4 = f32x4.splat(qa);
  const n4 = n & ~3;
  let c = 0;
  for (; c < n4; c += 4) {
    const p = <usize>c << 2;
    const sn = f32x4.add(f32x4.mul(v128.load(s + p), dv), f32x4.mul(k4, v128.load(delta + p)));
    v128.store(d + p, sn);
    v128.store(o + p, f32x4.add(v128.load(o + p), f32x4.mul(sn, q4)));
  }
  for (; c < n; c++) {
    const sn = f32At(s, c) * decay + ka * f32At(delta, c);
    f32Set(d, c, sn);
    f32Set(o, c, f32At(o, c) + sn * qa);
  }
}

/** Recurrence for value heads [h0, h1), all T steps of each head (heads are independent).
 * qkv: [T, 2·HK·dk + HV·dv]; g, beta: [T, HV]; state: [HV, dk, dv]; out: [T, HV, dv];
 * scratch: 0 (state updated in place) or [T, HV, dk, dv] (state read only, step i writes
 * scratch[i] and step i+1 reads it). tmp: this thread's f32 scratch [2·dk + 2·dv].
 * Per step: S ← S·e^g; kv = Sᵀk̂; δ = β(v − kv); S ← S + k̂⊗δ; o = Sᵀq̂ — with S·e^g
 * recomputed bit-identically in both passes, sums over the dk rows in increasing order. */
export function gdnRecurrent(out: usize, qkv: usize, g: usize, beta: usize, state: usize, scratch: usize, t: i32,
  hk: i32, hv: i32, dk: i32, dv: i32, h0: i32, h1: i32, tmp: usize): void {
  const width = 2 * hk * dk + hv * dv;
  const ratio = hv / hk;
  const ssBytes = (<usize>hv * <usize>dk * <usize>dv) << 2;
  const rowBytes = <usize>dv << 2;
  const qn = tmp;
  const kn = qn + (<usize>dk << 2);
  const kv = kn + (<usize>dk << 2);
  const delta = kv + rowBytes;
  for (let h = h0; h < h1; h++) {
    const headOff = (<usize>h * <usize>dk * <usize>dv) << 2;
    for (let i = 0; i < t; i++) {
      const src = (scratch == 0 || i == 0 ? state : scratch + <usize>(i - 1) * ssBytes) + headOff;
      const dst = (scratch == 0 ? state : scratch + <usize>i * ssBytes) + headOff;
      normQK(qkv, width, i, h / ratio, hk, dk, qn, kn);
      const decay = <f32>Math.exp(<f64>f32At(g, i * hv + h));
      const bt = f32At(beta, i * hv + h);
      zero(kv, dv);
      for (let a = 0; a < dk; a++) kvAcc(kv, src + <usize>a * rowBytes, decay, f32At(kn, a), dv);
      const vr = qkv + ((<usize>i * <usize>width + <usize>(2 * hk * dk + h * dv)) << 2);
      for (let c = 0; c < dv; c++) f32Set(delta, c, bt * (f32At(vr, c) - f32At(kv, c)));
      const orow = out + ((<usize>(i * hv + h) * <usize>dv) << 2);
      zero(orow, dv);
      for (let a = 0; a < dk; a++) {
        rowUpdate(dst + <usize>a * rowBytes, src + <usize>a * rowBytes, decay, f32At(kn, a), delta, f32At(qn, a), orow, dv);
      }
    }
  }
}
