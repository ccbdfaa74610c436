// The vision tower's kernels (Kernels.layerNorm, Kernels.biasAct) on a backend against the
// ref twin (kernels/ref/tower-ops.ts), through the Kernels interface only, so one check
// serves wasm and webgpu: odd widths (vector tails), pool-sized calls, out aliasing x, and
// a call over all rows == calls over row blocks, bit for bit. Error = max|Δ| / max|ref|.
import assert from 'node:assert/strict';
import type { AnyKernels, BiasAct, Tensor } from '../src/kernels/types.js';
import { createRefKernels } from '../src/kernels/ref/index.js';
import { relErr, rng } from './numeric.js';

const ref = createRefKernels();

/** [rows, width] cases: tails, the tower's widths, and pool-sized calls (rows·d ≥ 2¹⁵). */
const SHAPES: readonly (readonly [number, number])[] = [[1, 1], [3, 7], [5, 32], [9, 131], [67, 768], [20, 3072]];

function same(got: ArrayLike<number>, want: ArrayLike<number>, what: string): void {
  for (let i = 0; i < want.length; i++) if (!Object.is(got[i], want[i])) assert.fail(`${what}: [${i}] ${got[i]} !== ${want[i]}`);
}

function close(got: ArrayLike<number>, want: ArrayLike<number>, tol: number, what: string): void {
  if (tol === 0) return same(got, want, what);
  const e = relErr(got, want);
  assert.ok(e <= tol, `${what}: rel err ${e} > ${tol}`);
}

/** Each element of at least 1e-3 within 1e-5 of its own size: the GELUs stay accurate
 * in their negative tails, where the output is small (no cancellation in 1 + erf). */
function closeEach(got: ArrayLike<number>, want: ArrayLike<number>, what: string): void {
  for (let i = 0; i < want.length; i++) {
    const w = want[i]!;
    if (Math.abs(w) >= 1e-3 && !(Math.abs(got[i]! - w) <= 1e-5 * Math.abs(w))) assert.fail(`${what}: [${i}] ${got[i]} vs ${w}`);
  }
}

async function read(k: AnyKernels, t: Tensor, n: number): Promise<Float32Array> {
  return Float32Array.from((await k.readBack([{ t, offset: 0, length: n }]))[0]!);
}

function upload(k: AnyKernels, v: Float32Array): Tensor {
  const t = k.alloc(v.length);
  k.write(t, 0, v);
  return t;
}

/** Random values: rows with an offset and a spread of their own (LayerNorm's mean and
 * variance matter), within ±scale overall. */
function rows(r: () => number, m: number, d: number, scale: number): Float32Array {
  const out = new Float32Array(m * d);
  for (let i = 0; i < m; i++) {
    const mean = scale * (r() - 0.5);
    const spread = scale * (0.05 + r());
    for (let j = 0; j < d; j++) out[i * d + j] = mean + spread * (2 * r() - 1);
  }
  return out;
}

/** layerNorm within `tol` of ref (0: the ref's bits). */
export async function checkLayerNorm(k: AnyKernels, tol: number): Promise<void> {
  const r = rng(31);
  for (const [m, d] of SHAPES) {
    const x = rows(r, m, d, 8);
    const w = Float32Array.from({ length: d }, () => 0.5 + r());
    const b = Float32Array.from({ length: d }, () => r() - 0.5);
    for (const eps of [1e-6, 1e-5]) {
      const want = new Float32Array(m * d);
      ref.layerNorm(want, x, w, b, m, d, eps);
      const [xt, wt, bt, out] = [upload(k, x), upload(k, w), upload(k, b), k.alloc(m * d)];
      k.layerNorm(out, xt, wt, bt, m, d, eps);
      const got = await read(k, out, m * d);
      close(got, want, tol, `layerNorm ${m}×${d} eps ${eps}`);
      // row blocks, then in place: the same bits as the one call
      const split = k.alloc(m * d);
      const half = Math.ceil(m / 2);
      k.layerNorm(k.view(split, 0, half * d), k.view(xt, 0, half * d), wt, bt, half, d, eps);
      k.layerNorm(k.view(split, half * d, (m - half) * d), k.view(xt, half * d, (m - half) * d), wt, bt, m - half, d, eps);
      same(await read(k, split, m * d), got, `layerNorm ${m}×${d}: two row blocks`);
      k.layerNorm(xt, xt, wt, bt, m, d, eps);
      same(await read(k, xt, m * d), got, `layerNorm ${m}×${d}: in place`);
    }
  }
}

/** biasAct: 'none' exact (one f32 add), the GELUs within `geluTol` of ref. */
export async function checkBiasAct(k: AnyKernels, geluTol: number): Promise<void> {
  const r = rng(32);
  for (const act of ['none', 'geluTanh', 'geluErf'] as const satisfies readonly BiasAct[]) {
    for (const [m, d] of SHAPES) {
      // ±0.5 checks the GELUs near 0 (the error relative to small outputs), ±12 their tails
      for (const scale of [0.5, 12]) {
        const x = rows(r, m, d, scale);
        const bias = Float32Array.from({ length: d }, () => scale * (r() - 0.5));
        const want = new Float32Array(m * d);
        ref.biasAct(want, x, bias, m, d, act);
        const [xt, bt, out] = [upload(k, x), upload(k, bias), k.alloc(m * d)];
        k.biasAct(out, xt, bt, m, d, act);
        const got = await read(k, out, m * d);
        close(got, want, act === 'none' ? 0 : geluTol, `biasAct ${act} ${m}×${d} ±${scale}`);
        if (act !== 'none') closeEach(got, want, `biasAct ${act} ${m}×${d} ±${scale}`);
        k.biasAct(xt, xt, bt, m, d, act);
        same(await read(k, xt, m * d), got, `biasAct ${act} ${m}×${d}: in place`);
      }
    }
  }
}
