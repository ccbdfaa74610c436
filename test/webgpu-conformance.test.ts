// Conformance of the WGSL kernels (src/kernels/webgpu/) against the ref twin, on the
// machine's WebGPU adapter (lavapipe where there is no GPU). Error = max|Δ| / max|ref|.
// Bounds (and why):
//   exact   argmaxRowsMasked, embed and embedIds (float and quantized tables, whole and split), kvWrite, add, argmax, moeRoute ids,
//           quantized matmul on lavapipe (the integer arithmetic of ref/quant.ts: exact
//           integer sums, one f32 chain; 2e-6 on other adapters, whose f32 division for the
//           activation scale may differ by an ulp)
//   1e-6    rope (host f64 cos/sin rounded once), mulSilu, mulSigmoid, gdnGates,
//           moeRoute weights (f32 exp vs f64)
//   1e-5    float matmul, norms, causalConv, attention, gdnRecurrent (f32 accumulation
//           in a fixed order vs the ref's f64)
//   2e-5    gdnChunked vs the ref chunked form (f32 chunked algebra — T = (I+A)⁻¹ by rows —
//           vs the ref's f64 forward substitution)
// Batch invariance: a row alone == the same row inside a batch of 16, bit for bit.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { GdnDims, KvLayerView, Weight, WeightDType } from '../src/kernels/types.js';
import { createRefKernels } from '../src/kernels/ref/index.js';
import { plainRopeTable } from '../src/kernels/rope-table.js';
import { f32ToF16 } from '../src/kernels/quant/dequant.js';
import { quantizeRowsGgml as quantizeRows } from '../src/kernels/quant/quantize-ggml.js';
import { f16ToF32 } from '../src/kernels/quant/dequant.js';
import { QUANT_TYPES, type QuantType } from '../src/kernels/quant/formats.js';
import { ropeTable, type WebGpuKernels } from '../src/kernels/webgpu/backend.js';
import { randomWeight, relErr, rng } from './numeric.js';
import { randomScaleMatrix } from './quant-blocks.js';
import { gpuUnderTest, readI32, run } from './webgpu-helpers.js';
import { embedDeviceIds } from '../src/kernels/webgpu/embed-ids.js';
import { argmaxMaskedDispatch, gatherPickedOn } from '../src/kernels/webgpu/argmax-masked.js';
import { topCandidatesOn } from '../src/kernels/webgpu/top-candidates.js';
import { candidateRows } from './candidate-rows.js';
import { gpuRowBytes } from '../src/kernels/webgpu/weights.js';
import { view } from '../src/kernels/webgpu/tensor.js';
import { ACTS_FOLD_ROWS } from '../src/kernels/webgpu/wgsl/qmatmul-acts.js';

const ref = createRefKernels();
let g: WebGpuKernels;
before(async () => { g = await gpuUnderTest(); });
after(() => g?.dispose());

const sym = (r: () => number) => () => 2 * r() - 1;
const fill = (n: number, f: () => number) => Float32Array.from({ length: n }, f);

function close(got: ArrayLike<number>, want: ArrayLike<number>, tol: number, what: string, n?: number): void {
  const e = relErr(got, want, n);
  assert.ok(e <= tol, `${what}: rel err ${e} > ${tol}`);
}
function same(got: ArrayLike<number>, want: ArrayLike<number>, what: string, n = want.length): void {
  for (let i = 0; i < n; i++) if (!Object.is(got[i], want[i])) assert.fail(`${what}: [${i}] ${got[i]} !== ${want[i]}`);
}

/** A quantized [rows, cols] weight: random blocks with random f16 scales (every type), or
 * random f32 values through the GGML quantizer where there is one (q8_0, q4_k). */
function quantWeight(type: QuantType, rows: number, cols: number, r: () => number): Weight {
  const { weight, bytes } = ref.allocWeight(type, rows, cols);
  if (type === 'q8_0' || type === 'q4_k') quantizeRows(type, fill(rows * cols, sym(r)), rows, cols, bytes);
  else bytes.set(randomScaleMatrix(type, rows, cols, Math.floor(r() * 2 ** 31)));
  return weight;
}
function anyWeight(dtype: WeightDType, rows: number, cols: number, r: () => number): Weight {
  return dtype === 'bf16' || dtype === 'f32' || dtype === 'f16' ? randomWeight(ref, dtype, rows, cols, sym(r)) : quantWeight(dtype, rows, cols, r);
}

describe('webgpu kernel conformance', () => {
  test('adapter: limits from the adapter, features reported', () => {
    const a = g.adapter;
    assert.ok(a.limits.maxStorageBufferBindingSize >= 128 * 2 ** 20, 'binding limit');
    console.log(`# adapter: ${a.vendor} ${a.architecture} ${a.description} emu=${a.cpuEmulation} f16=${a.features.shaderF16} subgroups=${a.features.subgroups} ts=${a.features.timestamps}`);
  });

  test('matmul: float weights (f32, bf16), M 1..17, odd N and K', async () => {
    const r = rng(1);
    for (const dtype of ['f32', 'bf16'] as const) {
      for (const [n, k] of [[1, 1], [7, 3], [33, 100], [70, 257]] as const) {
        const w = randomWeight(ref, dtype, n, k, sym(r));
        const gw = g.uploadWeight(w);
        for (const m of [1, 3, 16, 17]) {
          const x = fill(m * k, sym(r));
          const want = new Float32Array(m * n);
          ref.matmul(want, x, w, m);
          const gx = g.alloc.upload(x);
          const out = g.alloc.tensor([m, n]);
          const [got] = await run(g, (e) => g.matmul(e, out, gx, gw, m), out);
          close(got, want, 1e-5, `${dtype} M=${m} N=${n} K=${k}`);
        }
      }
    }
  });

  test('f16 weights (GGUF F16): matmul and embed vs the ref on the same values as f32', async () => {
    const r = rng(16);
    const [n, k] = [21, 67];
    const bits = Uint16Array.from({ length: n * k }, () => f32ToF16(2 * r() - 1));
    const wr = ref.allocWeight('f32', n, k).weight;
    (wr.data as Float32Array).set(Array.from(bits, f16ToF32));
    const gw = g.uploadWeightBytes('f16', n, k, new Uint8Array(bits.buffer));
    for (const m of [1, 5]) {
      const x = fill(m * k, sym(r));
      const want = new Float32Array(m * n);
      ref.matmul(want, x, wr, m);
      const out = g.alloc.tensor([m, n]);
      const [got] = await run(g, (e) => g.matmul(e, out, g.alloc.upload(x), gw, m), out);
      close(got, want, 1e-5, `f16 M=${m}`);
    }
    const ids = Int32Array.from([3, 0, 20]);
    const want = new Float32Array(ids.length * k);
    ref.embed(want, wr, ids);
    const out = g.alloc.tensor([ids.length, k]);
    const [got] = await run(g, (e) => g.embed(e, out, gw, g.alloc.upload(ids), ids.length), out);
    same(got, want, 'f16 embed');
  });

  test('matmul: every quantized type equals the ref integer arithmetic; dot4I8Packed and its fallback agree bit for bit', async () => {
    const r = rng(2);
    const plain = await gpuUnderTest({ disable: ['dot4I8'] });
    try {
      for (const type of QUANT_TYPES) {
        const k = type.endsWith('_k') ? 512 : 96;
        const n = 19;
        const w = quantWeight(type, n, k, r);
        const gw = g.uploadWeight(w);
        const pw = plain.uploadWeight(w);
        for (const m of [1, 5, 17]) {
          const x = fill(m * k, () => 3 * (2 * r() - 1));
          const want = new Float32Array(m * n);
          ref.matmul(want, x, w, m);
          const out = g.alloc.tensor([m, n]);
          const [got] = await run(g, (e) => g.matmul(e, out, g.alloc.upload(x), gw, m), out);
          // lavapipe (LLVM: correctly rounded f32 division) reproduces the ref bit for bit;
          // other adapters may round the activation scale's division differently (≤ 2.5 ulp)
          if (g.adapter.cpuEmulation) same(got, want, `${type} M=${m}`);
          else close(got, want, 2e-6, `${type} M=${m}`);
          // the fallback is one WGSL function (quant.ts dot4Source) every quantized kernel calls:
          // every type's decode through it in the activation-quantizing kernel (M ≤ ACTS_FOLD_ROWS), the tiled
          // kernel (M = 17, 10–20 s a pipeline for lavapipe to compile) on the shipped GGUFs' types
          if (m > ACTS_FOLD_ROWS && type !== 'q8_0' && type !== 'q4_k') continue;
          const out2 = plain.alloc.tensor([m, n]);
          const [fallback] = await run(plain, (e) => plain.matmul(e, out2, plain.alloc.upload(x), pw, m), out2);
          same(fallback, got, `${type} M=${m}: fallback without dot4I8Packed`);
        }
      }
    } finally {
      plain.dispose();
    }
  });

  test('batch invariance: a row alone == the same row in a batch of 16 (bit-exact), float and quantized', async () => {
    const r = rng(3);
    for (const dtype of ['bf16', 'f32', 'q8_0', 'q4_k', 'q6_k'] as const) {
      const k = 256;
      const n = 37;
      const w = g.uploadWeight(anyWeight(dtype, n, k, r));
      const x = fill(16 * k, sym(r));
      const batch = g.alloc.tensor([16, n]);
      const [all] = await run(g, (e) => g.matmul(e, batch, g.alloc.upload(x), w, 16), batch);
      for (const row of [0, 9, 15]) {
        const one = g.alloc.tensor([1, n]);
        const [alone] = await run(g, (e) => g.matmul(e, one, g.alloc.upload(x.subarray(row * k, (row + 1) * k)), w, 1), one);
        same(alone, all.subarray(row * n, (row + 1) * n), `${dtype} row ${row}`);
      }
    }
  });

  test('float matmul: the subgroup reduction and the shared-memory fallback agree; both batch-invariant', async () => {
    const r = rng(17);
    const plain = await gpuUnderTest({ disable: ['subgroups'] });
    try {
      const [n, k] = [29, 300];
      const w = randomWeight(ref, 'bf16', n, k, sym(r));
      const [gw, pw] = [g.uploadWeight(w), plain.uploadWeight(w)];
      const x = fill(16 * k, sym(r));
      const want = new Float32Array(16 * n);
      ref.matmul(want, x, w, 16);
      for (const [kk, ww] of [[g, gw], [plain, pw]] as const) {
        const out = kk.alloc.tensor([16, n]);
        const one = kk.alloc.tensor([1, n]);
        const [all, alone] = await run(kk, (e) => { kk.matmul(e, out, kk.alloc.upload(x), ww, 16); kk.matmul(e, one, kk.alloc.upload(x.subarray(5 * k, 6 * k)), ww, 1); }, out, one);
        close(all, want, 1e-5, `subgroups=${kk.adapter.features.subgroups}`);
        same(alone, all.subarray(5 * n, 6 * n), `row 5 alone, subgroups=${kk.adapter.features.subgroups}`);
      }
    } finally {
      plain.dispose();
    }
  });

  test('weights larger than the binding limit are split by rows: same bits as unsplit', async () => {
    const r = rng(4);
    const small = await gpuUnderTest({ maxBindingOverride: 4096 });
    try {
      for (const dtype of ['bf16', 'q8_0', 'q6_k'] as const) {
        const k = 256;
        const n = 45;
        const w = anyWeight(dtype, n, k, r);
        const whole = g.uploadWeight(w);
        const split = small.uploadWeight(w);
        assert.ok(split.parts.length > 1, `${dtype}: ${split.parts.length} part(s)`);
        const x = fill(3 * k, sym(r));
        const o1 = g.alloc.tensor([3, n]);
        const o2 = small.alloc.tensor([3, n]);
        const [a] = await run(g, (e) => g.matmul(e, o1, g.alloc.upload(x), whole, 3), o1);
        const [b] = await run(small, (e) => small.matmul(e, o2, small.alloc.upload(x), split, 3), o2);
        same(b, a, `${dtype} split`);
      }
    } finally {
      small.dispose();
    }
  });

  test('embed: exact for float tables and every quantized type', async () => {
    const r = rng(5);
    const ids = Int32Array.from([0, 13, 7, 7, 2]);
    for (const dtype of ['f32', 'bf16', ...QUANT_TYPES] as const) {
      const d = dtype.endsWith('_k') ? 256 : dtype === 'f32' || dtype === 'bf16' ? 37 : 64;
      const w = anyWeight(dtype, 14, d, r);
      const want = new Float32Array(ids.length * d);
      ref.embed(want, w, ids);
      const out = g.alloc.tensor([ids.length, d]);
      const [got] = await run(g, (e) => g.embed(e, out, g.uploadWeight(w), g.alloc.upload(ids), ids.length), out);
      same(got, want, `embed ${dtype}`);
    }
  });

  test('argmaxRowsMasked: the ref argmax over rows with the masked ids at −∞ (ties, NaN, all masked, short masks)', async () => {
    const r = rng(52);
    for (const n of [1, 31, 33, 100, 1031]) {
      const m = 7;
      const stride = n + 3;
      const x = Float32Array.from({ length: m * stride }, () => Math.round(8 * r()) / 4); // coarse grid: many ties
      for (let j = 0; j < n; j++) x[2 * stride + j] = NaN; // row 2 all NaN
      x[3 * stride] = NaN;
      const words = Math.ceil(n / 32);
      const masks = Array.from({ length: m }, (_, i): Uint32Array | null => (i === 4 ? null
        : Uint32Array.from({ length: i === 5 ? Math.max(0, words - 1) : words }, () => (r() * 2 ** 32) >>> 0)));
      masks[1] = new Uint32Array(words);
      const want = new Int32Array(m);
      ref.argmaxRowsMasked(want, 0, x, m, n, stride, masks);
      const out = g.alloc.tensor([m], 'i32');
      const gx = g.alloc.upload(x);
      await run(g, (e) => argmaxMaskedDispatch(g, e, out, gx, m, n, stride, (w) => g.alloc.upload(new Int32Array(w.buffer, w.byteOffset, w.length)), masks));
      same(await readI32(g, out), want, `argmaxRowsMasked n=${n}`);
      // gatherPicked: each row's logit at the picked id, read on the device, in one dispatch
      const vals = g.alloc.tensor([m + 1]);
      let dispatches = -1;
      const [got] = await run(g, (e) => { gatherPickedOn(g, e, { out: vals, outOffset: 1, x: gx, ids: out, m, stride }); dispatches = e.dispatchCount; }, vals);
      same(got!.subarray(1), Float32Array.from(want, (id, i) => x[i * stride + id]!), `gatherPicked n=${n}`);
      assert.equal(dispatches, 1, 'gatherPicked: one dispatch for all rows');
    }
  });

  test('topCandidates: the ref sets bit for bit (ties, NaN, ±∞, ±0, n < c, n past one thread chunk)', async () => {
    for (const [n, c] of [[1, 4], [5, 8], [100, 16], [1031, 64], [3000, 7], [70000, 64]] as const) {
      const m = 5;
      const { x, stride } = candidateRows(60 + n, m, n);
      const want = { ids: new Int32Array(m * c), vals: new Float32Array(m * c) };
      ref.topCandidates(want.ids, want.vals, 0, x, m, n, stride, c);
      const ids = g.alloc.tensor([m * c + 1], 'i32');
      const vals = g.alloc.tensor([m * c + 1]);
      const gx = g.alloc.upload(x);
      const [gotVals] = await run(g, (e) => topCandidatesOn(g, e, { ids, vals, outOffset: 1, x: gx, m, n, stride, c }), vals);
      same((await readI32(g, ids)).subarray(1), want.ids, `ids n=${n} c=${c}`);
      same(gotVals!.subarray(1), want.vals, `vals n=${n} c=${c}`);
    }
  });

  test('gatherPicked: one dispatch for more rows than a workgroup, ids at an offset, the value at its offset, nothing else written', async () => {
    const r = rng(53);
    const m = 150;
    const stride = 37;
    const x = Float32Array.from({ length: m * stride }, () => 2 * r() - 1);
    x[5 * stride + 3] = NaN;
    x[9 * stride] = -Infinity;
    const ids = Int32Array.from({ length: m + 2 }, () => Math.floor(r() * stride));
    ids[5 + 2] = 3;
    ids[9 + 2] = 0;
    const gIds = view(g.alloc.upload(ids), 2, m);
    const vals = g.alloc.upload(new Float32Array(m + 4).fill(-7));
    let dispatches = -1;
    const [got] = await run(g, (e) => { gatherPickedOn(g, e, { out: vals, outOffset: 3, x: g.alloc.upload(x), ids: gIds, m, stride }); dispatches = e.dispatchCount; }, vals);
    const want = new Float32Array(m + 4).fill(-7);
    ref.gatherPicked(want, 3, x, ids.subarray(2), m, stride);
    same(got!, want, 'gatherPicked m=150');
    assert.equal(dispatches, 1, 'gatherPicked: one dispatch for all rows');
  });

  test('embedIds (ids on the device, at an offset): exact, tables whole and split in 4 row parts', async () => {
    const r = rng(51);
    const all = Int32Array.from([-9, 13, 0, 7, 7, 2, 5, 9, 12]); // [0] is not read: the ids start at 1
    const ids = all.subarray(1);
    for (const dtype of ['f32', 'bf16', ...QUANT_TYPES] as const) {
      const d = dtype.endsWith('_k') ? 256 : dtype === 'f32' || dtype === 'bf16' ? 37 : 64;
      const w = anyWeight(dtype, 14, d, r);
      const want = new Float32Array(ids.length * d);
      ref.embed(want, w, ids);
      const split = await gpuUnderTest({ maxBindingOverride: 4 * gpuRowBytes(dtype, d) });
      try {
        for (const [what, k] of [['whole', g], ['split', split]] as const) {
          const gw = k.uploadWeight(w);
          assert.equal(gw.parts.length, what === 'whole' ? 1 : 4, `${dtype} ${what}: parts`);
          const out = k.alloc.tensor([ids.length, d]);
          const idv = k.alloc.upload(all);
          const [got] = await run(k, (e) => embedDeviceIds(k, e, out, gw, view(idv, 1, ids.length), ids.length), out);
          same(got, want, `embedIds ${dtype} ${what}`);
        }
      } finally {
        split.dispose();
      }
    }
  });

  test('rmsNorm (zero-centred, plain), gatedRmsNorm, in place', async () => {
    const r = rng(6);
    for (const d of [1, 7, 64, 101]) {
      const w = randomWeight(ref, 'bf16', 1, d, sym(r));
      const wv = g.uploadVector(w);
      const m = 5;
      for (const zc of [true, false]) {
        const x = fill(m * d, () => 3 * (2 * r() - 1));
        const want = new Float32Array(m * d);
        ref.rmsNorm(want, x, w, m, 1e-6, zc);
        const gx = g.alloc.upload(x);
        const out = g.alloc.tensor([m, d]);
        const [got, inPlace] = await run(g, (e) => { g.rmsNorm(e, out, gx, wv, m, 1e-6, zc); g.rmsNorm(e, gx, gx, wv, m, 1e-6, zc); }, out, gx);
        close(got, want, 1e-5, `rmsNorm d=${d} zc=${zc}`);
        same(inPlace, got, 'in place');
      }
      const o = fill(m * d, sym(r));
      const z = fill(m * d, () => 4 * (2 * r() - 1));
      const want = new Float32Array(m * d);
      ref.gatedRmsNorm(want, o, z, w, m, 1e-6);
      const out = g.alloc.tensor([m, d]);
      const [got] = await run(g, (e) => g.gatedRmsNorm(e, out, g.alloc.upload(o), g.alloc.upload(z), wv, m, 1e-6), out);
      close(got, want, 1e-5, `gatedRmsNorm d=${d}`);
    }
  });

  test('rope: partial rotary, strided rows, large positions', async () => {
    const r = rng(7);
    for (const [heads, hd, rot] of [[4, 16, 4], [2, 64, 16], [3, 10, 10]] as const) {
      const t = 5;
      const stride = heads * hd + 6;
      const pos = [0, 1, 17, 4095, 100000];
      const x = fill(t * stride, sym(r));
      const want = Float32Array.from(x);
      ref.rope(want, pos, t, heads, hd, plainRopeTable(1e7, rot), stride);
      const gx = g.alloc.upload(x);
      const cs = g.alloc.upload(ropeTable(pos, t, rot, 1e7));
      const [got] = await run(g, (e) => g.rope(e, gx, cs, t, heads, hd, rot, stride), gx);
      close(got, want, 1e-6, `rope h=${heads} hd=${hd} rot=${rot}`);
    }
  });

  test('causalConv: window update and per-step scratch', async () => {
    const r = rng(8);
    for (const [t, c, kw] of [[1, 37, 4], [5, 37, 3], [9, 70, 4]] as const) {
      const w = randomWeight(ref, 'bf16', c, kw, sym(r));
      const x = fill(t * c, sym(r));
      const win0 = fill((kw - 1) * c, sym(r));
      const winRef = Float32Array.from(win0);
      const want = new Float32Array(t * c);
      ref.causalConv(want, x, winRef, w, t);
      const scRef = new Float32Array(t * (kw - 1) * c);
      ref.causalConv(new Float32Array(t * c), x, Float32Array.from(win0), w, t, scRef);
      const wc = g.uploadVector(w);
      const gx = g.alloc.upload(x);
      const win = g.alloc.upload(win0);
      const win2 = g.alloc.upload(win0);
      const out = g.alloc.tensor([t, c]);
      const out2 = g.alloc.tensor([t, c]);
      const sc = g.alloc.tensor([t, kw - 1, c]);
      const [o1, w1, o2, w2, s2] = await run(g, (e) => {
        g.causalConv(e, out, gx, win, wc, c, t);
        g.causalConv(e, out2, gx, win2, wc, c, t, sc);
      }, out, win, out2, win2, sc);
      close(o1, want, 1e-5, `conv T=${t} C=${c}`);
      same(w1, winRef, 'window update');
      same(o2, o1, 'scratch vs no scratch');
      same(w2, win0, 'window read only with scratch');
      same(s2, scRef, 'scratch windows');
    }
  });

  test('gdnGates', async () => {
    const r = rng(9);
    const hv = 5;
    const t = 7;
    const aLog = randomWeight(ref, 'f32', 1, hv, sym(r));
    const dt = randomWeight(ref, 'bf16', 1, hv, sym(r));
    const a = fill(t * hv, () => 30 * (2 * r() - 1));
    const b = fill(t * hv, () => 8 * (2 * r() - 1));
    const gw = new Float32Array(t * hv);
    const bw = new Float32Array(t * hv);
    ref.gdnGates(gw, bw, a, b, aLog, dt, t);
    const gg = g.alloc.tensor([t, hv]);
    const gb = g.alloc.tensor([t, hv]);
    const [go, bo] = await run(g, (e) => g.gdnGates(e, gg, gb, g.alloc.upload(a), g.alloc.upload(b), g.uploadVector(aLog), g.uploadVector(dt), t), gg, gb);
    close(go, gw, 1e-6, 'g');
    close(bo, bw, 1e-6, 'beta');
  });

  const gdnCases: [GdnDims, number[]][] = [
    [{ numKeyHeads: 2, numValueHeads: 4, keyDim: 16, valueDim: 12 }, [1, 3, 7]],
    [{ numKeyHeads: 1, numValueHeads: 3, keyDim: 7, valueDim: 70 }, [1, 4]],
  ];
  function gdnInputs(r: () => number, dims: GdnDims, t: number) {
    const width = 2 * dims.numKeyHeads * dims.keyDim + dims.numValueHeads * dims.valueDim;
    const hv = dims.numValueHeads;
    return {
      qkv: fill(t * width, sym(r)),
      gate: fill(t * hv, () => -0.01 - 2 * r()),
      beta: fill(t * hv, () => 0.05 + 0.9 * r()),
      state: fill(hv * dims.keyDim * dims.valueDim, () => 0.5 * (2 * r() - 1)),
    };
  }

  test('gdnRecurrent: outputs, in-place state, per-step scratch', async () => {
    const r = rng(10);
    for (const [dims, ts] of gdnCases) {
      for (const t of ts) {
        const { qkv, gate, beta, state } = gdnInputs(r, dims, t);
        const ov = t * dims.numValueHeads * dims.valueDim;
        const want = new Float32Array(ov);
        const sRef = Float32Array.from(state);
        ref.gdnRecurrent(want, qkv, gate, beta, sRef, dims, t);
        const scRef = new Float32Array(t * state.length);
        ref.gdnRecurrent(new Float32Array(ov), qkv, gate, beta, Float32Array.from(state), dims, t, scRef);
        const [gq, gg, gb] = [g.alloc.upload(qkv), g.alloc.upload(gate), g.alloc.upload(beta)];
        const st = g.alloc.upload(state);
        const st2 = g.alloc.upload(state);
        const out = g.alloc.tensor([ov]);
        const out2 = g.alloc.tensor([ov]);
        const sc = g.alloc.tensor([t * state.length]);
        const [o1, s1, o2, s2, scr] = await run(g, (e) => {
          g.gdnRecurrent(e, out, gq, gg, gb, st, dims, t);
          g.gdnRecurrent(e, out2, gq, gg, gb, st2, dims, t, sc);
        }, out, st, out2, st2, sc);
        close(o1, want, 1e-5, `out T=${t} dk=${dims.keyDim}`);
        close(s1, sRef, 1e-5, `state T=${t}`);
        same(o2, o1, 'scratch vs in place');
        same(s2, state, 'state read only with scratch');
        close(scr, scRef, 1e-5, 'scratch states');
        same(scr.subarray((t - 1) * state.length), s1, 'last scratch state == in-place state');
      }
    }
  });

  test('gdnChunked: vs the ref chunked form; split at a 64-multiple == one call (bit-exact)', async () => {
    const r = rng(11);
    const small: GdnDims = { numKeyHeads: 2, numValueHeads: 4, keyDim: 16, valueDim: 12 };
    const wide: GdnDims = { numKeyHeads: 1, numValueHeads: 2, keyDim: 32, valueDim: 70 }; // 2 column blocks
    for (const [dims, t, pos0] of [[small, 5, 0], [small, 70, 37], [small, 130, 0], [wide, 70, 10]] as const) {
      const { qkv, gate, beta, state } = gdnInputs(r, dims, t);
      const sRef = Float32Array.from(state);
      const want = new Float32Array(t * dims.numValueHeads * dims.valueDim);
      ref.gdnChunked(want, qkv, gate, beta, sRef, dims, t, pos0);
      const st = g.alloc.upload(state);
      const out = g.alloc.tensor([want.length]);
      const [o, s] = await run(g, (e) => g.gdnChunked(e, out, g.alloc.upload(qkv), g.alloc.upload(gate), g.alloc.upload(beta), st, dims, t, pos0), out, st);
      close(o, want, 2e-5, `chunked out T=${t} pos0=${pos0}`);
      close(s, sRef, 2e-5, `chunked state T=${t} pos0=${pos0}`);
      // the same tokens in two calls split at the next 64-multiple: the same bits
      const cut = 64 - (pos0 % 64);
      if (cut >= t) continue;
      const width = qkv.length / t;
      const st2 = g.alloc.upload(state);
      const out2 = g.alloc.tensor([want.length]);
      const [gq, gg, gb] = [g.alloc.upload(qkv), g.alloc.upload(gate), g.alloc.upload(beta)];
      const hv = dims.numValueHeads;
      const ov = hv * dims.valueDim;
      const [o2, s2] = await run(g, (e) => {
        g.gdnChunked(e, out2, gq, gg, gb, st2, dims, cut, pos0);
        const rest = t - cut;
        const sub = (x: typeof gq, w: number) => ({ ...x, offset: cut * w, length: rest * w });
        const g2 = g.alloc.upload(gate.subarray(cut * hv));
        const b2 = g.alloc.upload(beta.subarray(cut * hv));
        g.gdnChunked(e, sub(out2, ov), sub(gq, width), g2, b2, st2, dims, rest, pos0 + cut);
      }, out2, st2);
      same(o2, o, `split at ${cut}: outputs`);
      same(s2, s, `split at ${cut}: state`);
    }
  });

  test('kvWrite + attention (prefill and decode) over a shuffled page table, GQA', async () => {
    const r = rng(12);
    for (const [nH, nKV, hd, start, t] of [[4, 2, 8, 0, 1], [4, 2, 13, 5, 3], [6, 3, 16, 13, 6], [4, 1, 16, 100, 1]] as const) {
      const ps = 4;
      const pages = Math.ceil((start + t) / ps) + 1;
      const kvDim = nKV * hd;
      const pageTable = Int32Array.from({ length: pages }, (_, i) => i);
      for (let i = pages - 1; i > 0; i--) {
        const j = Math.floor(r() * (i + 1));
        [pageTable[i], pageTable[j]] = [pageTable[j]!, pageTable[i]!];
      }
      const refKv: KvLayerView = { k: new Float32Array(pages * ps * kvDim), v: new Float32Array(pages * ps * kvDim), pageSize: ps };
      const hk = fill((start + t) * kvDim, sym(r));
      const hv = fill((start + t) * kvDim, sym(r));
      ref.kvWrite(refKv, pageTable, 0, hk, hv, start + t, kvDim);
      const qStride = nH * hd + 3;
      const q = fill(t * qStride, () => 2 * (2 * r() - 1));
      const dims = { numHeads: nH, numKvHeads: nKV, headDim: hd };
      const want = new Float32Array(t * nH * hd);
      ref.attention(want, q, qStride, refKv, pageTable, start, t, dims);
      const kv = { k: g.alloc.tensor([refKv.k.length]), v: g.alloc.tensor([refKv.v.length]), pageSize: ps };
      const pt = g.alloc.upload(pageTable);
      const out = g.alloc.tensor([want.length]);
      const gq = g.alloc.upload(q);
      const [kc, vc, o] = await run(g, (e) => {
        g.kvWrite(e, kv, pt, 0, g.alloc.upload(hk), g.alloc.upload(hv), start + t, kvDim);
        g.attention(e, out, gq, qStride, kv, pt, start, t, dims);
      }, kv.k, kv.v, out);
      same(kc, refKv.k, 'kv k');
      same(vc, refKv.v, 'kv v');
      close(o, want, 1e-5, `attention nH=${nH} hd=${hd} start=${start} T=${t}`);
      // decode of the last query alone == its row of the prefill (position-only dependence)
      const last = g.alloc.tensor([nH * hd]);
      const q1 = g.alloc.upload(q.subarray((t - 1) * qStride));
      const [o1] = await run(g, (e) => g.attention(e, last, q1, qStride, kv, pt, start + t - 1, 1, dims), last);
      same(o1, o.subarray((t - 1) * nH * hd), 'decode == last prefill row');
    }
  });

  test('argmax: exact, ties → lowest index, NaN ignored, -inf and NaN rows, strided', async () => {
    const r = rng(13);
    for (const n of [1, 3, 64, 1001]) {
      const m = 6;
      const stride = n + 5;
      const x = fill(m * stride, () => Math.round(8 * r()) / 4);
      x[0] = NaN;
      for (let j = 0; j < n; j++) x[stride + j] = -Infinity;
      for (let j = 0; j < n; j++) x[2 * stride + j] = NaN;
      x[3 * stride + n - 1] = 9;
      const want = new Int32Array(m);
      ref.argmax(want, x, m, n, stride);
      const out = g.alloc.tensor([m], 'i32');
      const enc = g.encoder();
      g.argmax(enc, out, g.alloc.upload(x), m, n, stride);
      await enc.submit();
      same(await readI32(g, out), want, `n=${n}`);
      // at an offset of the ids tensor (the runner's and drafter's picks): only those m ids
      const at = g.alloc.upload(new Int32Array(m + 3).fill(-7));
      const enc2 = g.encoder();
      g.argmax(enc2, { ...at, offset: at.offset + 2, length: m }, g.alloc.upload(x), m, n, stride);
      await enc2.submit();
      same(await readI32(g, at), Int32Array.from([-7, -7, ...want, -7]), `n=${n} at offset 2`);
    }
  });

  test('moeRoute: exact ids (ties → lower id), weights, renormalised or not', async () => {
    const r = rng(14);
    for (const [m, e, topK] of [[1, 8, 2], [5, 17, 3], [3, 64, 10]] as const) {
      const logits = fill(m * e, () => Math.round(8 * r()) / 2);
      for (const renorm of [true, false]) {
        const idsRef = new Int32Array(m * topK);
        const wRef = new Float32Array(m * topK);
        ref.moeRoute(idsRef, wRef, logits, m, e, topK, renorm);
        const ids = g.alloc.tensor([m, topK], 'i32');
        const w = g.alloc.tensor([m, topK]);
        const [wo] = await run(g, (enc) => g.moeRoute(enc, ids, w, g.alloc.upload(logits), m, e, topK, renorm), w);
        same(await readI32(g, ids), idsRef, 'ids');
        close(wo, wRef, 1e-6, 'weights');
      }
    }
  });

  test('mulSilu, mulSigmoid, add (odd n, aliasing)', async () => {
    const r = rng(15);
    const n = 1031;
    const a = fill(n, () => 10 * (2 * r() - 1));
    const b = fill(n, () => 10 * (2 * r() - 1));
    for (const op of ['mulSilu', 'mulSigmoid', 'add'] as const) {
      const want = new Float32Array(n);
      ref[op](want, a, b, n);
      const ga = g.alloc.upload(a);
      const out = g.alloc.tensor([n]);
      const [o, inPlace] = await run(g, (e) => { g[op](e, out, ga, g.alloc.upload(b), n); g[op](e, ga, ga, g.alloc.upload(b), n); }, out, ga);
      if (op === 'add') same(o, want, op);
      else close(o, want, 1e-6, op);
      same(inPlace, o, `${op} in place`);
    }
  });
});

