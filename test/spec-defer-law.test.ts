// Deferred rejection rounds (speculative/deferred-rejection.ts): the law of the tokens emitted
// is the target's, with the device's proposals disagreeing with the host's exact draws (a band
// of uniforms) and candidate rows refused (a coin), through the engine's own functions
// (resolveRejectionChain, acceptDraftLists with and without a bonus). A toy Markov chain of 4
// ids: the target's p(next | last) and a different draft q(next | last); a verify row i embeds
// the device's proposal i, so the target after a redrawn draft is the wrong token's. The
// empirical joint law of the first two tokens must match p(x1 | start)·p(x2 | x1), as must a
// chain read back before its verify that ends at its redrawn draft (draft-device.ts without a
// redraft pass: the verify embeds the host's tokens, the bonus stands); two wrong resolutions
// (cutting before a disagreement; drawing the bonus after a redrawn draft the verify did not
// embed) must not, which shows the test can fail.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { certifiedDist, certify } from '../src/engine/sampled-candidates.js';
import { GREEDY, type SamplingParams } from '../src/engine/sampler.js';
import { resolveRejectionChain } from '../src/engine/speculative/deferred-rejection.js';
import { acceptDraftLists, probAt, type SparseDist } from '../src/engine/speculative/sparse-accept.js';
import { Rng } from '../src/util/rng.js';

const V = 4;
const START = V; // the row of the token before the first
const SAMPLING: SamplingParams = { ...GREEDY, temperature: 1 };
// logits by previous token (rows 0..3, then START)
const TARGET = [[1.2, 0.1, -0.5, 0.7], [0.0, 1.5, 0.3, -1.0], [-0.2, 0.4, 1.1, 0.9], [0.8, -0.3, 0.0, 0.5], [0.6, 1.0, -0.4, 0.2]];
const DRAFT = [[0.2, 1.0, 0.1, 0.4], [1.1, 0.3, 0.3, 0.0], [0.5, -0.5, 0.9, 1.3], [-0.1, 0.6, 0.7, 0.2], [1.4, 0.1, 0.3, -0.6]];
const K = 2;
const BAND = [0.3, 0.5]; // uniforms whose device draw is another id
const REFUSE = 0.15; // chance a draft row's candidates are refused

/** A row's candidates as topCandidates writes them: every id, then one empty slot (so the
 * certificate admits it: the set holds every id), or without the slot (refused: top-k off and
 * top-p off cannot certify a full set). */
function candidates(logits: readonly number[], refused: boolean): { ids: Int32Array; vals: Float32Array } {
  const ids = Int32Array.from({ length: V + (refused ? 0 : 1) }, (_, i) => (i < V ? i : -1));
  return { ids, vals: Float32Array.from(ids, (id) => (id >= 0 ? logits[id]! : -Infinity)) };
}

function distOf(logits: readonly number[]): SparseDist {
  const { ids, vals } = candidates(logits, false);
  return certifiedDist(certify(ids, vals, SAMPLING, V)!, SAMPLING, null).dist;
}

/** 'engine': the deferred round's resolution; 'ended-host-embedded': a chain drafted on the
 * device and read back before its verify that ends at its first disagreement (draft-device.ts,
 * no redraft pass): the same drafts, but the verify embeds the host's tokens, so the bonus
 * after a redrawn draft is the target's; the other two are wrong. */
type Variant = 'engine' | 'ended-host-embedded' | 'cut-before-disagreement' | 'bonus-after-redraw';

/** One round from `last`: the tokens it emits. */
function round(last: number, r: Rng, variant: Variant): number[] {
  const device: number[] = [];
  const rows: { ids: Int32Array; vals: Float32Array }[] = [];
  const uniforms: number[] = [];
  let prev = last;
  for (let s = 0; s < K; s++) {
    const row = candidates(DRAFT[prev]!, r.next() < REFUSE);
    const u = r.next();
    const exact = certify(row.ids, row.vals, SAMPLING, V);
    const token = exact ? certifiedDist(exact, SAMPLING, u).token : Math.floor(u * V);
    const proposal = u >= BAND[0]! && u < BAND[1]! ? (token + 1) % V : token;
    rows.push(row);
    uniforms.push(u);
    device.push(proposal);
    prev = proposal; // the next draft step embeds the device's proposal
  }
  let got = resolveRejectionChain({ device, candidates: (s) => rows[s]!, uniforms, sampling: SAMPLING, vocab: V });
  if (variant === 'cut-before-disagreement' && got.end === 'redrawn') {
    got = { ...got, tokens: got.tokens.slice(0, -1), qs: got.qs.slice(0, -1), lastUnverified: false };
  }
  // verify row i embeds [last, device drafts...] (deferred: p_i is the target after that
  // token), or [last, host drafts...] (read back first)
  const hostEmbedded = variant === 'ended-host-embedded';
  const embedded = [last, ...(hostEmbedded ? got.tokens : device)];
  const out: number[] = [];
  acceptDraftLists(got.tokens, got.qs, (i) => distOf(TARGET[embedded[i]!]!), r, (t) => (out.push(t), true),
    variant === 'bonus-after-redraw' || hostEmbedded ? true : !got.lastUnverified);
  return out;
}

/** The largest deviation of the empirical law of the first two tokens over n runs from the
 * target's, in standard errors. */
function deviation(variant: Variant, n: number, seed: number): number {
  const r = new Rng(seed);
  const counts = new Float64Array(V * V);
  for (let t = 0; t < n; t++) {
    const out: number[] = [];
    while (out.length < 2) out.push(...round(out.length === 0 ? START : out[out.length - 1]!, r, variant));
    counts[out[0]! * V + out[1]!]!++;
  }
  let worst = 0;
  const p1 = distOf(TARGET[START]!);
  for (let a = 0; a < V; a++) {
    const p2 = distOf(TARGET[a]!);
    for (let b = 0; b < V; b++) {
      const p = probAt(p1, a) * probAt(p2, b);
      const se = Math.sqrt((p * (1 - p)) / n);
      worst = Math.max(worst, Math.abs(counts[a * V + b]! / n - p) / se);
    }
  }
  return worst;
}

test('resolveRejectionChain: whole, refused, redrawn', () => {
  const rows = [candidates(DRAFT[START]!, false), candidates(DRAFT[0]!, false)];
  const exact = (s: number, u: number): number => certifiedDist(certify(rows[s]!.ids, rows[s]!.vals, SAMPLING, V)!, SAMPLING, u).token;
  const uniforms = [0.1, 0.8];
  const same = [exact(0, 0.1), exact(1, 0.8)];
  const whole = resolveRejectionChain({ device: same, candidates: (s) => rows[s]!, uniforms, sampling: SAMPLING, vocab: V });
  assert.deepEqual([whole.tokens, whole.lastUnverified, whole.end, whole.qs.length], [same, false, 'whole', 2]);
  const other = [(same[0]! + 1) % V, same[1]!];
  const redrawn = resolveRejectionChain({ device: other, candidates: (s) => rows[s]!, uniforms, sampling: SAMPLING, vocab: V });
  assert.deepEqual([redrawn.tokens, redrawn.lastUnverified, redrawn.end, redrawn.qs.length], [[same[0]], true, 'redrawn', 1]);
  const refusedRows = [rows[0]!, candidates(DRAFT[0]!, true)];
  const refused = resolveRejectionChain({ device: same, candidates: (s) => refusedRows[s]!, uniforms, sampling: SAMPLING, vocab: V });
  assert.deepEqual([refused.tokens, refused.lastUnverified, refused.end, refused.qs.length], [[same[0]], false, 'refused', 1]);
});

test('a no-bonus walk accepting every draft emits the drafts alone', () => {
  const q = distOf(DRAFT[START]!);
  const p = distOf(DRAFT[START]!); // p == q: every draft is accepted
  const out: number[] = [];
  const walked = acceptDraftLists([2], [q], () => p, new Rng(3), (t) => (out.push(t), true), false);
  assert.deepEqual([walked, out], [1, [2]]);
});

test('deferred rejection rounds emit the target law (and two wrong resolutions do not)', () => {
  const n = 30_000;
  const engine = deviation('engine', n, 11);
  const ended = deviation('ended-host-embedded', n, 11);
  const cut = deviation('cut-before-disagreement', n, 11);
  const bonus = deviation('bonus-after-redraw', n, 11);
  console.log(JSON.stringify({ n, standardErrors: { engine, ended, cut, bonus } }));
  assert.ok(engine < 4.5, `the engine's resolution is off the target law by ${engine.toFixed(1)} standard errors`);
  assert.ok(ended < 4.5, `a chain ended at its redrawn draft, verified on the host's tokens, is off the target law by ${ended.toFixed(1)} standard errors`);
  assert.ok(cut > 8, `cutting before a disagreement should bias the law: ${cut.toFixed(1)} standard errors`);
  assert.ok(bonus > 8, `a bonus after a redrawn draft should bias the law: ${bonus.toFixed(1)} standard errors`);
});
