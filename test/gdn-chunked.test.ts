// Invariant 2 (docs/ARCHITECTURE.md "Invariants"): chunked Gated DeltaNet prefill == step-by-step recurrence
// (≤ 1e-5 in float32), on lengths that are not multiples of 64, from a non-zero state;
// and the verify-scratch path (state read only, per-step states) equals in-place steps.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRefKernels } from '../src/kernels/ref/index.js';
import type { GdnDims } from '../src/kernels/types.js';
import { relErr } from './numeric.js';

function lcg(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 4294967296 - 0.5;
  };
}

function randomInputs(dims: GdnDims, t: number, seed: number) {
  const rnd = lcg(seed);
  const width = 2 * dims.numKeyHeads * dims.keyDim + dims.numValueHeads * dims.valueDim;
  const qkv = Float32Array.from({ length: t * width }, () => 2 * rnd());
  const hv = dims.numValueHeads;
  // g ∈ (−1.5, 0): realistic decays, including strong ones; beta ∈ (0, 1)
  const g = Float32Array.from({ length: t * hv }, () => -1.5 * (rnd() + 0.5));
  const beta = Float32Array.from({ length: t * hv }, () => rnd() + 0.5);
  const state = Float32Array.from({ length: hv * dims.keyDim * dims.valueDim }, () => rnd());
  return { qkv, g, beta, state };
}

const k = createRefKernels();
const shapes: GdnDims[] = [
  { numKeyHeads: 2, numValueHeads: 4, keyDim: 16, valueDim: 8 },
  { numKeyHeads: 1, numValueHeads: 1, keyDim: 12, valueDim: 20 },
];

for (const dims of shapes) {
  for (const t of [1, 5, 63, 64, 65, 130, 200]) {
    test(`chunked == recurrent: HK${dims.numKeyHeads} HV${dims.numValueHeads} dk${dims.keyDim} dv${dims.valueDim} T=${t}`, () => {
      const { qkv, g, beta, state } = randomInputs(dims, t, t * 31 + dims.keyDim);
      const hv = dims.numValueHeads;
      const outR = new Float32Array(t * hv * dims.valueDim);
      const outC = new Float32Array(t * hv * dims.valueDim);
      const sR = state.slice();
      const sC = state.slice();
      k.gdnRecurrent(outR, qkv, g, beta, sR, dims, t);
      k.gdnChunked(outC, qkv, g, beta, sC, dims, t);
      assert.ok(relErr(outC, outR) <= 1e-5, `outputs differ: ${relErr(outC, outR)}`);
      assert.ok(relErr(sC, sR) <= 1e-5, `states differ: ${relErr(sC, sR)}`);
    });
  }
}

test('recurrent with scratch: committed state untouched, scratch[t] == state after t+1 in-place steps', () => {
  const dims = shapes[0]!;
  const t = 5;
  const { qkv, g, beta, state } = randomInputs(dims, t, 7);
  const size = state.length;
  const width = qkv.length / t;
  const hv = dims.numValueHeads;
  const scratch = new Float32Array(t * size);
  const committed = state.slice();
  const outS = new Float32Array(t * hv * dims.valueDim);
  k.gdnRecurrent(outS, qkv, g, beta, committed, dims, t, scratch);
  assert.deepEqual(committed, state);
  const running = state.slice();
  for (let i = 0; i < t; i++) {
    const out1 = new Float32Array(hv * dims.valueDim);
    k.gdnRecurrent(out1, qkv.subarray(i * width, (i + 1) * width), g.subarray(i * hv), beta.subarray(i * hv), running, dims, 1);
    assert.deepEqual(scratch.subarray(i * size, (i + 1) * size), running, `state after step ${i}`);
    assert.deepEqual(outS.subarray(i * out1.length, (i + 1) * out1.length), out1, `output of step ${i}`);
  }
});

test('causal conv with scratch: window untouched, scratch[t] == window after t+1 steps', () => {
  const c = 6;
  const kk = 4;
  const t = 4;
  const rnd = lcg(3);
  const { weight, bytes } = k.allocWeight('f32', c, kk);
  new Float32Array(bytes.buffer, bytes.byteOffset, c * kk).set(Float32Array.from({ length: c * kk }, rnd));
  const x = Float32Array.from({ length: t * c }, rnd);
  const window = Float32Array.from({ length: (kk - 1) * c }, rnd);
  const scratch = new Float32Array(t * (kk - 1) * c);
  const outS = new Float32Array(t * c);
  const w0 = window.slice();
  k.causalConv(outS, x, w0, weight, t, scratch);
  assert.deepEqual(w0, window);
  const running = window.slice();
  const outAll = new Float32Array(t * c);
  k.causalConv(outAll, x, running, weight, t);
  assert.deepEqual(outS, outAll);
  assert.deepEqual(scratch.subarray((t - 1) * (kk - 1) * c), running);
});

test('chunked: a prefill split into calls (chunks aligned to absolute multiples of 64) == one call, bit for bit', () => {
  const dims = shapes[0]!;
  const t = 200;
  const { qkv, g, beta, state } = randomInputs(dims, t, 99);
  const hv = dims.numValueHeads;
  const width = qkv.length / t;
  const od = hv * dims.valueDim;
  const whole = new Float32Array(t * od);
  const sWhole = state.slice();
  k.gdnChunked(whole, qkv, g, beta, sWhole, dims, t, 0);
  /** Prefill split at `cuts` (each call's chunks aligned to absolute positions). */
  const run = (cuts: number[], s = state.slice()): Float32Array => {
    const out = new Float32Array(t * od);
    const bounds = [0, ...cuts, t];
    for (let i = 0; i + 1 < bounds.length; i++) {
      const [a, b] = [bounds[i]!, bounds[i + 1]!];
      k.gdnChunked(out.subarray(a * od, b * od), qkv.subarray(a * width, b * width), g.subarray(a * hv, b * hv),
        beta.subarray(a * hv, b * hv), s, dims, b - a, a);
    }
    return out;
  };
  for (const cuts of [[100, 128], [37, 64, 150], [64, 128, 192], [1, 2, 3, 199]]) {
    const s = state.slice();
    const parts = run(cuts, s);
    // splits at non-multiples of 64 (37, 150, 1, 2, 3, 199) cut a chunk: only splits at
    // multiples of 64 are bit-exact with the one-call run
    const aligned = cuts.every((c) => c % 64 === 0);
    if (aligned) {
      assert.deepEqual(parts, whole, `cuts ${cuts}`);
      assert.deepEqual(s, sWhole, `cuts ${cuts}`);
    } else {
      assert.ok(relErr(parts, whole) <= 1e-5, `cuts ${cuts}: ${relErr(parts, whole)}`);
    }
  }
  // two runs that share an unaligned split (100) but differ elsewhere agree bit for bit
  assert.deepEqual(run([64, 100, 128, 192]), run([100]));
});
