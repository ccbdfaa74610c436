// Sampling over logits rows: the reference definition (assembly/sampling.ts computes the
// same bits, SIMD). Per row, with f = round to f32 and all sums in f64:
//
//  logprobs (raw row x, before penalties and temperature):
//    rawMax  = max x (NaN ignored; 4 lane maxima over i mod 4, combined (l0,l1),(l2,l3)),
//    rawSumExp = Σ exp32(f(x_i − rawMax)) as lanes: ids ≡ j (mod 4) summed in order into l_j,
//      then (l0 + l1) + (l2 + l3);
//    top-N raw logits (value desc, id asc; NaN skipped; missing entries id −1, −inf).
//    (log-softmax: x_i − rawMax − ln rawSumExp, the log taken by the caller.)
//  draw / dist:
//    s = x with the penalty patches written over it (s[patchIds[j]] = patchVals[j]);
//    m = max s; w_i = exp32(f(f(s_i − m)·invT)), then 0 where w_i < f(minP).
//    exp32 is Cephes' expf polynomial in f32 (no fused multiply-add; 0 below −87).
//    Order: weight desc, id asc; ids with w = 0 are never kept.
//    top-k (0 < k < n): keep the first k of the order; then top-p (p < 1): keep the
//    shortest prefix of the kept order whose mass reaches p · (kept mass). Masses are summed
//    by the radix walk of `select` (buckets of the weight bits 30..20, 19..10, 9..0, each
//    level's bucket masses in id order — at level 0 over the whole row (top-p alone) as
//    four partial sums by id mod 4, (p0 + p1) + (p2 + p3); buckets descending; then single
//    ties in id order). The kept set is always {w > τ} ∪ {w = τ, id ≤ lim} (bits compared
//    as integers). Kept mass M: per block of 64 ids, the kept weights as lanes by id mod 4
//    (as rawSumExp); blocks in order.
//    Draw with u ∈ [0, 1): the first kept id whose running mass (whole blocks, then ids
//    in order inside the crossing block) exceeds u·M; fallbacks: the last kept id of the
//    crossing block, else of the row.
//  A row whose max is not finite is one-hot on its first maximum.
import type { SampleResult, SampleRow } from '../types.js';

const f = Math.fround;
const EXP_MIN = f(-87.0);
const LOG2E = f(1.44269504088896341);
const C1 = f(0.693359375);
const C2 = f(-2.12194440e-4);
const P = [1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1].map(f);
const BLOCK = 64;

/** Round half to even (f32x4.nearest) of an f32 value. */
function nearestEven(v: number): number {
  const r = Math.round(v);
  return r - v === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

/** exp(y) for y ≤ 0 in f32 arithmetic; 0 where y < −87 or NaN. */
export function exp32(y: number): number {
  if (!(y >= EXP_MIN)) return 0;
  const k = nearestEven(f(y * LOG2E));
  let r = f(y - f(k * C1!));
  r = f(r - f(k * C2!));
  const z = f(r * r);
  let p = f(f(P[0]! * r) + P[1]!);
  for (let j = 2; j < 6; j++) p = f(f(p * r) + P[j]!);
  p = f(f(p * z) + r);
  p = f(p + 1);
  return f(p * 2 ** k);
}

const pmax = (a: number, b: number): number => (a < b ? b : a);

export function rowMax(x: Float32Array, n: number): number {
  const n4 = n & ~3;
  const acc = [-Infinity, -Infinity, -Infinity, -Infinity];
  for (let i = 0; i < n4; i++) acc[i & 3] = pmax(acc[i & 3]!, x[i]!);
  let m = pmax(pmax(acc[0]!, acc[1]!), pmax(acc[2]!, acc[3]!));
  for (let i = n4; i < n; i++) m = pmax(m, x[i]!);
  return m;
}

/** Σ v(i) over ids [lo, hi) as lanes by id mod 4: (l0 + l1) + (l2 + l3). */
function laneSum(lo: number, hi: number, v: (i: number) => number): number {
  const l = [0, 0, 0, 0];
  for (let i = lo; i < hi; i++) l[i & 3]! += v(i);
  return (l[0]! + l[1]!) + (l[2]! + l[3]!);
}

function sumExp(x: Float32Array, n: number, m: number): number {
  return laneSum(0, n, (i) => exp32(f(x[i]! - m)));
}

function topRaw(x: Float32Array, n: number, topN: number, ids: Int32Array, vals: Float32Array): void {
  const top: number[] = [];
  for (let i = 0; i < n; i++) {
    const v = x[i]!;
    if (v !== v) continue;
    if (top.length === topN && !(v > x[top[topN - 1]!]!)) continue;
    if (top.length === topN) top.pop();
    let j = top.length;
    while (j > 0 && x[top[j - 1]!]! < v) j--;
    top.splice(j, 0, i);
  }
  for (let j = 0; j < topN; j++) {
    ids[j] = j < top.length ? top[j]! : -1;
    vals[j] = j < top.length ? x[top[j]!]! : -Infinity;
  }
}

/** A kept set {bits > tau} ∪ {bits = tau, id ≤ lim}. */
export interface Cut { readonly tau: number; readonly lim: number }

/** The cut before top-k / top-p: every id of nonzero weight. */
export const NONZERO: Cut = { tau: 0, lim: -1 };

function inSet(k: number, i: number, c: Cut): boolean {
  return k > c.tau || (k === c.tau && i <= c.lim);
}

/** A row's weighted entries: ids ascending (the full row: every id of [0, n)), their
 * weights w (min-p applied) and w's bits. Every id of [0, n) that is not an entry has
 * weight 0 and is kept by no cut (so a row reduced to its entries computes the same bits:
 * its absent ids would only add +0 to sums of nonnegative f64 values). */
export interface Entries {
  readonly ids: Int32Array;
  readonly w: Float32Array;
  readonly bits: Uint32Array;
  /** The row's length (top-k applies when 0 < k < n; blocks of 64 ids cover [0, n)). */
  readonly n: number;
}

/** Entries weighed from their patched logits s (m: the row's max s, finite): w =
 * exp32(f(f(s − m)·invT)), then 0 where w < f(minP). */
export function weighEntries(ids: Int32Array, s: ArrayLike<number>, n: number, m: number, invTemperature: number, minP: number): Entries {
  const invT = f(invTemperature);
  const mp = f(minP);
  const w = new Float32Array(ids.length);
  for (let j = 0; j < ids.length; j++) {
    const e = exp32(f(f(s[j]! - m) * invT));
    w[j] = e < mp ? 0 : e;
  }
  return { ids, w, bits: new Uint32Array(w.buffer), n };
}

/** The shortest prefix of the order within `set` whose count reaches `param` (count mode)
 * or whose mass reaches param · (mass of the set) (mass mode); the set itself if none.
 * `list`: entry positions (ascending) whose level-0 masses are summed in order; null: every
 * entry, level-0 masses as four partial sums by id mod 4. */
function select(e: Entries, byMass: boolean, param: number, set: Cut, list: number[] | null = null): Cut {
  const { cnt, mass } = levelZero(e, set, list);
  let target = param;
  if (byMass) target = param * massTotal(mass);
  const all = list ?? Array.from({ length: e.ids.length }, (_, j) => j);
  return walkCut(e, set, all, cnt, mass, byMass ? (_c, m) => m >= target : (c) => c >= param);
}

/** Level 0 of select: per bucket of weight bits 30..20, the count and f64 mass of the set's
 * entries (list: in list order; null: four partial sums by id mod 4, (p0 + p1) + (p2 + p3)). */
export function levelZero(e: Entries, set: Cut, list: number[] | null): { cnt: Int32Array; mass: Float64Array } {
  const { ids, w, bits } = e;
  const cnt = new Int32Array(1024);
  const mass = new Float64Array(1024);
  if (list) {
    for (const j of list) {
      if (!inSet(bits[j]!, ids[j]!, set)) continue;
      cnt[bits[j]! >>> 20]!++;
      mass[bits[j]! >>> 20]! += w[j]!;
    }
    return { cnt, mass };
  }
  const part = [0, 1, 2, 3].map(() => new Float64Array(1024));
  for (let j = 0; j < ids.length; j++) {
    if (!inSet(bits[j]!, ids[j]!, set)) continue;
    cnt[bits[j]! >>> 20]!++;
    part[ids[j]! & 3]![bits[j]! >>> 20]! += w[j]!;
  }
  for (let b = 0; b < 1024; b++) mass[b] = (part[0]![b]! + part[1]![b]!) + (part[2]![b]! + part[3]![b]!);
  return { cnt, mass };
}

/** select's mass of the set: the level-0 bucket masses summed from the top bucket down. */
export function massTotal(mass: Float64Array): number {
  let total = 0;
  for (let b = 1023; b >= 0; b--) total += mass[b]!;
  return total;
}

/** select's radix walk from its level-0 buckets (`cnt`, `mass`; consumed): `all` the entry
 * positions it draws the hit bucket's entries from (ascending), `reached(count, mass)` the
 * test of a running count and mass (called in the walk's order). */
export function walkCut(e: Entries, set: Cut, all: readonly number[], cnt: Int32Array, mass: Float64Array, reached: (c: number, m: number) => boolean): Cut {
  const { ids, w, bits } = e;
  let cumC = 0;
  let cumM = 0;
  let key = 0;
  let cand: number[] = [];
  for (let level = 0; level < 3; level++) {
    const shift = 20 - 10 * level;
    if (level > 0) {
      cnt.fill(0);
      mass.fill(0);
      for (const j of cand) {
        const b = (bits[j]! >>> shift) & 1023;
        cnt[b]!++;
        mass[b]! += w[j]!;
      }
    }
    let hit = -1;
    let lowest = -1;
    let beforeC = 0;
    let beforeM = 0;
    for (let b = 1023; b >= 0; b--) {
      const c = cnt[b]!;
      if (c === 0) continue;
      lowest = b;
      beforeC = cumC;
      beforeM = cumM;
      if (reached(cumC + c, cumM + mass[b]!)) {
        hit = b;
        break;
      }
      cumC += c;
      cumM += mass[b]!;
    }
    if (level === 0 && hit < 0) return set;
    if (hit < 0) {
      hit = lowest;
      cumC = beforeC;
      cumM = beforeM;
    }
    key = (key | (hit << shift)) >>> 0;
    const hiMask = level === 0 ? 0xfff00000 : level === 1 ? 0xfffffc00 : 0xffffffff;
    if (level === 0) {
      cand = [];
      for (const j of all) if (((bits[j]! & hiMask) >>> 0) === key && inSet(bits[j]!, ids[j]!, set)) cand.push(j);
    } else cand = cand.filter((j) => ((bits[j]! & hiMask) >>> 0) === key);
  }
  let last = -1;
  for (const j of cand) {
    last = ids[j]!;
    cumC++;
    cumM += w[j]!;
    if (reached(cumC, cumM)) break;
  }
  return { tau: key, lim: last };
}

/** The top-k cut (k = topK when 0 < topK < n, else every nonzero entry). */
export function topKCut(e: Entries, topK: number): Cut {
  return topK > 0 && topK < e.n ? select(e, false, topK, NONZERO) : NONZERO;
}

/** The kept cut: top-k, then top-p (p < 1) over the top-k set as a list when top-k applied,
 * else over every entry. */
export function keptCut(e: Entries, kCut: Cut, topK: number, topP: number): Cut {
  if (!(topP < 1)) return kCut;
  if (topK > 0 && topK < e.n) {
    const kset: number[] = [];
    for (let j = 0; j < e.ids.length; j++) if (inSet(e.bits[j]!, e.ids[j]!, kCut)) kset.push(j);
    return select(e, true, topP, kCut, kset);
  }
  return select(e, true, topP, kCut);
}

/** Per block of 64 ids (blocks[b] for ids [64b, 64b + 64)), the kept weights as lanes by id
 * mod 4; returns their sum over the blocks in order. dist[id] = kept weight (full rows). */
function keptBlocks(e: Entries, cut: Cut, blocks: Float64Array, dist: Float32Array | null): number {
  const { ids, w, bits, n } = e;
  let total = 0;
  let j = 0;
  for (let b = 0; b * BLOCK < n; b++) {
    const end = (b + 1) * BLOCK;
    const l = [0, 0, 0, 0];
    for (; j < ids.length && ids[j]! < end; j++) {
      const v = inSet(bits[j]!, ids[j]!, cut) ? w[j]! : 0;
      if (dist) dist[ids[j]!] = v;
      l[ids[j]! & 3]! += v;
    }
    const bs = (l[0]! + l[1]!) + (l[2]! + l[3]!);
    blocks[b] = bs;
    total += bs;
  }
  return total;
}

function drawKept(e: Entries, cut: Cut, blocks: Float64Array, target: number): number {
  const { ids, w, bits, n } = e;
  let cum = 0;
  let j = 0;
  for (let b = 0; b * BLOCK < n; b++) {
    const end = (b + 1) * BLOCK;
    if (!(cum + blocks[b]! > target)) {
      cum += blocks[b]!;
      while (j < ids.length && ids[j]! < end) j++;
      continue;
    }
    let last = -1;
    for (; j < ids.length && ids[j]! < end; j++) {
      if (!inSet(bits[j]!, ids[j]!, cut)) continue;
      cum += w[j]!;
      last = ids[j]!;
      if (cum > target) return last;
    }
    if (last >= 0) return last;
  }
  for (let k = ids.length - 1; k >= 0; k--) if (inSet(bits[k]!, ids[k]!, cut)) return ids[k]!;
  return 0;
}

/** The kept mass of `cut` and, when `draw`, the draw with uniform u. */
export function keptDraw(e: Entries, cut: Cut, u: number, draw: boolean, dist: Float32Array | null = null): { keptMass: number; token: number } {
  const blocks = new Float64Array(Math.ceil(e.n / BLOCK));
  const keptMass = keptBlocks(e, cut, blocks, dist);
  return { keptMass, token: draw ? drawKept(e, cut, blocks, u * keptMass) : -1 };
}

/** A row whose max is not finite: one-hot on its first maximum (id 0 for an all-NaN row). */
function oneHot(s: Float32Array, n: number, m: number): Entries {
  const w = new Float32Array(n);
  w[Math.max(0, s.indexOf(m))] = 1;
  return { ids: identity(n), w, bits: new Uint32Array(w.buffer), n };
}

let identityIds = new Int32Array(0);
function identity(n: number): Int32Array {
  if (identityIds.length < n) identityIds = Int32Array.from({ length: n }, (_, i) => i);
  return identityIds.subarray(0, n);
}

function sampleRow(row: SampleRow, out: SampleResult): void {
  const { logits: x, n } = row;
  if (row.logprobs) {
    const m = rowMax(x, n);
    out.rawMax = m;
    out.rawSumExp = m > -Infinity && m < Infinity ? sumExp(x, n, m) : 0;
    if (row.topN > 0) topRaw(x, n, row.topN, out.topIds, out.topVals);
  }
  if (!row.draw && !row.dist) return;
  const s = Float32Array.from(x.subarray(0, n));
  for (let j = 0; j < row.patchCount; j++) s[row.patchIds![j]!] = row.patchVals![j]!;
  const m = rowMax(s, n);
  let e: Entries;
  let cut = NONZERO;
  if (!(m > -Infinity && m < Infinity)) e = oneHot(s, n, m);
  else {
    e = weighEntries(identity(n), s, n, m, row.invTemperature, row.minP);
    cut = keptCut(e, topKCut(e, row.topK), row.topK, row.topP);
  }
  const r = keptDraw(e, cut, row.u, row.draw, row.dist);
  out.keptMass = r.keptMass;
  if (row.draw) out.token = r.token;
}

/** The Kernels.sample reference: every row independently. */
export function sample(rows: readonly SampleRow[], out: readonly SampleResult[]): void {
  rows.forEach((r, i) => sampleRow(r, out[i]!));
}
