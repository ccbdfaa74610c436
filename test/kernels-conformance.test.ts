// Conformance: every kernel of the fast backend(s) against the reference twin (f64
// accumulation) on random shapes with odd sizes and tails. One suite, parameterised by
// backend: wasm with 1 thread and with 2 threads (sizes marked "pool" exceed the backend's
// parallel thresholds, so the worker-pool path runs). Error = max|Δ| / max|ref|.
// Tolerances (and why):
//   exact   embed, kvWrite, add, moeRoute ids      (copies / one correctly rounded op)
//   1e-6    rope, gdnGates, moeRoute weights,      (f64 math as the ref, or one f32 exp
//           mulSilu, mulSigmoid                     per element)
//   1e-5    matmul, rmsNorm, gatedRmsNorm,         (f32 accumulation in a fixed order vs
//           causalConv, attention                   the ref's f64: ~√K·2⁻²⁴ relative)
//   1e-5    gdnRecurrent                           (f32 state through T steps)
//   2e-5    gdnChunked                             (f32; forward substitution + chunk sums
//                                                   reassociate the recurrence)
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { GdnDims, Kernels, KvLayerView, Weight, WeightDType } from '../src/kernels/types.js';
import { createRefKernels } from '../src/kernels/ref/index.js';
import { plainRopeTable } from '../src/kernels/rope-table.js';
import { probeBandwidth } from '../src/kernels/wasm/index.js';
import { f16ToF32 } from '../src/kernels/quant/dequant.js';
import { wasmBackendsUnderTest } from './wasm-backends.js';
import { randomWeight, relErr, rng } from './numeric.js';
import { bruteCandidates, candidateRows } from './candidate-rows.js';

const backends = await wasmBackendsUnderTest();
const ref = createRefKernels();

function fill(k: Kernels, n: number, f: () => number): Float32Array {
  const a = k.alloc(n);
  for (let i = 0; i < n; i++) a[i] = f();
  return a;
}

const weight = randomWeight;

/** A random linear weight: row-major in the ref backend, packed in k (same values). */
function linear(k: Kernels, dtype: WeightDType, rows: number, cols: number, f: () => number): { w: Weight; wr: Weight } {
  const raw = weight(k, dtype, rows, cols, f);
  const wr = cloneWeight(ref, raw);
  return { w: k.packWeight(raw), wr };
}

function close(got: ArrayLike<number>, want: ArrayLike<number>, tol: number, what: string, n?: number): void {
  const e = relErr(got, want, n);
  assert.ok(e <= tol, `${what}: rel err ${e} > ${tol}`);
}

function same(got: ArrayLike<number>, want: ArrayLike<number>, what: string, n = want.length): void {
  for (let i = 0; i < n; i++) {
    if (!Object.is(got[i], want[i])) assert.fail(`${what}: [${i}] ${got[i]} !== ${want[i]}`);
  }
}

const sym = (r: () => number) => () => 2 * r() - 1;

for (const { label, k } of backends) {
  describe(`kernel conformance [${label}]`, () => {
    test('matmul: M 1..9, 12, 16, 17, 23, odd N, K with tails, bf16, f16 and f32 weights', () => {
      const r = rng(1);
      const shapes = [[1, 1], [3, 7], [5, 8], [31, 9], [64, 15], [67, 16], [13, 33], [29, 100], [67, 513], [130, 257], [260, 1031] /* pool */];
      for (const dtype of ['bf16', 'f16', 'f32'] as const) {
        for (const [n, kk] of shapes) {
          const { w, wr } = linear(k, dtype, n!, kk!, sym(r));
          for (const m of [1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 17, 23]) {
            const x = fill(k, m * kk!, sym(r));
            const out = k.alloc(m * n!);
            const want = new Float32Array(m * n!);
            k.matmul(out, x, w, m);
            ref.matmul(want, x, wr, m);
            close(out, want, 1e-5, `${dtype} M=${m} N=${n} K=${kk}`);
          }
        }
      }
    });

    test('f16 matmul == f32 matmul of the exactly widened weights, bit for bit (every finite f16, subnormals and ±0 included)', () => {
      const r = rng(31);
      const n = 40;
      const kk = 2051; // every one of the 63488 finite f16 bit patterns, and a tail of 3 mod 8
      const { weight: raw } = k.allocWeight('f16', n, kk);
      const bits = raw.data as Uint16Array;
      let next = 0;
      for (let i = 0; i < n * kk; i++) {
        while ((next & 0x7c00) === 0x7c00) next = (next + 1) & 0xffff; // skip inf / NaN
        bits[i] = next;
        next = (next + 1) & 0xffff;
      }
      const wide = k.allocWeight('f32', n, kk).weight;
      for (let i = 0; i < n * kk; i++) (wide.data as Float32Array)[i] = f16ToF32(bits[i]!);
      const ids = [0, 39, 17];
      const wantRows = ids.map((id) => Float32Array.from((wide.data as Float32Array).subarray(id * kk, (id + 1) * kk)));
      const w16 = k.packWeight(raw);
      const w32 = k.packWeight(wide);
      // small activations keep Σ x·w finite next to f16's 65504
      for (const m of [1, 3, 4, 9, 12]) { // row by row, 4-row blocks widened in registers, tiles widened to f32
        const x = fill(k, m * kk, () => (2 * r() - 1) * 1e-3);
        const a = k.alloc(m * n);
        const b = k.alloc(m * n);
        k.matmul(a, x, w16, m);
        k.matmul(b, x, w32, m);
        same(a, b, `f16 vs f32 M=${m}`);
      }
      // single rows (M < 4) and 4-row blocks (4 ≤ M < 12) take 2¹¹² onto the activations when
      // every |x| < 2¹⁶: a row (block) with |x| = 2¹⁶ or more runs as stored, a row just under
      // the bound or of subnormal x is prescaled; both must keep the f32 bits (rows of each
      // kind in one call, blocks of 4 with and without an unscalable row, leftover rows)
      const kinds: ((i: number) => number)[] = [
        (i) => (i === 5 ? -65536 : (2 * r() - 1) * 1e-3),
        (i) => (i === 900 ? 1e6 : (2 * r() - 1) * 1e-3),
        (i) => (i === 7 ? 65535.99609375 : (2 * r() - 1) * 1e-3),
        () => (2 * r() - 1) * 1e-40,
      ];
      const orders = [[0], [1], [2], [3], [0, 2], [2, 3, 1], [2, 3, 2, 3], [2, 3, 0, 2], [3, 2, 1, 3, 0, 2, 3],
        [2, 3, 3, 2, 2, 3, 3, 2, 1, 2, 3], [2, 3, 3, 2, 0, 1, 2, 3, 3, 2, 2, 3, 0]];
      for (const order of orders) {
        const m = order.length;
        const x = k.alloc(m * kk);
        order.forEach((kind, row) => { for (let i = 0; i < kk; i++) x[row * kk + i] = kinds[kind]!(i); });
        const a = k.alloc(m * n);
        const b = k.alloc(m * n);
        k.matmul(a, x, w16, m);
        k.matmul(b, x, w32, m);
        same(a, b, `f16 vs f32, rows of kinds ${order.join(',')}`);
      }
      const rows = k.alloc(3 * kk);
      k.embed(rows, w16, ids); // from the packed panels
      ids.forEach((id, i) => same(rows.subarray(i * kk, (i + 1) * kk), wantRows[i]!, `embed f16 row ${id}`));
    });

    test('matmul with operands outside wasm memory (copy path) equals in-memory', () => {
      const r = rng(2);
      const { w, wr } = linear(k, 'bf16', 70, 515, sym(r));
      const x = fill(k, 3 * 515, sym(r));
      const a = k.alloc(3 * 70);
      k.matmul(a, x, w, 3);
      const b = new Float32Array(3 * 70);
      k.matmul(b, Float32Array.from(x), w, 3);
      same(b, a, 'js-heap x/out');
      const c = new Float32Array(3 * 70);
      k.matmul(c, x, k.packWeight(wr), 3); // a JS-heap weight is copied in, then packed
      same(c, a, 'js-heap weight');
      assert.throws(() => k.matmul(c, x, wr, 3), /not packed/);
      assert.throws(() => ref.matmul(c, x, w, 3), /packed for another backend|panel8/);
    });

    test('embed and embedIds: exact widening, bf16, f16 and f32 tables, row-major and packed (tied lm_head)', () => {
      const r = rng(3);
      for (const dtype of ['bf16', 'f16', 'f32'] as const) {
        const { w: packed, wr: table } = linear(k, dtype, 50, 37, sym(r));
        const ids = [0, 49, 7, 7, 23, 44, 45, 46, 47];
        const want = new Float32Array(ids.length * 37);
        ref.embed(want, table, ids);
        for (const [what, t] of [['row-major', cloneWeight(k, table)], ['packed', packed]] as const) {
          const out = k.alloc(ids.length * 37);
          k.embed(out, t, ids);
          same(out, want, `${dtype} ${what}`);
          // embedIds: the same rows from ids in kernel memory, at an offset
          const dev = k.allocI32(ids.length + 2);
          dev.set(ids, 2);
          const viaIds = k.alloc(ids.length * 37);
          k.embedIds(viaIds, t, dev, 2, ids.length);
          same(viaIds, want, `embedIds ${dtype} ${what}`);
        }
      }
    });

    test('rmsNorm (zero-centred and plain) and gatedRmsNorm, odd widths, in place', () => {
      const r = rng(4);
      for (const dtype of ['bf16', 'f32'] as const) {
        for (const d of [1, 7, 64, 101]) {
          const w = weight(k, dtype, 1, d, sym(r));
          for (const zc of [true, false]) {
            const m = 6;
            const x = fill(k, m * d, () => 3 * (2 * r() - 1));
            const want = new Float32Array(m * d);
            ref.rmsNorm(want, x, w, m, 1e-6, zc);
            const out = k.alloc(m * d);
            k.rmsNorm(out, x, w, m, 1e-6, zc);
            close(out, want, 1e-5, `rmsNorm ${dtype} d=${d} zc=${zc}`);
            k.rmsNorm(x, x, w, m, 1e-6, zc); // aliasing
            same(x, out, 'in place');
          }
          const m = 5;
          const o = fill(k, m * d, sym(r));
          const z = fill(k, m * d, () => 4 * (2 * r() - 1));
          const want = new Float32Array(m * d);
          ref.gatedRmsNorm(want, o, z, w, m, 1e-6);
          const out = k.alloc(m * d);
          k.gatedRmsNorm(out, o, z, w, m, 1e-6);
          close(out, want, 1e-5, `gatedRmsNorm ${dtype} d=${d}`);
        }
      }
    });

    test('prefill-sized rmsNorm, gatedRmsNorm, mulSilu, mulSigmoid (split over the pool) == row by row, bit for bit', () => {
      const r = rng(41);
      const m = 67;
      const d = 1030; // m·d past the pool threshold; d not a multiple of 4
      for (const dtype of ['bf16', 'f32'] as const) {
        const w = weight(k, dtype, 1, d, sym(r));
        const x = fill(k, m * d, () => 3 * (2 * r() - 1));
        const z = fill(k, m * d, () => 4 * (2 * r() - 1));
        const one = k.alloc(d);
        const oneZ = k.alloc(d);
        const row = k.alloc(d);
        const check = (all: Float32Array, single: (i: number) => void, what: string): void => {
          for (let i = 0; i < m; i++) {
            one.set(x.subarray(i * d, (i + 1) * d));
            oneZ.set(z.subarray(i * d, (i + 1) * d));
            single(i);
            same(all.subarray(i * d, (i + 1) * d), row, `${what} ${dtype} row ${i}`);
          }
        };
        for (const zc of [true, false]) {
          const out = k.alloc(m * d);
          k.rmsNorm(out, x, w, m, 1e-6, zc);
          const want = new Float32Array(m * d);
          ref.rmsNorm(want, x, w, m, 1e-6, zc);
          close(out, want, 1e-5, `rmsNorm ${dtype} zc=${zc}`);
          check(out, () => k.rmsNorm(row, one, w, 1, 1e-6, zc), `rmsNorm zc=${zc}`);
        }
        const gated = k.alloc(m * d);
        k.gatedRmsNorm(gated, x, z, w, m, 1e-6);
        check(gated, () => k.gatedRmsNorm(row, one, oneZ, w, 1, 1e-6), 'gatedRmsNorm');
        for (const act of ['mulSilu', 'mulSigmoid'] as const) {
          const out = k.alloc(m * d);
          k[act](out, x, z, m * d);
          const want = new Float32Array(m * d);
          ref[act](want, x, z, m * d);
          close(out, want, 1e-6, act);
          check(out, () => k[act](row, one, oneZ, d), act);
        }
      }
    });

    test('rope: partial rotary, strided rows, large positions', () => {
      const r = rng(5);
      for (const [heads, hd, rot] of [[4, 16, 4], [2, 64, 16], [3, 10, 10]] as const) {
        const t = 5;
        const stride = heads * hd + 6;
        const pos = [0, 1, 17, 4095, 100000];
        const x = fill(k, t * stride, sym(r));
        const want = Float32Array.from(x);
        ref.rope(want, pos, t, heads, hd, plainRopeTable(1e7, rot), stride);
        k.rope(x, Int32Array.from(pos), t, heads, hd, plainRopeTable(1e7, rot), stride);
        close(x, want, 1e-6, `rope h=${heads} hd=${hd} rot=${rot}`);
      }
    });

    test('causalConv: with and without scratch, odd channels, K = 4 and 3 (pool at T·C ≥ 32K)', () => {
      const r = rng(6);
      for (const [t, c, kw] of [[1, 37, 4], [2, 5, 4], [5, 37, 3], [9, 64, 4], [64, 600, 4] /* pool */] as const) {
        for (const dtype of ['bf16', 'f32'] as const) {
          const w = weight(k, dtype, c, kw, sym(r));
          const x = fill(k, t * c, sym(r));
          const win0 = fill(k, (kw - 1) * c, sym(r));
          const win = k.alloc(win0.length);
          win.set(win0);
          const winRef = Float32Array.from(win0);
          const out = k.alloc(t * c);
          const want = new Float32Array(t * c);
          k.causalConv(out, x, win, w, t);
          ref.causalConv(want, x, winRef, w, t);
          close(out, want, 1e-5, `conv out T=${t} C=${c} K=${kw} ${dtype}`);
          same(win, winRef, 'window update');
          const win2 = k.alloc(win0.length);
          win2.set(win0);
          const sc = k.alloc(t * (kw - 1) * c);
          const scRef = new Float32Array(sc.length);
          const out2 = k.alloc(t * c);
          k.causalConv(out2, x, win2, w, t, sc);
          ref.causalConv(want, x, Float32Array.from(win0), w, t, scRef);
          same(out2, out, 'scratch vs no scratch outputs');
          same(win2, win0, 'window read only with scratch');
          same(sc, scRef, 'scratch windows');
        }
      }
    });

    test('causalConvSeqs: a batch of sequences (t = 0, 1, 3; scratch or not) == one causalConv per sequence, bit for bit', () => {
      const r = rng(61);
      for (const [c, kw] of [[37, 4], [600, 4] /* pool */, [64, 3]] as const) {
        for (const dtype of ['bf16', 'f32'] as const) {
          const w = weight(k, dtype, c, kw, sym(r));
          const spans = [{ t: 1, scratch: false }, { t: 0, scratch: false }, { t: 3, scratch: true }, { t: 1, scratch: false }, { t: 2, scratch: true }];
          const rows = spans.reduce((n, s) => n + s.t, 0);
          const x = fill(k, rows * c, sym(r));
          const hist = (kw - 1) * c;
          const win0 = spans.map(() => Float32Array.from(fill(k, hist, sym(r))));
          const copy = (v: Float32Array): Float32Array => { const a = k.alloc(v.length); a.set(v); return a; };
          const winB = win0.map(copy);
          const winA = win0.map(copy);
          const scB = spans.map((s) => (s.scratch ? k.alloc(Math.max(1, s.t) * hist) : undefined));
          const scA = spans.map((s) => (s.scratch ? k.alloc(Math.max(1, s.t) * hist) : undefined));
          const outB = k.alloc(rows * c);
          const outA = k.alloc(rows * c);
          let row = 0;
          const seqs = spans.map((s, i) => { const q = { row, t: s.t, window: winB[i]!, scratch: scB[i] }; row += s.t; return q; });
          k.causalConvSeqs(outB, x, w, seqs);
          for (const [i, q] of seqs.entries()) {
            if (q.t === 0) continue;
            k.causalConv(k.view(outA, q.row * c, q.t * c), k.view(x, q.row * c, q.t * c), winA[i]!, w, q.t, scA[i]);
          }
          const tag = `C=${c} K=${kw} ${dtype}`;
          same(outB, outA, `batched outputs ${tag}`);
          for (const i of spans.keys()) {
            same(winB[i]!, winA[i]!, `window ${i} ${tag}`);
            if (spans[i]!.scratch) same(winB[i]!, win0[i]!, `window ${i} read only with scratch ${tag}`);
            if (scB[i]) same(scB[i]!, scA[i]!, `scratch ${i} ${tag}`);
          }
          const want = new Float32Array(rows * c);
          ref.causalConvSeqs(want, x, w, seqs.map((q, i) => ({ ...q, window: Float32Array.from(win0[i]!), scratch: q.scratch ? new Float32Array(q.scratch.length) : undefined })));
          close(outB, want, 1e-5, `batched vs ref ${tag}`);
        }
      }
    });

    test('matmulGroup with a conv == the group, then causalConvSeqs on its first output, bit for bit', () => {
      const r = rng(67);
      const [h, c, kw] = [64, 40, 4];
      const ws = [weight(k, 'bf16', c, h, sym(r)), weight(k, 'bf16', 24, h, sym(r))].map((w) => k.packWeight(w));
      const wc = weight(k, 'f32', c, kw, sym(r));
      const spans = [{ t: 1 }, { t: 3, scratch: true }, { t: 1 }];
      const m = 5;
      const x = fill(k, m * h, sym(r));
      const win0 = spans.map(() => Float32Array.from(fill(k, (kw - 1) * c, sym(r))));
      const run = (fold: boolean): Float32Array[] => {
        const win = win0.map((v) => { const a = k.alloc(v.length); a.set(v); return a; });
        const sc = spans.map((s) => (s.scratch ? k.alloc(s.t * (kw - 1) * c) : undefined));
        const [qkv, z, out] = [k.alloc(m * c), k.alloc(m * 24), k.alloc(m * c)];
        let row = 0;
        const seqs = spans.map((s, i) => { const q = { row, t: s.t, window: win[i]!, scratch: sc[i] }; row += s.t; return q; });
        const group = [{ out: qkv, w: ws[0]! }, { out: z, w: ws[1]! }];
        if (fold) k.matmulGroup(x, m, group, undefined, { out, w: wc, seqs });
        else {
          k.matmulGroup(x, m, group);
          k.causalConvSeqs(out, qkv, wc, seqs);
        }
        return [out, z, ...win, ...sc.filter((v): v is Float32Array => v !== undefined)];
      };
      const [a, b] = [run(true), run(false)];
      a.forEach((v, i) => same(v, b[i]!, `result ${i} (post-conv rows, z, windows, scratch)`));
    });

    test('gdnGates', () => {
      const r = rng(7);
      const hv = 5;
      const t = 7;
      const aLog = weight(k, 'f32', 1, hv, () => 2 * r() - 1);
      const dt = weight(k, 'bf16', 1, hv, () => 2 * r() - 1);
      const a = fill(k, t * hv, () => 30 * (2 * r() - 1)); // crosses softplus' x > 20 branch
      const b = fill(k, t * hv, () => 8 * (2 * r() - 1));
      const g = k.alloc(t * hv);
      const beta = k.alloc(t * hv);
      const gw = new Float32Array(t * hv);
      const bw = new Float32Array(t * hv);
      k.gdnGates(g, beta, a, b, aLog, dt, t);
      ref.gdnGates(gw, bw, a, b, aLog, dt, t);
      close(g, gw, 1e-6, 'g');
      close(beta, bw, 1e-6, 'beta');
    });

    const gdnCases: [GdnDims, number[]][] = [
      [{ numKeyHeads: 2, numValueHeads: 4, keyDim: 16, valueDim: 12 }, [1, 3, 7]],
      [{ numKeyHeads: 1, numValueHeads: 3, keyDim: 7, valueDim: 5 }, [1, 4]],
      [{ numKeyHeads: 2, numValueHeads: 4, keyDim: 32, valueDim: 32 }, [16] /* pool */],
    ];

    function gdnInputs(r: () => number, dims: GdnDims, t: number) {
      const width = 2 * dims.numKeyHeads * dims.keyDim + dims.numValueHeads * dims.valueDim;
      const hv = dims.numValueHeads;
      return {
        qkv: fill(k, t * width, sym(r)),
        g: fill(k, t * hv, () => -0.01 - 2 * r()),
        beta: fill(k, t * hv, () => 0.05 + 0.9 * r()),
        state: fill(k, hv * dims.keyDim * dims.valueDim, () => 0.5 * (2 * r() - 1)),
      };
    }

    test('gdnRecurrent: outputs, in-place state and per-step scratch vs ref', () => {
      const r = rng(8);
      for (const [dims, ts] of gdnCases) {
        for (const t of ts) {
          const { qkv, g, beta, state } = gdnInputs(r, dims, t);
          const ss = state.length;
          const ov = t * dims.numValueHeads * dims.valueDim;
          const s0 = Float32Array.from(state);
          const out = k.alloc(ov);
          const want = new Float32Array(ov);
          const sRef = Float32Array.from(s0);
          k.gdnRecurrent(out, qkv, g, beta, state, dims, t);
          ref.gdnRecurrent(want, qkv, g, beta, sRef, dims, t);
          close(out, want, 1e-5, `out T=${t} dk=${dims.keyDim}`);
          close(state, sRef, 1e-5, `state T=${t}`);
          const st2 = k.alloc(ss);
          st2.set(s0);
          const sc = k.alloc(t * ss);
          const scRef = new Float32Array(t * ss);
          const out2 = k.alloc(ov);
          k.gdnRecurrent(out2, qkv, g, beta, st2, dims, t, sc);
          ref.gdnRecurrent(want, qkv, g, beta, Float32Array.from(s0), dims, t, scRef);
          close(out2, want, 1e-5, 'out with scratch');
          close(sc, scRef, 1e-5, 'scratch states');
          same(st2, s0, 'committed state read only with scratch');
        }
      }
    });

    test('gdnRecurrentSeqs: a batch of sequences (t = 0, 1, 3, 12; scratch or not) == one gdnRecurrent per sequence, bit for bit', () => {
      const r = rng(81);
      const spans = [{ t: 1, scratch: false }, { t: 0, scratch: false }, { t: 3, scratch: true }, { t: 1, scratch: true }, { t: 12, scratch: false }];
      const rows = spans.reduce((n, q) => n + q.t, 0);
      for (const dims of [gdnCases[1]![0], gdnCases[2]![0] /* pool: 17 rows × 4096 */]) {
        const { qkv, g, beta } = gdnInputs(r, dims, rows);
        const ss = dims.numValueHeads * dims.keyDim * dims.valueDim;
        const ov = rows * dims.numValueHeads * dims.valueDim;
        const s0 = spans.map(() => Float32Array.from(gdnInputs(r, dims, 1).state));
        const copy = (v: Float32Array): Float32Array => { const a = k.alloc(v.length); a.set(v); return a; };
        const stB = s0.map(copy);
        const stA = s0.map(copy);
        const scB = spans.map((q) => (q.scratch ? k.alloc(Math.max(1, q.t) * ss) : undefined));
        const scA = spans.map((q) => (q.scratch ? k.alloc(Math.max(1, q.t) * ss) : undefined));
        const outB = k.alloc(ov);
        const outA = k.alloc(ov);
        let row = 0;
        const seqs = spans.map((q, i) => { const e = { row, t: q.t, state: stB[i]!, scratch: scB[i] }; row += q.t; return e; });
        k.gdnRecurrentSeqs(outB, qkv, g, beta, dims, seqs);
        const width = 2 * dims.numKeyHeads * dims.keyDim + dims.numValueHeads * dims.valueDim;
        const hv = dims.numValueHeads;
        for (const [i, q] of seqs.entries()) {
          if (q.t === 0) continue;
          const v = (buf: Float32Array, w: number): Float32Array => k.view(buf, q.row * w, q.t * w);
          k.gdnRecurrent(v(outA, hv * dims.valueDim), v(qkv, width), v(g, hv), v(beta, hv), stA[i]!, dims, q.t, scA[i]);
        }
        const tag = `dk=${dims.keyDim} hv=${hv}`;
        same(outB, outA, `batched outputs ${tag}`);
        for (const i of spans.keys()) {
          same(stB[i]!, stA[i]!, `state ${i} ${tag}`);
          if (spans[i]!.scratch) same(stB[i]!, s0[i]!, `state ${i} read only with scratch ${tag}`);
          if (scB[i]) same(scB[i]!, scA[i]!, `scratch ${i} ${tag}`);
        }
        const want = new Float32Array(ov);
        ref.gdnRecurrentSeqs(want, qkv, g, beta, dims, seqs.map((q, i) => ({ ...q, state: Float32Array.from(s0[i]!), scratch: q.scratch ? new Float32Array(q.scratch.length) : undefined })));
        close(outB, want, 1e-5, `batched vs ref ${tag}`);
      }
    });

    test('head order: gatedRmsNorm and gdnRecurrentGatedSeqs (perm, project) == the unpermuted rows moved, then matmulAdd, bit for bit', () => {
      const r = rng(83);
      const dims = gdnCases[0]![0]; // HV 4, dv 12
      const { numValueHeads: hv, valueDim: dv } = dims;
      const order = Int32Array.from([2, 0, 3, 1]);
      const moved = (src: Float32Array, m: number): Float32Array => {
        const out = new Float32Array(m * hv * dv);
        for (let i = 0; i < m; i++) for (let j = 0; j < hv; j++) out.set(src.subarray((i * hv + order[j]!) * dv, (i * hv + order[j]! + 1) * dv), (i * hv + j) * dv);
        return out;
      };
      for (const m of [1, 3, 40 /* pool */]) {
        const norm = weight(k, 'bf16', 1, dv, () => 0.5 + r());
        const o = fill(k, m * hv * dv, sym(r));
        const z = fill(k, m * hv * dv, () => 4 * (2 * r() - 1));
        const plain = k.alloc(m * hv * dv);
        k.gatedRmsNorm(plain, o, z, norm, m * hv, 1e-6);
        const perm = k.alloc(m * hv * dv);
        k.gatedRmsNorm(perm, o, z, norm, m * hv, 1e-6, order);
        same(perm, moved(plain, m), `gatedRmsNorm m=${m}`);
        const refPlain = new Float32Array(m * hv * dv);
        ref.gatedRmsNorm(refPlain, o, z, norm, m * hv, 1e-6);
        const refPerm = new Float32Array(m * hv * dv);
        ref.gatedRmsNorm(refPerm, o, z, norm, m * hv, 1e-6, order);
        same(refPerm, moved(refPlain, m), `ref gatedRmsNorm m=${m}`);
        close(perm, refPerm, 1e-5, `gatedRmsNorm vs ref m=${m}`);
      }
      // two sequences (t = 1, 2): perm and project vs the plain call, moved, then matmulAdd
      const rows = 3;
      const h = 9;
      const { qkv } = gdnInputs(r, dims, rows);
      const a = fill(k, rows * hv, sym(r));
      const b = fill(k, rows * hv, sym(r));
      const z = fill(k, rows * hv * dv, () => 3 * (2 * r() - 1));
      const aLog = weight(k, 'f32', 1, hv, () => r() - 1);
      const dtBias = weight(k, 'bf16', 1, hv, sym(r));
      const norm = weight(k, 'f32', 1, dv, () => 0.5 + r());
      const { w } = linear(k, 'bf16', h, hv * dv, sym(r));
      const x0 = fill(k, rows * h, sym(r));
      const s0 = [gdnInputs(r, dims, 1).state, gdnInputs(r, dims, 1).state].map((v) => Float32Array.from(v));
      const run = (gating: 'plain' | 'perm' | 'project'): { out: Float32Array; normed: Float32Array; x: Float32Array; states: Float32Array[] } => {
        const states = s0.map((v) => { const t = k.alloc(v.length); t.set(v); return t; });
        const out = k.alloc(rows * hv * dv);
        const normed = k.alloc(rows * hv * dv);
        const x = k.alloc(rows * h);
        x.set(x0);
        const seqs = [{ row: 0, t: 1, state: states[0]! }, { row: 1, t: 2, state: states[1]! }];
        k.gdnRecurrentGatedSeqs(out, qkv, { a, b, aLog, dtBias, g: k.alloc(rows * hv), beta: k.alloc(rows * hv), z, norm, eps: 1e-6,
          ...(gating !== 'plain' ? { perm: { order, out: normed } } : {}), ...(gating === 'project' ? { project: { x, w, m: rows, tmp: k.alloc(rows * h) } } : {}) },
        dims, seqs);
        return { out, normed, x, states };
      };
      const plain = run('plain');
      const perm = run('perm');
      same(perm.normed, moved(plain.out, rows), 'gdnRecurrentGatedSeqs perm');
      for (const i of [0, 1]) same(perm.states[i]!, plain.states[i]!, `state ${i}`);
      const proj = run('project');
      const want = k.alloc(rows * h);
      want.set(x0);
      const input = k.alloc(rows * hv * dv);
      input.set(moved(plain.out, rows));
      k.matmulAdd(want, input, w, rows, k.alloc(rows * h));
      same(proj.x, want, 'gdnRecurrentGatedSeqs project');
    });

    test('gdnChunked vs the ref chunked form (T across chunk boundaries, pos0 ≠ 0)', () => {
      const r = rng(9);
      const dims: GdnDims = { numKeyHeads: 2, numValueHeads: 4, keyDim: 16, valueDim: 12 };
      for (const [t, pos0] of [[1, 0], [5, 0], [64, 0], [65, 0], [130, 0], [70, 37], [64, 127], [3, 200]] as const) {
        const { qkv, g, beta, state } = gdnInputs(r, dims, t);
        const sRef = Float32Array.from(state);
        const out = k.alloc(t * 4 * 12);
        const want = new Float32Array(out.length);
        k.gdnChunked(out, qkv, g, beta, state, dims, t, pos0);
        ref.gdnChunked(want, qkv, g, beta, sRef, dims, t, pos0);
        close(out, want, 2e-5, `chunked out T=${t} pos0=${pos0}`);
        close(state, sRef, 2e-5, `chunked state T=${t} pos0=${pos0}`);
      }
    });

    function kvCase(r: () => number, pageSize: number, pages: number, kvDim: number) {
      const kv: KvLayerView = { k: k.alloc(pages * pageSize * kvDim), v: k.alloc(pages * pageSize * kvDim), pageSize };
      const pageTable = Int32Array.from({ length: pages }, (_, i) => i);
      for (let i = pages - 1; i > 0; i--) {
        const j = Math.floor(r() * (i + 1));
        [pageTable[i], pageTable[j]] = [pageTable[j]!, pageTable[i]!];
      }
      return { kv, pageTable };
    }

    test('kvWrite + attention over a shuffled page table (GQA, odd head dims, pool case)', () => {
      const r = rng(10);
      for (const [nH, nKV, hd, start, t] of [[4, 2, 8, 0, 1], [4, 2, 13, 5, 3], [6, 3, 16, 13, 6], [4, 1, 16, 300, 4] /* pool */, [8, 2, 16, 1100, 3] /* whole GQA groups per unit */,
        [8, 2, 13, 40, 21] /* query blocks, odd hd */, [6, 2, 24, 3, 40] /* blocks of 8 queries */] as const) {
        const ps = 4;
        const pages = Math.ceil((start + t) / ps) + 1;
        const kvDim = nKV * hd;
        const { kv, pageTable } = kvCase(r, ps, pages, kvDim);
        const refKv: KvLayerView = { k: new Float32Array(kv.k.length), v: new Float32Array(kv.v.length), pageSize: ps };
        // history 0..start-1 then the T new tokens, written by each backend's kvWrite
        const hk = fill(k, (start + t) * kvDim, sym(r));
        const hv = fill(k, (start + t) * kvDim, sym(r));
        k.kvWrite(kv, pageTable, 0, hk, hv, start + t, kvDim);
        ref.kvWrite(refKv, pageTable, 0, hk, hv, start + t, kvDim);
        same(kv.k, refKv.k, 'kv k');
        same(kv.v, refKv.v, 'kv v');
        const qStride = nH * hd + 3;
        const q = fill(k, t * qStride, () => 2 * (2 * r() - 1));
        const out = k.alloc(t * nH * hd);
        const want = new Float32Array(out.length);
        const dims = { numHeads: nH, numKvHeads: nKV, headDim: hd };
        k.attention(out, q, qStride, kv, pageTable, start, t, dims);
        ref.attention(want, q, qStride, refKv, pageTable, start, t, dims);
        close(out, want, 1e-5, `attention nH=${nH} hd=${hd} start=${start} T=${t}`);
      }
    });

    test('stepBatch + ropeBatch, kvWriteBatch, attentionBatch == rope, kvWrite, attention per sequence (t = 0, 1, 3, 5), bit for bit', () => {
      const r = rng(12);
      const [nH, nKV, hd, ps] = [4, 2, 13, 4];
      const kvDim = nKV * hd;
      const qStride = nH * hd + 5; // q inside wider rows, as a fused projection leaves it
      const table = plainRopeTable(1e6, 8);
      const dims = { numHeads: nH, numKvHeads: nKV, headDim: hd };
      const shapes = [{ t: 3, start: 9 }, { t: 0, start: 2 }, { t: 1, start: 30 }, { t: 5, start: 0 }];
      let row = 0;
      const seqs = shapes.map((s, i) => {
        const pageTable = Int32Array.from({ length: 9 }, (_, p) => p * shapes.length + i); // disjoint pages in one pool
        const b = { row, t: s.t, start: s.start, pageTable };
        row += s.t;
        return b;
      });
      const pool = 9 * shapes.length * ps * kvDim;
      const init = { q: Array.from({ length: row * qStride }, () => 2 * r() - 1), k: Array.from({ length: row * kvDim }, () => 2 * r() - 1),
        v: Array.from({ length: row * kvDim }, () => 2 * r() - 1), hist: Array.from({ length: pool }, () => 2 * r() - 1) };
      const setup = () => {
        const kv: KvLayerView = { k: fill(k, pool, (() => { let i = 0; return () => init.hist[i++]!; })()), v: fill(k, pool, () => 0.5), pageSize: ps };
        const q = fill(k, init.q.length, (() => { let i = 0; return () => init.q[i++]!; })());
        const kk = fill(k, init.k.length, (() => { let i = 0; return () => init.k[i++]!; })());
        const v = fill(k, init.v.length, (() => { let i = 0; return () => init.v[i++]!; })());
        return { kv, q, kk, v, out: k.alloc(row * nH * hd) };
      };
      const a = setup();
      for (const s of seqs) {
        if (s.t === 0) continue;
        const pos = Int32Array.from({ length: s.t }, (_, j) => s.start + j);
        const qs = k.view(a.q, s.row * qStride, (s.t - 1) * qStride + nH * hd);
        const ks = k.view(a.kk, s.row * kvDim, s.t * kvDim);
        k.rope(qs, pos, s.t, nH, hd, table, qStride);
        k.rope(ks, pos, s.t, nKV, hd, table, kvDim);
        k.kvWrite(a.kv, s.pageTable, s.start, ks, k.view(a.v, s.row * kvDim, s.t * kvDim), s.t, kvDim);
        k.attention(k.view(a.out, s.row * nH * hd, s.t * nH * hd), qs, qStride, a.kv, s.pageTable, s.start, s.t, dims);
      }
      const b = setup();
      const batch = k.stepBatch(seqs, table);
      const kvs = seqs.map(() => b.kv);
      k.ropeBatch(b.q, batch, nH, hd, qStride);
      k.ropeBatch(b.kk, batch, nKV, hd, kvDim);
      k.kvWriteBatch(kvs, batch, b.kk, b.v, kvDim);
      k.attentionBatch(b.out, b.q, qStride, kvs, batch, dims);
      same(b.q, a.q, 'roped q');
      same(b.kv.k, a.kv.k, 'cache k');
      same(b.kv.v, a.kv.v, 'cache v');
      same(b.out, a.out, 'attention');
      assert.throws(() => k.kvWriteBatch([b.kv], batch, b.kk, b.v, kvDim), /1 KV views for a batch of 4 sequences/);
    });

    test('attentionBatch with its inputs == attentionInputs then attentionBatch (gated and not), bit for bit', () => {
      const r = rng(13);
      const [nH, nKV, hd, ps] = [4, 2, 16, 4];
      const [qd, kvDim] = [nH * hd, nKV * hd];
      const table = plainRopeTable(1e6, 8);
      const dims = { numHeads: nH, numKvHeads: nKV, headDim: hd };
      const seqs = [{ row: 0, t: 1, start: 7 }, { row: 1, t: 3, start: 2 }].map((s, i) => ({ ...s, pageTable: Int32Array.from({ length: 3 }, (_, p) => 2 * p + i) }));
      const pool = 6 * ps * kvDim;
      const [qNorm, kNorm] = [weight(k, 'bf16', 1, hd, sym(r)), weight(k, 'bf16', 1, hd, sym(r))];
      for (const gated of [true, false]) {
        const init = [4 * qd * (gated ? 2 : 1), 4 * kvDim, 4 * kvDim, pool, pool].map((n) => Array.from({ length: n }, () => 2 * r() - 1));
        const runOnce = (together: boolean): Float32Array[] => {
          const [qg, kk, v, ck, cv] = init.map((a) => fill(k, a.length, (() => { let i = 0; return () => a[i++]!; })()));
          const kv: KvLayerView = { k: ck!, v: cv!, pageSize: ps };
          const [q, gate, out] = [gated ? k.alloc(4 * qd) : qg!, gated ? k.alloc(4 * qd) : null, k.alloc(4 * qd)];
          const batch = k.stepBatch(seqs, table);
          const a = { qg: qg!, gated, q, gate, k: kk!, v: v!, qNorm, kNorm, eps: 1e-6, kv: [kv, kv] };
          if (!together) k.attentionInputs(a, batch, dims);
          k.attentionBatch(out, q, qd, [kv, kv], batch, dims, together ? a : undefined);
          return [out, q, gate ?? q, kk!, ck!, cv!].map((x) => Float32Array.from(x));
        };
        const want = runOnce(false);
        runOnce(true).forEach((g, i) => same(g, want[i]!, `gated ${gated}: output ${i}`));
      }
    });

    test('argmax: exact, ties → lowest index, NaN ignored, -inf rows, strided rows, tails', () => {
      const r = rng(40);
      for (const n of [1, 3, 4, 7, 64, 1001]) {
        const m = 6;
        const stride = n + 5;
        const x = fill(k, m * stride, () => Math.round(8 * r()) / 4); // coarse grid: many ties
        x[0] = NaN; // row 0 starts with NaN
        for (let j = 0; j < n; j++) x[stride + j] = -Infinity; // row 1 all -inf
        for (let j = 0; j < n; j++) x[2 * stride + j] = NaN; // row 2 all NaN
        x[3 * stride + n - 1] = 9; // row 3: max in the last (tail) position
        const got = k.allocI32(m);
        const want = new Int32Array(m);
        k.argmax(got, x, m, n, stride);
        ref.argmax(want, x, m, n, stride);
        same(got, want, `n=${n}`);
        assert.equal(want[1], 0);
        assert.equal(want[2], 0);
        assert.equal(want[3], n - 1);
        // argmaxRows: the same ids, written at an offset of a kernel int32 tensor
        const rows = k.allocI32(m + 3);
        rows.fill(-7);
        k.argmaxRows(rows, 2, x, m, n, stride);
        same(rows.subarray(2, 2 + m), want, `argmaxRows n=${n}`);
        assert.deepEqual([rows[0], rows[1], rows[m + 2]], [-7, -7, -7], 'argmaxRows writes only its m ids');
        // argmaxRowsMasked: the ref's argmax over the rows with the clear ids set to −∞
        const words = Math.ceil(n / 32);
        const masks = Array.from({ length: m }, (_, i): Uint32Array | null => (i % 3 === 2 ? null
          : Uint32Array.from({ length: i % 3 === 1 ? Math.max(0, words - 1) : words }, () => (r() * 2 ** 32) >>> 0)));
        masks[0] = new Uint32Array(words); // every id masked: the first id (all −∞)
        const masked = new Int32Array(m);
        for (let i = 0; i < m; i++) {
          const row = x.slice(i * stride, i * stride + n);
          const mask = masks[i];
          if (mask) for (let j = 0; j < n; j++) if ((((mask[j >>> 5] ?? 0) >>> (j & 31)) & 1) === 0) row[j] = -Infinity;
          ref.argmax(masked.subarray(i, i + 1), row, 1, n);
        }
        const got2 = k.allocI32(m + 1);
        k.argmaxRowsMasked(got2, 1, x, m, n, stride, masks);
        same(got2.subarray(1), masked, `argmaxRowsMasked n=${n}`);
        assert.equal(masked[0], 0);
        // gatherPicked: each row's raw logit at its picked id (NaN and −∞ copied as they are)
        const vals = k.alloc(m + 1);
        vals.fill(-5);
        k.gatherPicked(vals, 1, x, got2.subarray(1), m, stride);
        same(vals.subarray(1), Float32Array.from(masked, (id, i) => x[i * stride + id]!), `gatherPicked n=${n}`);
        assert.equal(vals[0], -5, 'gatherPicked writes only its m values');
      }
    });

    test('topCandidates: the top c by (value desc, id asc) in id order == the sorted definition (ties, NaN, ±∞, ±0, n < c)', () => {
      for (const [n, c] of [[1, 4], [5, 8], [100, 16], [1031, 64], [3000, 7]] as const) {
        const m = 5;
        const { x, stride } = candidateRows(60 + n, m, n);
        const xs = fill(k, x.length, () => 0);
        xs.set(x);
        const ids = k.allocI32(m * c + 2);
        const vals = k.alloc(m * c + 2);
        ids.fill(-7);
        vals.fill(-7);
        k.topCandidates(ids, vals, 1, xs, m, n, stride, c);
        const want = bruteCandidates(x, m, n, stride, c);
        same(ids.subarray(1, 1 + m * c), want.ids, `ids n=${n} c=${c}`);
        same(vals.subarray(1, 1 + m * c), want.vals, `vals n=${n} c=${c}`);
        assert.deepEqual([ids[0], ids[m * c + 1], vals[0], vals[m * c + 1]], [-7, -7, -7, -7], 'writes only its m·c slots');
      }
    });

    test('moeRoute: exact ids (ties → lower id), weights, renormalised or not', () => {
      const r = rng(11);
      for (const [m, e, topK] of [[1, 8, 2], [5, 17, 3], [3, 64, 10]] as const) {
        const logits = fill(k, m * e, () => Math.round(8 * r()) / 2); // many ties
        for (const renorm of [true, false]) {
          const ids = k.allocI32(m * topK);
          const w = k.alloc(m * topK);
          const idsRef = new Int32Array(m * topK);
          const wRef = new Float32Array(m * topK);
          k.moeRoute(ids, w, logits, m, e, topK, renorm);
          ref.moeRoute(idsRef, wRef, logits, m, e, topK, renorm);
          same(ids, idsRef, 'ids');
          close(w, wRef, 1e-6, 'weights');
        }
      }
    });

    test('probeBandwidth: positive GB/s; allocations afterwards are still zero-filled', () => {
      const gbs = probeBandwidth(k, 8 << 20);
      assert.ok(Number.isFinite(gbs) && gbs > 0, `probe ${gbs}`);
      const a = k.alloc(1 << 20);
      for (let i = 0; i < a.length; i += 997) assert.equal(a[i], 0);
    });

    test('mulSilu, mulSigmoid, add (odd n, aliasing)', () => {
      const r = rng(12);
      const n = 1031;
      const a = fill(k, n, () => 10 * (2 * r() - 1));
      const b = fill(k, n, () => 10 * (2 * r() - 1));
      for (const op of ['mulSilu', 'mulSigmoid', 'add'] as const) {
        const out = k.alloc(n);
        const want = new Float32Array(n);
        k[op](out, a, b, n);
        ref[op](want, a, b, n);
        if (op === 'add') same(out, want, op);
        else close(out, want, 1e-6, op);
        const al = Float32Array.from(a);
        const alw = k.alloc(n);
        alw.set(a);
        k[op](alw, alw, b, n);
        same(alw, out, `${op} in place`);
        void al;
      }
    });
  });
}

/** Same weight contents in another backend's memory (row-major). */
function cloneWeight(k: Kernels, w: Weight): Weight {
  const { weight: c, bytes } = k.allocWeight(w.dtype, w.rows, w.cols);
  bytes.set(new Uint8Array(w.data.buffer, w.data.byteOffset, w.rows * w.cols * w.data.BYTES_PER_ELEMENT));
  return c;
}
