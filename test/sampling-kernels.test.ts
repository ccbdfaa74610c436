// Conformance of the sampling kernel (Kernels.sample): the wasm backend (1 and 2 threads,
// fma and plain builds) computes exactly the bits of the reference twin (kernels/ref/
// sampling.ts) — tokens, normalisers, top-N, kept weights — on random rows with ties,
// penalty patches, −inf entries and odd lengths. Then the reference's meaning: the kept
// weights equal the f64 softmax definition (min-p → top-k → top-p, ties by id) up to f32
// rounding, and the draw is the inverse CDF of the kept weights in id order.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Kernels, SampleResult, SampleRow } from '../src/kernels/types.js';
import { createRefKernels } from '../src/kernels/ref/index.js';
import { exp32 } from '../src/kernels/ref/sampling.js';
import { wasmBackendsUnderTest } from './wasm-backends.js';
import { Rng } from '../src/util/rng.js';
import { samplingDefinition } from './sampling-definition.js';

const backends = await wasmBackendsUnderTest();
const ref = createRefKernels();

interface Params { temperature: number; topK: number; topP: number; minP: number }

const SETTINGS: Params[] = [
  { temperature: 1, topK: 0, topP: 1, minP: 0 },
  { temperature: 1, topK: 0, topP: 0.95, minP: 0 },
  { temperature: 1, topK: 20, topP: 0.95, minP: 0 },
  { temperature: 0.6, topK: 20, topP: 0.8, minP: 0 },
  { temperature: 1, topK: 0, topP: 1, minP: 0.05 },
  { temperature: 0.7, topK: 7, topP: 1, minP: 0.2 },
  { temperature: 1.5, topK: 1, topP: 1, minP: 0 },
  { temperature: 0.05, topK: 0, topP: 0.3, minP: 0 },
  { temperature: 1, topK: 500, topP: 0.5, minP: 0.01 },
];

/** Logits: a coarse grid (many exact ties) or continuous, with a few −inf entries. */
function randomRow(rng: Rng, n: number, grid: boolean): Float32Array {
  const x = new Float32Array(n);
  for (let i = 0; i < n; i++) x[i] = grid ? Math.round((rng.next() * 8 - 4) * 4) / 4 : rng.normal() * 3;
  for (let j = 0; j < 3; j++) x[Math.floor(rng.next() * n)] = -Infinity;
  return x;
}

function result(topN: number): SampleResult {
  return { token: -1, rawMax: NaN, rawSumExp: NaN, keptMass: NaN, topIds: new Int32Array(topN), topVals: new Float32Array(topN) };
}

interface Case { logits: Float32Array; n: number; p: Params; u: number; patches: [number, number][]; topN: number }

function makeRow(k: Kernels, c: Case, dist: boolean): SampleRow {
  const logits = k.alloc(c.n);
  logits.set(c.logits);
  return {
    logits, n: c.n, invTemperature: 1 / c.p.temperature, topK: c.p.topK, topP: c.p.topP, minP: c.p.minP, u: c.u,
    patchIds: Int32Array.from(c.patches.map((q) => q[0])), patchVals: Float32Array.from(c.patches.map((q) => q[1])),
    patchCount: c.patches.length, draw: true, logprobs: c.topN >= 0, topN: Math.max(c.topN, 0),
    dist: dist ? k.alloc(c.n) : null,
  };
}

function randomCases(seed: number, count: number): Case[] {
  const rng = new Rng(seed);
  const cases: Case[] = [];
  for (let i = 0; i < count; i++) {
    const n = i % 5 === 0 ? 4099 + Math.floor(rng.next() * 300) : 1 + Math.floor(rng.next() * 700);
    const logits = randomRow(rng, n, i % 2 === 0);
    const patches: [number, number][] = Array.from({ length: i % 3 }, () => [Math.floor(rng.next() * n), rng.normal() * 4]);
    cases.push({ logits, n, p: SETTINGS[i % SETTINGS.length]!, u: rng.next(), patches, topN: (i % 4) * 3 - 1 });
  }
  return cases;
}

function runAll(k: Kernels, cases: Case[], dist: boolean): { rows: SampleRow[]; out: SampleResult[] } {
  const rows = cases.map((c) => makeRow(k, c, dist));
  const out = cases.map((c) => result(Math.max(c.topN, 0)));
  k.sample(rows, out);
  return { rows, out };
}

describe('sampling kernel', () => {
  const cases = randomCases(3, 90);
  const want = runAll(ref, cases, true);
  for (const { label, k } of backends) {
    test(`${label}: bit-identical to the reference (batched rows, with and without dist)`, () => {
      for (const withDist of [true, false]) {
        const got = runAll(k, cases, withDist);
        cases.forEach((c, i) => {
          const g = got.out[i]!;
          const w = want.out[i]!;
          const what = `case ${i} n ${c.n} ${JSON.stringify(c.p)}`;
          assert.equal(g.token, w.token, `${what}: token`);
          assert.equal(g.keptMass, w.keptMass, `${what}: kept mass`);
          if (c.topN >= 0) {
            assert.equal(g.rawMax, w.rawMax, `${what}: raw max`);
            assert.equal(g.rawSumExp, w.rawSumExp, `${what}: raw Σexp`);
            assert.deepEqual([...g.topIds], [...w.topIds], `${what}: top ids`);
            assert.deepEqual([...g.topVals], [...w.topVals], `${what}: top values`);
          }
          if (withDist) assert.deepEqual(got.rows[i]!.dist, want.rows[i]!.dist, `${what}: kept weights`);
        });
      }
    });
  }

  test('a batch gives each row what it gives alone', () => {
    const k = backends[1]!.k;
    const batched = runAll(k, cases.slice(0, 12), false).out;
    cases.slice(0, 12).forEach((c, i) => assert.equal(runAll(k, [c], false).out[0]!.token, batched[i]!.token));
  });

  test('exp32 is within 2 ulp-ish (3e-7 relative) of exp on [−87, 0]', () => {
    for (let y = -87; y <= 0; y += 0.01237) {
      const yf = Math.fround(y);
      const rel = Math.abs(exp32(yf) - Math.exp(yf)) / Math.exp(yf);
      assert.ok(rel < 3e-7, `exp32(${yf}) rel err ${rel}`);
    }
    assert.equal(exp32(0), 1);
    assert.equal(exp32(-88), 0);
  });

  test('the kept weights are the f64 definition (min-p → top-k → top-p over the top-k mass, ties by id)', () => {
    const rng = new Rng(9);
    for (let trial = 0; trial < 40; trial++) {
      const n = 50 + Math.floor(rng.next() * 400);
      const logits = randomRow(rng, n, trial % 2 === 0);
      for (const p of SETTINGS) {
        const c: Case = { logits, n, p, u: 0.5, patches: [], topN: -1 };
        const row = makeRow(ref, c, true);
        const out = result(0);
        ref.sample([row], [out]);
        const want = definition(logits, n, p);
        for (let i = 0; i < n; i++) {
          const got = row.dist![i]! / out.keptMass;
          assert.ok(Math.abs(got - want[i]!) <= 1e-6 * Math.max(want[i]!, 1e-3), `trial ${trial} ${JSON.stringify(p)} id ${i}: ${got} vs ${want[i]}`);
          assert.equal(got > 0, want[i]! > 0, `trial ${trial} ${JSON.stringify(p)} id ${i}: kept`);
        }
      }
    }
  });

  test('the draw is the inverse CDF of the kept weights in id order', () => {
    const rng = new Rng(10);
    const logits = randomRow(rng, 300, true);
    for (const p of SETTINGS) {
      const probs = definition(logits, 300, p);
      const N = 2000;
      const counts = new Float64Array(300);
      for (let j = 0; j < N; j++) {
        const out = result(0);
        backends[0]!.k.sample([makeRow(backends[0]!.k, { logits, n: 300, p, u: (j + 0.5) / N, patches: [], topN: -1 }, false)], [out]);
        counts[out.token]!++;
      }
      for (let i = 0; i < 300; i++) assert.ok(Math.abs(counts[i]! / N - probs[i]!) <= 1.01 / N + 1e-6, `${JSON.stringify(p)} id ${i}`);
    }
  });
});

/** The sampling distribution in f64 by sorting (the sampler's documented definition). */
const definition = (logits: Float32Array, n: number, p: Params): Float64Array => samplingDefinition(logits.subarray(0, n), p);
