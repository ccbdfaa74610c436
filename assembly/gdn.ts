// Gated DeltaNet: causal conv (+SiLU) and the token-by-token recurrence.
// Math: ../../shared/MODEL-NOTES.md "Gated DeltaNet layer". f32 arithmetic; per element a
// fixed order that depends only on the element's own inputs, so results are identical
// whatever T, the head/channel split across threads, and with or without scratch.
import { sumSq, scaleTo, wAt, f32At, f32Set, siluf, silu4, mac, mac1 } from './common';

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
  if (t == 1 && kw == 4 && !scratch) { // decode: the window shifts in the same pass
    convStep4(out, x, window, w, wBf16, c, c0, c4);
    for (let ch = c4; ch < c1; ch++) convStep1(out, x, window, w, wBf16, c, ch);
    return;
  }
  for (let i = 0; i < t; i++) {
    for (let ch = c0; ch < c4; ch += 4) {
      let acc = f32x4.splat(0);
      if (kw == 4) {
        acc = taps4(w, ch, wBf16, virt4(window, x, c, hist, i, ch), virt4(window, x, c, hist, i + 1, ch),
          virt4(window, x, c, hist, i + 2, ch), virt4(window, x, c, hist, i + 3, ch));
      } else {
        for (let j = 0; j < kw; j++) {
          const wv = f32x4(wAt(w, ch * kw + j, wBf16), wAt(w, (ch + 1) * kw + j, wBf16),
            wAt(w, (ch + 2) * kw + j, wBf16), wAt(w, (ch + 3) * kw + j, wBf16));
          acc = f32x4.add(acc, f32x4.mul(wv, virt4(window, x, c, hist, i + j, ch)));
        }
      }
      v128.store(out + ((<usize>i * <usize>c + <usize>ch) << 2), silu4(acc));
    }
    for (let ch = c4; ch < c1; ch++) {
      let acc: f32 = 0;
      for (let j = 0; j < kw; j++) acc += wAt(w, ch * kw + j, wBf16) * virt(window, x, c, hist, i + j, ch);
      f32Set(out, i * c + ch, siluf(acc));
    }
    if (scratch) { // window after step i: virtual rows i+1 .. i+hist, slices [c0, c1)
      const bytes = <usize>(c1 - c0) << 2;
      for (let r = 0; r < hist; r++) {
        const so = scratch + ((<usize>(i * hist + r) * <usize>c + <usize>c0) << 2);
        memory.copy(so, virtRow(window, x, c, hist, i + 1 + r, c0), bytes);
      }
    }
  }
  if (!scratch) {
    // window row r ← virtual row t + r, in increasing r (a source row is read before
    // anything overwrites it): slices [c0, c1) copied whole
    const bytes = <usize>(c1 - c0) << 2;
    for (let r = 0; r < hist; r++) memory.copy(window + (<usize>(r * c + c0) << 2), virtRow(window, x, c, hist, t + r, c0), bytes);
  }
}

/** causalConv over channels [c0, c1) for each of `count` sequences of a batch (one
 * dispatch for all): descriptor i at desc + 20·i holds the i32 [out, x, window, scratch,
 * t] of its own causalConv call; w, wBf16, c, kw are shared. A channel's values depend on
 * that channel alone, so the bits are those of one call per sequence. */
export function causalConvSeqs(desc: usize, count: i32, w: usize, wBf16: i32, c: i32, kw: i32, c0: i32, c1: i32): void {
  for (let i = 0; i < count; i++) {
    const p = desc + <usize>i * 20;
    causalConv(load<u32>(p), load<u32>(p, 4), load<u32>(p, 8), w, wBf16, load<i32>(p, 16), c, kw, load<u32>(p, 12), c0, c1);
  }
}

/** The 4 taps of channel ch (kw = 4) widened to f32. */
// @ts-ignore: decorator
@inline function wRow4(w: usize, ch: i32, wBf16: i32): v128 {
  if (wBf16) return i32x4.shl(v128.load16x4_u(w + (<usize>ch << 3)), 16);
  return v128.load(w + (<usize>ch << 4));
}

/** Address of channel ch of virtual row r (window rows, then x rows). */
// @ts-ignore: decorator
@inline function virtRow(window: usize, x: usize, c: i32, hist: i32, r: i32, ch: i32): usize {
  return r < hist ? window + (<usize>(r * c + ch) << 2) : x + (<usize>((r - hist) * c + ch) << 2);
}

/** Σ_j w[ch.., j]·v_j (j = 0..3, increasing, from 0) for channels ch..ch+3, v_j their
 * virtual row j: the taps by 4 row loads and a 4×4 transpose instead of 16 scalar loads. */
// @ts-ignore: decorator
@inline function taps4(w: usize, ch: i32, wBf16: i32, v0: v128, v1: v128, v2: v128, v3: v128): v128 {
  const r0 = wRow4(w, ch, wBf16), r1 = wRow4(w, ch + 1, wBf16);
  const r2 = wRow4(w, ch + 2, wBf16), r3 = wRow4(w, ch + 3, wBf16);
  const t0 = v128.shuffle<f32>(r0, r1, 0, 4, 1, 5), t1 = v128.shuffle<f32>(r2, r3, 0, 4, 1, 5);
  const t2 = v128.shuffle<f32>(r0, r1, 2, 6, 3, 7), t3 = v128.shuffle<f32>(r2, r3, 2, 6, 3, 7);
  let acc = f32x4.add(f32x4.splat(0), f32x4.mul(v128.shuffle<f32>(t0, t1, 0, 1, 4, 5), v0));
  acc = f32x4.add(acc, f32x4.mul(v128.shuffle<f32>(t0, t1, 2, 3, 6, 7), v1));
  acc = f32x4.add(acc, f32x4.mul(v128.shuffle<f32>(t2, t3, 0, 1, 4, 5), v2));
  return f32x4.add(acc, f32x4.mul(v128.shuffle<f32>(t2, t3, 2, 3, 6, 7), v3));
}

/** One token (T = 1, kw = 4, no scratch) over channels [c0, c4) (c4 − c0 a multiple of 4):
 * out = silu(Σ_j w[ch, j]·v_j) with v_0..v_2 the window rows and v_3 = x, as causalConv's
 * loop computes it; each vector's window rows then take v_1, v_2, v_3 (its own channels
 * only, after they are read), which is the memory.copy shift of the general path without
 * its second pass over the window. */
function convStep4(out: usize, x: usize, window: usize, w: usize, wBf16: i32, c: i32, c0: i32, c4: i32): void {
  const rs = <usize>c << 2; // row stride (bytes)
  for (let ch = c0; ch < c4; ch += 4) {
    const wp = window + (<usize>ch << 2);
    const v0 = v128.load(wp), v1 = v128.load(wp + rs), v2 = v128.load(wp + 2 * rs);
    const v3 = v128.load(x + (<usize>ch << 2));
    v128.store(out + (<usize>ch << 2), silu4(taps4(w, ch, wBf16, v0, v1, v2, v3)));
    v128.store(wp, v1);
    v128.store(wp + rs, v2);
    v128.store(wp + 2 * rs, v3);
  }
}

/** convStep4 for one channel (the scalar twin of a lane). */
function convStep1(out: usize, x: usize, window: usize, w: usize, wBf16: i32, c: i32, ch: i32): void {
  const v0 = f32At(window, ch), v1 = f32At(window, c + ch), v2 = f32At(window, 2 * c + ch), v3 = f32At(x, ch);
  let acc: f32 = 0;
  acc += wAt(w, ch * 4, wBf16) * v0;
  acc += wAt(w, ch * 4 + 1, wBf16) * v1;
  acc += wAt(w, ch * 4 + 2, wBf16) * v2;
  acc += wAt(w, ch * 4 + 3, wBf16) * v3;
  f32Set(out, ch, siluf(acc));
  f32Set(window, ch, v1);
  f32Set(window, c + ch, v2);
  f32Set(window, 2 * c + ch, v3);
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

// The two passes over one head's state S [dk, dv] (rows a, columns c). Every output column
// accumulates over the rows a = 0..dk−1 in increasing order from 0 with mac(). The first
// pass (stateTk) reads S from memory and walks it in row order, its dv sums in L1: 1.8 →
// 1.65 ms per decode step on an Intel Xeon VM against column blocks outermost, whose
// 512-byte strides the prefetchers do not follow. The second (stateUpdate) finds S in L2
// and keeps column blocks outermost, accumulators in registers (16 columns = 4 chains):
// row order there was slower. Vector lanes and the scalar tail run the same ops (mac1 is
// a lane of mac), so a column's value never depends on the dv split or the pass order.

/** kv[c] = Σ_a S[a, c]·(decay·k[a])  (= (S·e^g)ᵀ k̂). Rows in memory order, kv (in L1)
 * holding the dv running sums: the state streams sequentially (the first read of this
 * step's S comes from memory), and each column still sums over a = 0..dk−1 in order from 0. */
function stateTk(kv: usize, s: usize, decay: f32, kn: usize, dk: i32, dv: i32): void {
  const rb = <usize>dv << 2;
  const v16 = <usize>(dv & ~15) << 2; // bytes of the 16-column blocks
  memory.fill(kv, 0, rb);
  let p = s;
  for (let a = 0; a < dk; a++) {
    const ka = decay * f32At(kn, a);
    const kd = f32x4.splat(ka);
    for (let cb: usize = 0; cb < v16; cb += 64) {
      const o = kv + cb, r = p + cb;
      v128.store(o, mac(v128.load(o), v128.load(r), kd));
      v128.store(o, mac(v128.load(o, 16), v128.load(r, 16), kd), 16);
      v128.store(o, mac(v128.load(o, 32), v128.load(r, 32), kd), 32);
      v128.store(o, mac(v128.load(o, 48), v128.load(r, 48), kd), 48);
    }
    for (let c = dv & ~15; c < dv; c++) f32Set(kv, c, mac1(f32At(kv, c), f32At(p, c), ka));
    p += rb;
  }
}

/** S'[a, c] = S[a, c]·decay + k[a]·δ[c] → d (may be s); o[c] = Σ_a S'[a, c]·q[a]. */
function stateUpdate(d: usize, s: usize, decay: f32, kn: usize, delta: usize, qn: usize, o: usize, dk: i32, dv: i32): void {
  const rb = <usize>dv << 2;
  const d4 = f32x4.splat(decay);
  let c = 0;
  for (; c + 16 <= dv; c += 16) {
    const cb = <usize>c << 2;
    const e0 = v128.load(delta + cb), e1 = v128.load(delta + cb, 16);
    const e2 = v128.load(delta + cb, 32), e3 = v128.load(delta + cb, 48);
    let o0 = f32x4.splat(0), o1 = f32x4.splat(0), o2 = f32x4.splat(0), o3 = f32x4.splat(0);
    let p = s + cb;
    let q = d + cb;
    for (let a = 0; a < dk; a++) {
      const ka = v128.load32_splat(kn + (<usize>a << 2));
      const qa = v128.load32_splat(qn + (<usize>a << 2));
      const n0 = mac(f32x4.mul(ka, e0), v128.load(p), d4);
      const n1 = mac(f32x4.mul(ka, e1), v128.load(p, 16), d4);
      const n2 = mac(f32x4.mul(ka, e2), v128.load(p, 32), d4);
      const n3 = mac(f32x4.mul(ka, e3), v128.load(p, 48), d4);
      v128.store(q, n0); v128.store(q, n1, 16); v128.store(q, n2, 32); v128.store(q, n3, 48);
      o0 = mac(o0, n0, qa);
      o1 = mac(o1, n1, qa);
      o2 = mac(o2, n2, qa);
      o3 = mac(o3, n3, qa);
      p += rb;
      q += rb;
    }
    v128.store(o + cb, o0); v128.store(o + cb, o1, 16); v128.store(o + cb, o2, 32); v128.store(o + cb, o3, 48);
  }
  for (; c < dv; c++) {
    let acc: f32 = 0;
    for (let a = 0; a < dk; a++) {
      const sn = mac1(f32At(kn, a) * f32At(delta, c), f32At(s + <usize>a * rb, c), decay);
      f32Set(d + <usize>a * rb, c, sn);
      acc = mac1(acc, sn, f32At(qn, a));
    }
    f32Set(o, c, acc);
  }
}

/** gdnRecurrent for `count` sequences of a batch in one dispatch: units [u0, u1) are
 * (sequence u / hv, head u mod hv); descriptor i at desc + 28·i holds the i32 [out, qkv, g,
 * beta, state, scratch, t] of sequence i's own call. Heads are independent, so the bits are
 * those of one gdnRecurrent per sequence. */
export function gdnRecurrentSeqs(desc: usize, count: i32, hk: i32, hv: i32, dk: i32, dv: i32, u0: i32, u1: i32, tmp: usize): void {
  for (let i = u0 / hv; i < count && i * hv < u1; i++) {
    const p = desc + <usize>i * 28;
    gdnRecurrent(load<u32>(p), load<u32>(p, 4), load<u32>(p, 8), load<u32>(p, 12), load<u32>(p, 16), load<u32>(p, 20), load<i32>(p, 24),
      hk, hv, dk, dv, max(u0 - i * hv, 0), min(u1 - i * hv, hv), tmp);
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
      stateTk(kv, src, decay, kn, dk, dv);
      const vr = qkv + ((<usize>i * <usize>width + <usize>(2 * hk * dk + h * dv)) << 2);
      for (let c = 0; c < dv; c++) f32Set(delta, c, bt * (f32At(vr, c) - f32At(kv, c)));
      const orow = out + ((<usize>(i * hv + h) * <usize>dv) << 2);
      stateUpdate(dst, src, decay, kn, delta, qn, orow, dk, dv);
    }
  }
}
