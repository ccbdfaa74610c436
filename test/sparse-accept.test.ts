// Sampled MTP acceptance on (id, p) lists (engine/speculative/sparse-accept.ts) against the
// full-row walk (accept.ts acceptDrafts over vocabulary-sized p_i and q_i): two paths that
// must give the same ids and consume the same uniforms. Chains of k drafts over random target
// and draft rows (the draft row a noisy copy of the target's, so drafts are accepted and
// rejected both); each draft drawn from q_i and each p_i taken from top candidates
// (certify + certifiedDist) exactly as the engine does, penalties counting the drafts before
// a position; the lists must equal the rows bit for bit, the drafts the full row's draws,
// and the walk's tokens, accepted count and rng state the full walk's.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { topCandidates } from '../src/kernels/top-candidates.js';
import { keptCut, keptDraw, sample as refSample, topKCut, weighEntries } from '../src/kernels/ref/sampling.js';
import { candidateCount, certifiedDist, certify } from '../src/engine/sampled-candidates.js';
import { drawFrom, emptyResult, GREEDY, sampleRowOf, targetDistribution, TokenHistory, type SamplingParams } from '../src/engine/sampler.js';
import { touchedIds } from '../src/engine/greedy-finish.js';
import { acceptDrafts, residual } from '../src/engine/speculative/accept.js';
import { acceptDraftLists, denseOf, drawFromList, residualList, type SparseDist } from '../src/engine/speculative/sparse-accept.js';
import { Rng } from '../src/util/rng.js';
import { rng } from './numeric.js';

const N = 1500;
const K = 3;

const CASES: Record<string, SamplingParams> = {
  topKOnly: { ...GREEDY, temperature: 1, topK: 20 },
  minPOnly: { ...GREEDY, temperature: 1.5, minP: 0.05 },
  qwen: { ...GREEDY, temperature: 0.7, topK: 20, topP: 0.8 },
  hotTopPTopK: { ...GREEDY, temperature: 2, topK: 40, topP: 0.95 },
  penalised: { ...GREEDY, temperature: 1.5, topK: 20, topP: 0.9, repetitionPenalty: 1.3, presencePenalty: 0.4, frequencyPenalty: 0.3 },
  minPTopK: { ...GREEDY, temperature: 1.2, topK: 30, minP: 0.02 },
};

/** A logits row: a few strong ids over a noisy tail, coarse-grained in half the rows (ties). */
function targetRow(r: () => number, coarse: boolean): Float32Array {
  const x = new Float32Array(N);
  for (let i = 0; i < N; i++) {
    const g = 3 * (r() + r() + r() - 1.5) + (i % 37 === 5 ? 4 : 0);
    x[i] = coarse ? Math.round(4 * g) / 4 : g;
  }
  return x;
}

/** The draft head's row: the target's plus noise (so q and p overlap but differ). */
function draftRow(r: () => number, x: Float32Array): Float32Array {
  return Float32Array.from(x, (v) => v + 1.5 * (r() - 0.5));
}

/** The row's distribution as the engine takes it from top candidates: the certified list, or
 * null when the certificate refuses (the engine then reads the row whole). */
function fromCandidates(x: Float32Array, p: SamplingParams, hist: TokenHistory, extra: readonly number[], u: number | null):
  { token: number; dist: SparseDist } | null {
  const c = candidateCount(p, N);
  const ids = new Int32Array(c);
  const vals = new Float32Array(c);
  topCandidates(ids, vals, 0, x, 1, N, N, c);
  const a = { sampling: p, history: hist, bias: null, mask: null, vocab: N, extra };
  const touched = touchedIds(a);
  const row = certify(ids, vals, p, N, touched.length > 0 ? { a, touched, raw: touched.map((id) => x[id]!) } : null);
  return row ? certifiedDist(row, p, u) : null;
}

/** The list of a full row's positive ids (what a refused row's p becomes in a list walk). */
function listOf(row: Float64Array): SparseDist {
  const ids: number[] = [];
  row.forEach((v, i) => { if (v > 0) ids.push(i); });
  return { ids: Int32Array.from(ids), p: Float64Array.from(ids, (i) => row[i]!) };
}

function sameBits(a: Float64Array, b: Float64Array, what: string): void {
  assert.equal(a.length, b.length, what);
  for (let i = 0; i < a.length; i++) if (!Object.is(a[i], b[i])) assert.fail(`${what}: id ${i}: ${a[i]} != ${b[i]}`);
}

interface Tally { chains: number; certified: number; refused: number; rejections: number; allAccepted: number }

/** One chain: drafts from q (both ways), then both walks over the target's p. */
function chain(seed: number, p: SamplingParams, t: Tally): void {
  const r = rng(seed);
  const hist = new TokenHistory(Array.from({ length: 12 }, () => Math.floor(r() * N)));
  for (let j = 0; j < 6; j++) hist.push(Math.floor(r() * N));
  const targets = Array.from({ length: K + 1 }, (_, i) => targetRow(r, (seed + i) % 2 === 0));
  const draftRngFull = new Rng(seed);
  const draftRngList = new Rng(seed);
  const drafts: number[] = [];
  const qRows: Float64Array[] = [];
  const qLists: SparseDist[] = [];
  for (let i = 0; i < K; i++) {
    const y = draftRow(r, targets[i]!);
    const qRow = targetDistribution(y, p, hist, N, undefined, undefined, drafts);
    const expected = drawWith(y, p, hist, drafts, draftRngFull.next());
    const got = fromCandidates(y, p, hist, drafts, draftRngList.next());
    if (got) {
      t.certified++;
      assert.equal(got.token, expected, `seed ${seed}: draft ${i}`);
      sameBits(denseOf(got.dist, N), qRow, `seed ${seed}: q_${i}`);
      qLists.push(got.dist);
    } else {
      t.refused++;
      qLists.push(listOf(qRow));
    }
    qRows.push(qRow);
    drafts.push(expected);
  }
  const pRows = targets.map((x, i) => targetDistribution(x, p, hist, N, undefined, undefined, drafts.slice(0, i)));
  const pLists = targets.map((x, i): SparseDist => {
    const got = fromCandidates(x, p, hist, drafts.slice(0, i), null);
    if (!got) { t.refused++; return listOf(pRows[i]!); }
    t.certified++;
    sameBits(denseOf(got.dist, N), pRows[i]!, `seed ${seed}: p_${i}`);
    return got.dist;
  });
  const rowRng = new Rng(seed * 7 + 1);
  const listRng = new Rng(seed * 7 + 1);
  const rowTokens: number[] = [];
  const listTokens: number[] = [];
  const rowAccepted = acceptDrafts({ tokens: drafts, probs: qRows }, { sampling: p, history: hist, vocab: N, rng: rowRng, targetAt: (i) => pRows[i]! },
    () => new Float32Array(0), (id) => (rowTokens.push(id), true));
  const listAccepted = acceptDraftLists(drafts, qLists, (i) => pLists[i]!, listRng, (id) => (listTokens.push(id), true));
  assert.deepEqual(listTokens, rowTokens, `seed ${seed}: tokens`);
  assert.equal(listAccepted, rowAccepted, `seed ${seed}: accepted`);
  assert.equal(listRng.next(), rowRng.next(), `seed ${seed}: the walks consumed different uniforms`);
  t.chains++;
  if (rowAccepted < K) t.rejections++;
  else t.allAccepted++;
}

/** The full row's draw with uniform u, penalties counting `extra` (a draft's sampler job). */
function drawWith(y: Float32Array, p: SamplingParams, hist: TokenHistory, extra: readonly number[], u: number): number {
  const res = emptyResult();
  refSample([sampleRowOf(y, p, hist, N, { u, extra })], [res]);
  return res.token;
}

for (const [name, p] of Object.entries(CASES)) {
  test(`${name}: the list walk == the full-row walk (ids, accepted count, uniforms), lists == rows bit for bit`, () => {
    const t: Tally = { chains: 0, certified: 0, refused: 0, rejections: 0, allAccepted: 0 };
    for (let seed = 1; seed <= 60; seed++) chain(seed * 1013 + name.length, p, t);
    // both outcomes of the test and the certificate's admission happened
    assert.ok(t.rejections >= 5, `rejections ${t.rejections}`);
    assert.ok(t.certified >= 0.8 * (t.certified + t.refused), `certified ${t.certified}, refused ${t.refused}`);
    console.log(`# ${name}: ${t.chains} chains, ${t.rejections} with a rejection, ${t.allAccepted} all accepted; rows certified ${t.certified}, refused ${t.refused}`);
  });
}

/** A random list over [0, N): `size` ids, probabilities normalised (some set to 0). */
function randomList(r: () => number, size: number, share: readonly number[] = []): SparseDist {
  const ids = new Set<number>(share.filter(() => r() < 0.7));
  while (ids.size < size) ids.add(Math.floor(r() * N));
  const sorted = Int32Array.from(ids).sort();
  const w = Float64Array.from(sorted, () => (r() < 0.1 ? 0 : r() ** 3));
  const sum = w.reduce((a, b) => a + b, 0);
  return { ids: sorted, p: w.map((v) => v / sum) };
}

type Residual = (p: SparseDist, q: SparseDist) => SparseDist;

/** Does `fn` give residual()'s bits, and drawFromList drawFrom's id, on every pair? */
function agreesWithRows(fn: Residual): boolean {
  const r = rng(99);
  for (let i = 0; i < 300; i++) {
    const p = randomList(r, 1 + Math.floor(r() * 40));
    const q = i % 10 === 0 ? p : randomList(r, 1 + Math.floor(r() * 40), [...p.ids]); // p == q: residual is p
    const want = residual(denseOf(p, N), denseOf(q, N));
    const got = denseOf(fn(p, q), N);
    if (!want.every((v, j) => Object.is(v, got[j]))) return false;
    const seed = 5 + i;
    if (drawFromList(fn(p, q), new Rng(seed)) !== drawFrom(want, new Rng(seed))) return false;
  }
  return true;
}

test('residualList == residual bit for bit (and the draw from it), and the comparison catches a wrong residual', () => {
  assert.ok(agreesWithRows(residualList));
  const mutations: Record<string, Residual> = {
    unnormalised: (p, q) => ({ ids: p.ids, p: p.p.map((v, j) => Math.max(0, v - (q.ids.indexOf(p.ids[j]!) >= 0 ? q.p[q.ids.indexOf(p.ids[j]!)]! : 0))) }),
    unclamped: (p, q) => {
      const r = residualList(p, q);
      return r === p ? p : { ids: r.ids, p: r.p.map((v) => v * 1.0000001) };
    },
    qMinusP: (p, q) => residualList(q, p),
  };
  for (const [name, m] of Object.entries(mutations)) assert.ok(!agreesWithRows(m), `the mutation ${name} went unnoticed`);
});

test('the certificate is needed: on rows it refuses, the unchecked candidates give another p than the full row', () => {
  const p: SamplingParams = { ...GREEDY, temperature: 2, minP: 1e-6 }; // keeps more ids than 256 candidates
  const r = rng(7);
  let refused = 0;
  let differs = 0;
  for (let i = 0; i < 20; i++) {
    const x = targetRow(r, i % 2 === 0);
    const hist = new TokenHistory([]);
    if (fromCandidates(x, p, hist, [], null)) continue;
    refused++;
    const c = candidateCount(p, N);
    const ids = new Int32Array(c);
    const vals = new Float32Array(c);
    topCandidates(ids, vals, 0, x, 1, N, N, c);
    let m = -Infinity;
    for (const v of vals) m = Math.max(m, v);
    const e = weighEntries(ids, vals, N, m, 1 / p.temperature, p.minP);
    const cut = keptCut(e, topKCut(e, 0), 0, p.topP);
    const { keptMass } = keptDraw(e, cut, 0, false);
    const unchecked = new Float64Array(N);
    ids.forEach((id, j) => { unchecked[id] = e.w[j]! / keptMass; });
    const full = targetDistribution(x, p, hist, N);
    if (!full.every((v, j) => Object.is(v, unchecked[j]))) differs++;
  }
  assert.ok(refused >= 10, `refused ${refused}`);
  assert.equal(differs, refused, 'every refused row would have gone wrong on its candidates');
});
