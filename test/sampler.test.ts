// The sampler's fast paths against a plain, sort-based statement of the same spec:
// penalties → temperature → min-p → top-k → top-p (mass relative to the top-k set) →
// renormalise; greedy = lowest id holding the maximum penalised logit. Sampled rows run on
// the kernels (the wasm backend and its reference twin): f32 weights (penalised logits
// rounded to f32, exp in f32), so probabilities agree with the f64 sort to 2e-5 relative
// and the kept sets are identical (but for ids below e^−87 of the max, where f32 exp
// underflows: probability < 2e−38 in the f64 definition, exactly 0 here).
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { sampleToken, targetDistribution, TokenHistory, type SamplingParams, GREEDY } from '../src/engine/sampler.js';
import { Rng } from '../src/util/rng.js';
import { samplingDefinition } from './sampling-definition.js';
import { createRefKernels } from '../src/kernels/ref/index.js';
import { createWasmKernels } from '../src/kernels/wasm/index.js';
import type { Kernels } from '../src/kernels/types.js';

const backends: Kernels[] = [createRefKernels(), await createWasmKernels({ threads: 2 })];
after(() => backends.forEach((k) => k.dispose()));

function penalisedRef(logits: Float32Array, p: SamplingParams, hist: TokenHistory, vocab: number): number[] {
  const out = Array.from(logits.subarray(0, vocab), Number);
  const rp = p.repetitionPenalty;
  for (const id of new Set([...hist.promptIds, ...hist.outputCounts.keys()])) {
    if (id < vocab && rp !== 1) out[id] = out[id]! > 0 ? out[id]! / rp : out[id]! * rp;
  }
  for (const [id, n] of hist.outputCounts) if (id < vocab) out[id] = out[id]! - p.presencePenalty - p.frequencyPenalty * n;
  return out;
}

function distributionRef(logits: Float32Array, p: SamplingParams, hist: TokenHistory, vocab: number): Float64Array {
  return samplingDefinition(penalisedRef(logits, p, hist, vocab), p);
}

/** Random logits with many exact ties (values on a coarse grid). */
function randomCase(rng: Rng, vocab: number): { logits: Float32Array; hist: TokenHistory } {
  const logits = new Float32Array(vocab + 3).map(() => Math.round((rng.next() * 8 - 4) * 4) / 4);
  const hist = new TokenHistory(Array.from({ length: 6 }, () => Math.floor(rng.next() * (vocab + 3))));
  for (let i = 0; i < 8; i++) hist.push(Math.floor(rng.next() * vocab));
  return { logits, hist };
}

const base: SamplingParams = { ...GREEDY, temperature: 0.8 };

describe('sampler', () => {
  test('the kernels\' sampled distribution equals the sort-based reference, with ties and penalties', () => {
    const rng = new Rng(5);
    const settings: Partial<SamplingParams>[] = [
      { topK: 1 }, { topK: 7 }, { topK: 500 }, { topP: 0.5 }, { topP: 0.9 }, { topP: 0.05 },
      { topK: 20, topP: 0.6 }, { minP: 0.2, topP: 0.8 }, { minP: 0.05, topK: 9 },
      { topP: 0.7, repetitionPenalty: 1.3, presencePenalty: 0.5, frequencyPenalty: 0.2 },
      { topK: 12, repetitionPenalty: 0.8, temperature: 1.7 },
      // low temperature: most ids fall below the heap's floor (pmax·1e-7), so top-k beyond
      // the ids above it and top-p near 1 take the fallback over all ids
      { topK: 200, temperature: 0.05 }, { topP: 0.999999999999, temperature: 0.05 }, { topP: 0.6, temperature: 0.05 },
    ];
    for (let trial = 0; trial < 30; trial++) {
      const vocab = 50 + Math.floor(rng.next() * 300);
      const { logits, hist } = randomCase(rng, vocab);
      for (const s of settings) {
        const p = { ...base, ...s };
        const want = distributionRef(logits, p, hist, vocab);
        for (const k of backends) {
          const got = targetDistribution(logits, p, hist, vocab, undefined, (r, o) => k.sample(r, o));
          for (let i = 0; i < vocab; i++) {
            const what = `${k.name} ${JSON.stringify(s)} vocab ${vocab} id ${i}: ${got[i]} vs ${want[i]}`;
            // exp in f32 underflows below e^−87: ids that far below the max get 0
            const underflow = got[i] === 0 && want[i]! < 1e-30;
            assert.ok(Math.abs(got[i]! - want[i]!) <= 2e-5 * want[i]! || underflow, what);
          }
        }
      }
    }
  });

  test('greedy without copying the vocabulary equals argmax of the penalised logits', () => {
    const rng = new Rng(6);
    const penalties: Partial<SamplingParams>[] = [
      {}, { repetitionPenalty: 1.5 }, { repetitionPenalty: 0.5 }, { presencePenalty: 2 }, { presencePenalty: -2 },
      { frequencyPenalty: 1, repetitionPenalty: 1.2 },
    ];
    for (let trial = 0; trial < 200; trial++) {
      const vocab = 20 + Math.floor(rng.next() * 100);
      const { logits, hist } = randomCase(rng, vocab);
      // half of the trials make a penalised id the raw argmax, which its penalty demotes
      if (trial % 2) logits[[...hist.outputCounts.keys()][0]!] = 4.25;
      for (const s of penalties) {
        const p = { ...GREEDY, ...s };
        const l = penalisedRef(logits, p, hist, vocab);
        const want = l.indexOf(Math.max(...l));
        assert.equal(sampleToken(logits, p, hist, vocab, new Rng(1)), want, `${JSON.stringify(s)} trial ${trial}`);
        const d = targetDistribution(logits, p, hist, vocab);
        assert.equal(d[want], 1);
      }
    }
  });
});
