// The exact sampled finish from candidates (engine/sampled-candidates.ts) against the
// full-row reference (kernels/ref/sampling.ts): two paths that must agree bit for bit.
// For thousands of random and crafted rows (ties on coarse grids, flat tails, min-p edges,
// top-k boundary ties, NaN, −∞), every row the certificate admits gives the reference's
// token and kept mass (Object.is on the f64); rows it refuses are counted, and crafted rows
// show that refusing was needed (the candidates alone would give other bits there).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { exp32, sample as refSample, keptCut, keptDraw, topKCut, weighEntries } from '../src/kernels/ref/sampling.js';
import { topCandidates } from '../src/kernels/top-candidates.js';
import { candidateCount, certify, drawCertified, MIN_P_CANDIDATES, NUCLEUS_CANDIDATES } from '../src/engine/sampled-candidates.js';
import { emptyResult, GREEDY, sampleRowOf, type SamplingParams } from '../src/engine/sampler.js';
import { rng } from './numeric.js';
import { adjustInPlace } from '../src/engine/logits-adjust.js';
import { touchedIds } from '../src/engine/greedy-finish.js';
import type { Matcher } from '../src/constrain/constraint.js';

interface Outcome { token: number; keptMass: number }

function reference(x: Float32Array, p: SamplingParams, u: number): Outcome {
  const res = emptyResult();
  refSample([sampleRowOf(x, p, null, x.length, { u })], [res]);
  return { token: res.token, keptMass: res.keptMass };
}

function candidatesOf(x: Float32Array, c: number): { ids: Int32Array; vals: Float32Array } {
  const ids = new Int32Array(c);
  const vals = new Float32Array(c);
  topCandidates(ids, vals, 0, x, 1, x.length, x.length, c);
  return { ids, vals };
}

/** Rows of several shapes: gaussian-ish, coarse grids (ties), a flat tail, sparse NaN/−∞. */
function rowOf(r: () => number, kind: number, n: number): Float32Array {
  const x = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    const g = r() + r() + r() - 1.5;
    x[i] = kind === 0 ? 4 * g
      : kind === 1 ? Math.round(8 * g) / 2 // coarse grid: many ties everywhere
        : kind === 2 ? (i % 97 < 3 ? 5 + r() : 0) // a few peaks over a flat tail
          : kind === 3 ? (r() < 0.02 ? NaN : r() < 0.05 ? -Infinity : 10 * g)
            : Math.round(64 * r()) / 64; // kind 4: dense ties near the max
  }
  return x;
}

const paramsGrid: SamplingParams[] = [];
for (const temperature of [0.3, 0.7, 1, 2]) {
  for (const [topK, topP, minP] of [[20, 0.8, 0], [20, 1, 0], [1, 1, 0], [50, 0.95, 0.05], [0, 0.8, 0.1], [0, 1, 0.1], [0, 1, 0.5], [7, 0.5, 0.2]] as const) {
    paramsGrid.push({ ...GREEDY, temperature, topK, topP, minP });
  }
}

test('certified candidate rows give the full row\'s token and kept mass bit for bit; the rest fall back', () => {
  const r = rng(2024);
  let certified = 0;
  let fallbacks = 0;
  for (let trial = 0; trial < 2400; trial++) {
    const n = [40, 300, 2000][trial % 3]!;
    const x = rowOf(r, trial % 5, n);
    const p = paramsGrid[trial % paramsGrid.length]!;
    const c = candidateCount(p, n);
    assert.ok(c > 0, 'every grid entry has top-k or min-p on');
    const { ids, vals } = candidatesOf(x, c);
    const row = certify(ids, vals, p, n);
    if (!row) { fallbacks++; continue; }
    certified++;
    for (const u of [0, r(), 0.5, 1 - 2 ** -30]) {
      const want = reference(x, p, u);
      const got = drawCertified(row, p, u);
      assert.equal(got.token, want.token, `trial ${trial} (n ${n}, ${JSON.stringify(p)}) u ${u}: token`);
      assert.ok(Object.is(got.keptMass, want.keptMass), `trial ${trial} u ${u}: kept mass ${got.keptMass} vs ${want.keptMass}`);
    }
  }
  assert.ok(certified > 1500, `certified ${certified}`);
  assert.ok(fallbacks > 20, `fallbacks ${fallbacks}: the crafted tie / flat rows must exercise the refusal`);
});

test('a top-k boundary tie reaching the last candidate is refused; a min-p row with more kept ids than candidates too, where the candidates alone would be wrong', () => {
  // 10 ids at the max, then 200 ids tied at the k-th value: the k-th weight equals the last
  // candidate's, so an outside id might tie with the k-th — the strict certificate refuses
  const n = 500;
  const x = new Float32Array(n).fill(-30);
  for (let i = 0; i < 10; i++) x[i] = 1;
  for (let i = 200; i < 400; i++) x[i] = 0.5;
  const p: SamplingParams = { ...GREEDY, temperature: 1, topK: 20, topP: 1, minP: 0 };
  const { ids, vals } = candidatesOf(x, candidateCount(p, n));
  assert.equal(certify(ids, vals, p, n), null);
  // with the tie inside the candidates (40 ids), the k-th weight beats the last candidate's
  x.fill(-30, 240, 400);
  const inside = candidatesOf(x, candidateCount(p, n));
  const row = certify(inside.ids, inside.vals, p, n);
  assert.ok(row);
  assert.deepEqual(drawCertified(row, p, 0.73), reference(x, p, 0.73));
  // min-p and top-p over a row with more kept ids than candidates: refused (the nucleus
  // reaches the last candidate's weight)
  const q: SamplingParams = { ...GREEDY, temperature: 1, topK: 0, topP: 0.9, minP: 0.1 };
  const c = candidateCount(q, n);
  const wide = 3 * c;
  const y = new Float32Array(wide).fill(0); // every id kept by min-p
  const cand = candidatesOf(y, c);
  assert.equal(certify(cand.ids, cand.vals, q, wide), null);
  // … and the candidates alone would give other bits: the kept mass of c ids, not n
  const e = weighEntries(cand.ids, cand.vals, wide, 0, 1, q.minP);
  const naive = keptDraw(e, keptCut(e, topKCut(e, 0), 0, q.topP), 0.99, true);
  const want = reference(y, q, 0.99);
  assert.notEqual(naive.keptMass, want.keptMass);
  assert.notEqual(naive.token, want.token);
});

test('candidate counts: top-k, top-p alone, min-p alone; neither asks for the full row; non-finite maxima fall back', () => {
  assert.equal(candidateCount({ ...GREEDY, temperature: 0.7, topP: 0.8 }, 1000), NUCLEUS_CANDIDATES);
  assert.equal(candidateCount({ ...GREEDY, temperature: 0.7, topP: 0.8, minP: 0.05 }, 1000), NUCLEUS_CANDIDATES);
  assert.equal(candidateCount({ ...GREEDY, temperature: 0.7, minP: 0.05 }, 1000), MIN_P_CANDIDATES);
  assert.equal(candidateCount({ ...GREEDY, temperature: 0.7 }, 1000), 0);
  assert.equal(candidateCount({ ...GREEDY, temperature: 0.7, topK: 1000 }, 248_320), 2048);
  assert.equal(candidateCount({ ...GREEDY, temperature: 0.7, topK: 20 }, 1000), 64);
  assert.equal(candidateCount({ ...GREEDY, temperature: 0.7, topK: 100 }, 1000), 256);
  assert.equal(candidateCount({ ...GREEDY, temperature: 0.7, topK: 3000 }, 100000), 0);
  const p: SamplingParams = { ...GREEDY, temperature: 1, topK: 5, topP: 1, minP: 0 };
  const x = new Float32Array(100).fill(1);
  x[7] = Infinity;
  const { ids, vals } = candidatesOf(x, 64);
  assert.equal(certify(ids, vals, p, 100), null);
  assert.equal(certify(...Object.values(candidatesOf(new Float32Array(100).fill(NaN), 64)) as [Int32Array, Float32Array], p, 100), null);
});

test('top-p without top-k (certificate c), 300 rows of 3,000 / 8,000 ids: certified nuclei give the full row\'s token and kept mass bit for bit; refusals are needed', () => {
  const r = rng(4711);
  let certified = 0;
  let refused = 0;
  let naiveWrong = 0;
  for (let trial = 0; trial < 300; trial++) {
    const n = [3000, 8000][trial % 2]!;
    const c = [64, 256][(trial >> 1) % 2]!;
    // peaked rows (a real model's nucleus) to flat ones (a nucleus past the candidates)
    const x = rowOf(r, trial % 5, n).map((v) => v * [1, 3, 6][trial % 3]!);
    const p: SamplingParams = { ...GREEDY, temperature: [0.3, 0.7, 1, 1.5][trial % 4]!, topP: [0.5, 0.8, 0.9, 0.95, 0.999][trial % 5]!, minP: trial % 7 === 0 ? 0.02 : 0 };
    const { ids, vals } = candidatesOf(x, c);
    const row = certify(ids, vals, p, n);
    const u = r();
    const want = reference(x, p, u);
    if (!row) {
      refused++;
      // the candidates' own top-p (their mass taken for the row's): other bits, often
      const m = Math.max(...vals);
      if (m > -Infinity && m < Infinity) {
        const e = weighEntries(Int32Array.from(ids).sort(), vals, n, m, 1 / p.temperature, p.minP);
        const naive = keptDraw(e, keptCut(e, topKCut(e, 0), 0, p.topP), u, true);
        if (!Object.is(naive.keptMass, want.keptMass)) naiveWrong++;
      }
      continue;
    }
    certified++;
    for (const v of [u, 1 - 2 ** -30]) {
      const w = v === u ? want : reference(x, p, v);
      const got = drawCertified(row, p, v);
      assert.equal(got.token, w.token, `trial ${trial} (n ${n}, c ${c}, ${JSON.stringify(p)}) u ${v}: token`);
      assert.ok(Object.is(got.keptMass, w.keptMass), `trial ${trial} u ${v}: kept mass ${got.keptMass} vs ${w.keptMass}`);
    }
  }
  console.log(`# top-p alone: ${certified} certified, ${refused} refused (${naiveWrong} of them wrong from the candidates alone)`);
  assert.ok(certified > 75 && refused > 50, `certified ${certified}, refused ${refused}`);
  assert.ok(naiveWrong > 25, `refused rows where the candidates alone give other bits: ${naiveWrong}`);
});

test('top-p alone: a tail that could carry the nucleus past the candidates is refused, a negligible one is not', () => {
  // 8 ids hold ~all the mass at the max; the rest sit 9 below (weight e^-9 ≈ 1.2e-4 each)
  const p: SamplingParams = { ...GREEDY, temperature: 1, topP: 0.9 };
  const rowWith = (n: number): Float32Array => {
    const x = new Float32Array(n).fill(-9);
    for (let i = 0; i < 8; i++) x[100 * i + 5] = 0;
    return x;
  };
  // n = 1000: the tail's mass ≈ 0.12 against 8 at the top: the 0.9 nucleus is 8 ids either way
  const small = rowWith(1000);
  const a = candidatesOf(small, 64);
  const row = certify(a.ids, a.vals, p, small.length);
  assert.ok(row, 'a negligible tail: certified');
  assert.deepEqual(drawCertified(row, p, 0.4), reference(small, p, 0.4));
  // n = 200,000: the unknown tail may weigh ≈ 24, three times the top: refused
  const big = rowWith(200_000);
  const b = candidatesOf(big, 64);
  assert.equal(certify(b.ids, b.vals, p, big.length), null);
});

test('rows shorter than c: every non-NaN id is a candidate, always certified', () => {
  const r = rng(7);
  for (let t = 0; t < 200; t++) {
    const x = rowOf(r, t % 5, 30);
    const p: SamplingParams = { ...GREEDY, temperature: 0.8, topK: 25, topP: 0.9, minP: 0 };
    const { ids, vals } = candidatesOf(x, 64);
    const row = certify(ids, vals, p, 30);
    if (t % 5 === 3 && x.every((v) => !(v > -Infinity && v < Infinity))) continue;
    assert.ok(row, `trial ${t}`);
    const u = r();
    assert.deepEqual(drawCertified(row, p, u), reference(x, p, u));
  }
});

test('bias, a constraint mask and penalties: the touched ids adjusted on the host give the full adjusted row\'s bits', () => {
  const r = rng(99);
  let certified = 0;
  let refused = 0;
  for (let trial = 0; trial < 1500; trial++) {
    const n = [60, 700, 3000][trial % 3]!;
    const x = rowOf(r, trial % 5, n);
    const base = paramsGrid[trial % paramsGrid.length]!;
    const p: SamplingParams = { ...base, repetitionPenalty: trial % 4 === 0 ? 1 : 1.3, presencePenalty: trial % 3 === 0 ? 0.5 : 0, frequencyPenalty: trial % 5 === 0 ? 0.2 : 0 };
    const pick = (k: number): number[] => Array.from({ length: k }, () => Math.floor(r() * n));
    const history = { outputCounts: new Map(pick(6).map((id) => [id, 1 + Math.floor(3 * r())])), promptIds: new Set(pick(10)) };
    // biases on the top ids too (they move across the candidate boundary), some large
    const top = Array.from(candidatesOf(x, 8).ids).filter((id) => id >= 0);
    const bias = trial % 2 === 0 ? null : new Map([...pick(5), ...top.slice(0, 2)].map((id) => [id, (r() - 0.5) * (trial % 7 === 1 ? 40 : 4)]));
    const mask = trial % 3 === 1 ? Uint32Array.from({ length: Math.ceil(n / 32) }, () => (r() < 0.3 ? 0 : (r() * 2 ** 32) >>> 0)) : null;
    const a = { sampling: p, history, bias, mask, vocab: n };
    // the reference: the adjusted full row (adjustInPlace), penalties as sampleRowOf's patches
    const adjusted = x.slice();
    adjustInPlace(adjusted, n, { bias }, mask ? ({ mask: () => mask } as unknown as Matcher) : null);
    const c = candidateCount(p, n);
    const { ids, vals } = candidatesOf(x, c);
    const touched = touchedIds(a);
    const row = certify(ids, vals, p, n, { a, touched, raw: touched.map((id) => x[id]!) });
    if (!row) { refused++; continue; }
    certified++;
    for (const u of [r(), 0.999]) {
      const res = emptyResult();
      refSample([sampleRowOf(adjusted, p, history, n, { u })], [res]);
      const got = drawCertified(row, p, u);
      assert.equal(got.token, res.token, `trial ${trial} u ${u}: token`);
      assert.ok(Object.is(got.keptMass, res.keptMass), `trial ${trial}: kept mass ${got.keptMass} vs ${res.keptMass}`);
    }
  }
  assert.ok(certified > 800 && refused > 10, `certified ${certified}, refused ${refused}`);
});

test('exp32 is monotone around every range-reduction boundary (the full sweep of [−87, 0]: scripts/exp32-monotone.mjs)', () => {
  // the certificate needs exp32 non-decreasing; inversions would sit where k = round(y·log2 e)
  // steps, y ≈ (j + ½)·ln 2, and at the ends: walk 2^14 f32 steps either side of each
  const f32 = new Float32Array(1);
  const u32 = new Uint32Array(f32.buffer);
  const centres = [-87, -0, ...Array.from({ length: 126 }, (_, j) => -(j + 0.5) * Math.LN2)];
  let checked = 0;
  for (const c of centres) {
    f32[0] = c;
    const mid = u32[0]!;
    let prev = Infinity;
    for (let b = Math.max(0x80000000, mid - 2 ** 14); b <= mid + 2 ** 14; b++) {
      u32[0] = b; // negative floats: larger bits, smaller y
      const y: number = f32[0]!;
      if (y < -87) break;
      const e: number = exp32(y);
      if (!(e <= prev)) assert.fail(`exp32 not monotone at y = ${y}: ${e} > ${prev}`);
      prev = e;
      checked++;
    }
  }
  assert.ok(checked > 4_000_000, `checked ${checked}`);
});
