// The host's finish of a device-picked penalised/biased greedy pick (engine/greedy-finish.ts)
// against the full-row reference: adjustInPlace (bias, mask) then greedyToken over the whole
// vocabulary. Crafted rows: few distinct values and penalties that map them onto each other,
// so ties between touched and untouched ids (the lower id must win) come up often; masks that
// clear most ids, or all of them.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { finishGreedy, touchedIds, untouchedMask, type GreedyAdjust } from '../src/engine/greedy-finish.js';
import { adjustInPlace } from '../src/engine/logits-adjust.js';
import { greedyToken, TokenHistory, type SamplingParams, GREEDY } from '../src/engine/sampler.js';
import { createRefKernels } from '../src/kernels/ref/index.js';
import { Rng } from '../src/util/rng.js';
import type { Matcher } from '../src/constrain/constraint.js';

const kernels = createRefKernels();
const VALUES = [-2, -1, -0.5, 0, 0.5, 1, 1.5, 2];

function pickOf<T>(rng: Rng, xs: readonly T[]): T {
  return xs[Math.floor(rng.next() * xs.length)]!;
}

/** The full-row reference: the host path's adjust then greedy pick. */
function hostPick(raw: Float32Array, a: GreedyAdjust): number {
  const row = raw.slice();
  const matcher = a.mask ? ({ mask: () => a.mask } as unknown as Matcher) : null;
  adjustInPlace(row, a.vocab, { bias: a.bias }, matcher);
  return greedyToken(row, a.sampling, a.history, a.vocab, undefined, a.extra);
}

/** The device path: the kernels' masked argmax over untouched ids, the touched ids gathered. */
function devicePick(raw: Float32Array, a: GreedyAdjust): number {
  const touched = touchedIds(a);
  const out = new Int32Array(1);
  kernels.argmaxRowsMasked(out, 0, raw, 1, a.vocab, raw.length, [untouchedMask(a, touched)]);
  const id = out[0]!;
  return finishGreedy(a, touched, touched.map((t) => raw[t]!), { id, logit: raw[id]! });
}

function craft(rng: Rng, vocab: number): { raw: Float32Array; a: GreedyAdjust } {
  const raw = Float32Array.from({ length: vocab + 3 }, () => pickOf(rng, VALUES));
  const sampling: SamplingParams = {
    ...GREEDY,
    repetitionPenalty: pickOf(rng, [1, 1, 2, 1.5, 0.5]),
    presencePenalty: pickOf(rng, [0, 0, 0.5, 1, -0.5]),
    frequencyPenalty: pickOf(rng, [0, 0, 0.25, 0.5]),
  };
  const history = new TokenHistory(Array.from({ length: Math.floor(rng.next() * 6) }, () => Math.floor(rng.next() * (vocab + 2))));
  for (let i = Math.floor(rng.next() * 6); i > 0; i--) history.push(Math.floor(rng.next() * (vocab + 2)));
  const bias = rng.next() < 0.5 ? null : new Map(Array.from({ length: 1 + Math.floor(rng.next() * 4) },
    () => [Math.floor(rng.next() * (vocab + 2)), pickOf(rng, [1, -1, 0.5, 2.5, -100, 0.1])]));
  const density = pickOf(rng, [-1, 0, 0.1, 0.5, 0.9]);
  const mask = density < 0 ? null : Uint32Array.from({ length: Math.ceil(vocab / 32) },
    () => Array.from({ length: 32 }, (_, b) => (rng.next() < density ? 1 << b : 0)).reduce((x, y) => x | y, 0) >>> 0);
  const extra = rng.next() < 0.3 ? [Math.floor(rng.next() * vocab), Math.floor(rng.next() * vocab)] : [];
  return { raw, a: { sampling, history, bias, mask, vocab, extra } };
}

test('finishGreedy picks what the full-row host path picks (5000 crafted rows, ties included)', () => {
  const rng = new Rng(47);
  let touchedWins = 0;
  for (let n = 0; n < 5000; n++) {
    const { raw, a } = craft(rng, pickOf(rng, [5, 33, 64, 70]));
    const want = hostPick(raw, a);
    assert.equal(devicePick(raw, a), want, `row ${n}: ${JSON.stringify({ raw: [...raw], ...a, history: a.history && [...a.history.outputCounts], bias: a.bias && [...a.bias] })}`);
    if (touchedIds(a).includes(want)) touchedWins++;
  }
  // the cases the proxy exists for come up: a touched id wins a good share of the rows
  assert.ok(touchedWins > 500, `only ${touchedWins} rows picked a touched id`);
});

test('a penalty that makes a touched id equal the untouched maximum: the lower id wins', () => {
  const raw = new Float32Array([0, 1, 0, 2, 0, 1]);
  // id 3 (2 → 1 after a presence penalty of 1) ties untouched id 1 and id 5: id 1 wins
  const history = new TokenHistory([]);
  history.push(3);
  const a: GreedyAdjust = { sampling: { ...GREEDY, presencePenalty: 1 }, history, bias: null, mask: null, vocab: 6 };
  assert.equal(hostPick(raw, a), 1);
  assert.equal(devicePick(raw, a), 1);
  // a bias lifting id 0 to 1 ties it with id 1: id 0 wins
  const b: GreedyAdjust = { ...a, bias: new Map([[0, 1]]) };
  assert.equal(hostPick(raw, b), 0);
  assert.equal(devicePick(raw, b), 0);
});

test('NaN never wins and an all-masked row picks id 0, on both paths', () => {
  const raw = new Float32Array([1, NaN, 3, 0]);
  const history = new TokenHistory([2]);
  const a: GreedyAdjust = { sampling: { ...GREEDY, repetitionPenalty: 4 }, history, bias: new Map([[1, 5]]), mask: null, vocab: 4 };
  assert.equal(devicePick(raw, a), hostPick(raw, a));
  const none: GreedyAdjust = { ...a, mask: new Uint32Array([0]) };
  assert.equal(hostPick(raw, none), 0);
  assert.equal(devicePick(raw, none), 0);
});
