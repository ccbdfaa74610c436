// The GPU sampling kernel (src/kernels/webgpu/sample.ts) against the reference twin
// (kernels/ref/sampling.ts) on the machine's WebGPU adapter (lavapipe without a GPU), on
// random rows with ties, penalty patches, −inf entries, odd lengths and every cut.
// Bounds: top-N ids / values, rawMax and the kept set are exact; rawSumExp, kept weights
// and kept mass within 1e-5 relative (f32 sums in a fixed order vs the ref's f64); the
// drawn token equals the ref's (these seeds put no u·M within rounding of a boundary).
// Determinism: the same rows give the same bits in a batch and alone.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { SampleResult, SampleRow } from '../src/kernels/types.js';
import { createRefKernels } from '../src/kernels/ref/index.js';
import type { WebGpuKernels } from '../src/kernels/webgpu/backend.js';
import { decodeSampleResults, recordSample, type GpuSampleRow } from '../src/kernels/webgpu/sample.js';
import { Rng } from '../src/util/rng.js';
import { relErr } from './numeric.js';
import { gpuUnderTest } from './webgpu-helpers.js';
import { takeUncapturedError } from '../src/kernels/webgpu/device.js';

const ref = createRefKernels();
let g: WebGpuKernels;
before(async () => { g = await gpuUnderTest(); });
after(() => g?.dispose());

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

interface Case { logits: Float32Array; n: number; p: Params; u: number; patches: Map<number, number>; topN: number }

function randomCases(seed: number, count: number): Case[] {
  const rng = new Rng(seed);
  return Array.from({ length: count }, (_, i) => {
    const n = i % 6 === 0 ? 3001 + Math.floor(rng.next() * 300) : 1 + Math.floor(rng.next() * 700);
    const grid = i % 2 === 0;
    const logits = Float32Array.from({ length: n }, () => (grid ? Math.round((rng.next() * 8 - 4) * 4) / 4 : rng.normal() * 3));
    for (let j = 0; j < 3; j++) logits[Math.floor(rng.next() * n)] = -Infinity;
    const patches = new Map<number, number>();
    for (let j = 0; j < i % 3; j++) patches.set(Math.floor(rng.next() * n), rng.normal() * 4);
    return { logits, n, p: SETTINGS[i % SETTINGS.length]!, u: rng.next(), patches, topN: (i % 4) * 3 - 1 };
  });
}

function common(c: Case) {
  return {
    n: c.n, invTemperature: Math.fround(1 / c.p.temperature), topK: c.p.topK, topP: c.p.topP, minP: c.p.minP, u: c.u,
    patchIds: Int32Array.from(c.patches.keys()), patchVals: Float32Array.from(c.patches.values()), patchCount: c.patches.size,
    draw: true, logprobs: c.topN >= 0, topN: Math.max(c.topN, 0),
  };
}
const result = (topN: number): SampleResult => ({ token: -1, rawMax: NaN, rawSumExp: NaN, keptMass: NaN, topIds: new Int32Array(topN), topVals: new Float32Array(topN) });

async function gpuSample(cases: Case[]): Promise<{ out: SampleResult[]; dist: Float32Array[] }> {
  const rows: GpuSampleRow[] = cases.map((c) => ({ ...common(c), logits: g.alloc.upload(c.logits), dist: g.alloc.tensor([c.n]) }));
  const enc = g.encoder();
  const res = recordSample(g, enc, rows);
  const rr = enc.read<Int32Array>(res);
  const dr = rows.map((r) => enc.read<Float32Array>(r.dist!));
  await enc.submit();
  const err = takeUncapturedError();
  if (err) throw new Error(`webgpu device error: ${err}`);
  const out = cases.map((c) => result(Math.max(c.topN, 0)));
  decodeSampleResults(rr.data!, rows, out);
  return { out, dist: dr.map((d) => d.data!) };
}

describe('webgpu sampling kernel', () => {
  const cases = randomCases(3, 18);
  const want = cases.map((c) => {
    const row: SampleRow = { ...common(c), logits: c.logits, dist: new Float32Array(c.n) };
    const out = result(Math.max(c.topN, 0));
    ref.sample([row], [out]);
    return { out, dist: row.dist! };
  });

  test('agrees with the reference: tokens, kept sets, weights, normalisers, top-N', async () => {
    const got = await gpuSample(cases);
    cases.forEach((c, i) => {
      const w = want[i]!;
      const o = got.out[i]!;
      const what = `case ${i} n=${c.n} ${JSON.stringify(c.p)}`;
      for (let j = 0; j < c.n; j++) {
        if ((got.dist[i]![j]! > 0) !== (w.dist[j]! > 0)) assert.fail(`${what}: kept set differs at id ${j} (${got.dist[i]![j]} vs ${w.dist[j]})`);
      }
      assert.ok(relErr(got.dist[i]!, w.dist) <= 1e-5, `${what}: dist rel err ${relErr(got.dist[i]!, w.dist)}`);
      assert.ok(Math.abs(o.keptMass - w.out.keptMass) <= 1e-5 * w.out.keptMass, `${what}: kept mass ${o.keptMass} vs ${w.out.keptMass}`);
      assert.equal(o.token, w.out.token, `${what}: token`);
      if (c.topN >= 0) {
        assert.ok(Object.is(o.rawMax, w.out.rawMax), `${what}: rawMax ${o.rawMax} vs ${w.out.rawMax}`);
        assert.ok(Math.abs(o.rawSumExp - w.out.rawSumExp) <= 1e-5 * w.out.rawSumExp, `${what}: rawSumExp`);
        assert.deepEqual([...o.topIds], [...w.out.topIds], `${what}: top ids`);
        assert.deepEqual([...o.topVals], [...w.out.topVals], `${what}: top values`);
      }
    });
  });

  test('a row alone == the same row in the batch (bit-exact)', async () => {
    const batch = await gpuSample(cases.slice(0, 8));
    for (const i of [0, 5]) {
      const alone = await gpuSample([cases[i]!]);
      assert.equal(alone.out[0]!.token, batch.out[i]!.token);
      assert.ok(Object.is(alone.out[0]!.keptMass, batch.out[i]!.keptMass));
      assert.deepEqual([...alone.dist[0]!], [...batch.dist[i]!]);
    }
  });

  test('non-finite rows: one-hot on the first maximum', async () => {
    const n = 50;
    const allNaN = new Float32Array(n).fill(NaN);
    const withInf = Float32Array.from({ length: n }, (_, i) => (i === 7 || i === 9 ? Infinity : 0));
    const cs: Case[] = [allNaN, withInf].map((logits) => ({ logits, n, p: SETTINGS[0]!, u: 0.5, patches: new Map(), topN: -1 }));
    const got = await gpuSample(cs);
    assert.equal(got.out[0]!.token, 0);
    assert.equal(got.out[1]!.token, 7);
  });
});
