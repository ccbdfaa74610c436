// The step's batch on webgpu (kernels/webgpu/batch.ts): RoPE, the KV write and attention of
// every sequence in one dispatch each, reading the table uploaded once by stepBatch, give
// the same bits as the per-sequence calls (rope, kvWrite, attention) — sequences of
// t = 0, 1, 3, 5 at different starts over one shared paged cache, and each over a cache of
// its own (one dispatch per sequence). Also the dispatch count: one per call.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { BatchSeq, KvLayerView } from '../src/kernels/types.js';
import { plainRopeTable } from '../src/kernels/rope-table.js';
import { WebGpuBoundaryKernels } from '../src/kernels/webgpu/kernels.js';
import type { GpuTensor } from '../src/kernels/webgpu/tensor.js';
import { rng } from './numeric.js';
import { gpuUnderTest } from './webgpu-helpers.js';
import { sameBits } from './engine-helpers.js';
import { convSeqsByCalls, gdnSeqsByCalls } from '../src/kernels/seqs-by-calls.js';
import { attentionInputsByCalls } from '../src/kernels/batch-by-calls.js';
import { randomWeight } from './numeric.js';
import { createRefKernels } from '../src/kernels/ref/index.js';
import { quantizeRowsGgml } from '../src/kernels/quant/quantize-ggml.js';

let k: WebGpuBoundaryKernels;
// the cpu launch profile whatever DELTASERVE_LAUNCHES says: the dispatch counts below are its
// (a GPU's folds and launches and their counts: the fold and launch suites, webgpu-*-fold, -columns)
before(async () => { k = new WebGpuBoundaryKernels(await gpuUnderTest({ launches: 'cpu' })); });
after(() => k?.dispose());

const [nH, nKV, hd, ps] = [4, 2, 16, 4];
const kvDim = nKV * hd;
const qd = nH * hd;
const rope = plainRopeTable(1e6, 8);
const dims = { numHeads: nH, numKvHeads: nKV, headDim: hd };
const SEQS = [{ t: 3, start: 9 }, { t: 0, start: 4 }, { t: 1, start: 17 }, { t: 5, start: 0 }];
const PAGES_PER = 7;

interface Case { seqs: BatchSeq[]; rows: number; q: Float32Array; kk: Float32Array; v: Float32Array; hist: Float32Array[] }

function makeCase(spec: readonly { t: number; start: number }[] = SEQS): Case {
  const r = rng(77);
  let row = 0;
  // page tables interleave the sequences' pages over one pool, shuffled within a sequence
  const seqs = spec.map((s, i) => {
    const pageTable = Array.from({ length: PAGES_PER }, (_, p) => ((p * 3) % PAGES_PER) * spec.length + i);
    const b = { row, t: s.t, start: s.start, pageTable };
    row += s.t;
    return b;
  });
  const sym = (n: number) => Float32Array.from({ length: n }, () => 2 * r() - 1);
  return { seqs, rows: row, q: sym(row * qd), kk: sym(row * kvDim), v: sym(row * kvDim), hist: [sym(PAGES_PER * spec.length * ps * kvDim), sym(PAGES_PER * spec.length * ps * kvDim)] };
}

function cacheOf(c: Case): KvLayerView<GpuTensor> {
  const n = c.hist[0]!.length;
  const t = k.alloc(2 * n);
  k.write(t, 0, c.hist[0]!);
  k.write(t, n, c.hist[1]!);
  return { k: k.view(t, 0, n), v: k.view(t, n, n), pageSize: ps };
}

function upload(a: Float32Array): GpuTensor {
  const t = k.alloc(a.length);
  k.write(t, 0, a);
  return t;
}

async function readAll(...ts: GpuTensor[]): Promise<Float32Array[]> {
  return await k.readBack(ts.map((t) => ({ t, offset: 0, length: t.length })));
}

/** The per-sequence calls: the definition of the batched ones. */
async function perSequence(c: Case, caches: KvLayerView<GpuTensor>[]): Promise<Float32Array[]> {
  const [q, kk, v, out] = [upload(c.q), upload(c.kk), upload(c.v), k.alloc(c.rows * qd)];
  c.seqs.forEach((s, i) => {
    if (s.t === 0) return;
    const pos = Array.from({ length: s.t }, (_, j) => s.start + j);
    const rows = (t: GpuTensor, w: number) => k.view(t, s.row * w, s.t * w);
    k.rope(rows(q, qd), pos, s.t, nH, hd, rope, qd);
    k.rope(rows(kk, kvDim), pos, s.t, nKV, hd, rope, kvDim);
    k.kvWrite(caches[i]!, s.pageTable, s.start, rows(kk, kvDim), rows(v, kvDim), s.t, kvDim);
    k.attention(rows(out, qd), rows(q, qd), qd, caches[i]!, s.pageTable, s.start, s.t, dims);
  });
  return readAll(q, kk, out, ...caches.filter((x, i) => caches.indexOf(x) === i).flatMap((x) => [x.k, x.v]));
}

async function batched(c: Case, caches: KvLayerView<GpuTensor>[]): Promise<{ got: Float32Array[]; dispatches: number }> {
  const [q, kk, v, out] = [upload(c.q), upload(c.kk), upload(c.v), k.alloc(c.rows * qd)];
  await readAll(q); // uploads land first: count only the batch's dispatches
  const d0 = k.recordedDispatches;
  const b = k.stepBatch(c.seqs, rope);
  k.ropeBatch(q, b, nH, hd, qd);
  k.ropeBatch(kk, b, nKV, hd, kvDim);
  k.kvWriteBatch(caches, b, kk, v, kvDim);
  k.attentionBatch(out, q, qd, caches, b, dims);
  const dispatches = k.recordedDispatches - d0;
  const got = await readAll(q, kk, out, ...caches.filter((x, i) => caches.indexOf(x) === i).flatMap((x) => [x.k, x.v]));
  return { got, dispatches };
}

describe('webgpu step batch', () => {
  test('one shared cache: ropeBatch, kvWriteBatch, attentionBatch == per-sequence calls, bit for bit, one dispatch each', async () => {
    const c = makeCase();
    const want = await perSequence(c, Array(c.seqs.length).fill(cacheOf(c)));
    const shared = cacheOf(c);
    const { got, dispatches } = await batched(c, Array(c.seqs.length).fill(shared));
    assert.equal(dispatches, 4, 'rope q, rope k, kv write, attention');
    ['q', 'k', 'out', 'cache k', 'cache v'].forEach((name, i) => assert.ok(sameBits(got[i]!, want[i]!), `${name} differs`));
  });

  test('a cache per sequence: the same bits (one dispatch per sequence with rows)', async () => {
    const c = makeCase();
    const want = await perSequence(c, c.seqs.map(() => cacheOf(c)));
    const { got, dispatches } = await batched(c, c.seqs.map(() => cacheOf(c)));
    assert.equal(dispatches, 2 + 2 * c.seqs.filter((s) => s.t > 0).length);
    assert.equal(got.length, want.length);
    got.forEach((g, i) => assert.ok(sameBits(g, want[i]!), `output ${i} differs`));
  });

  test('attention reads each KV row once per KV head and query block: decode and verify rows at the ideal, a 13-row prefill in one tile; == per-sequence calls', async () => {
    // G = 2 query heads per KV head: grouped blocks of 8 rows, tiles of 64 (head dim 16);
    // 1 + 4 + 13 rows at starts 20, 9, 2
    const c = makeCase([{ t: 1, start: 20 }, { t: 4, start: 9 }, { t: 13, start: 2 }]);
    const want = await perSequence(c, Array(c.seqs.length).fill(cacheOf(c)));
    const shared = cacheOf(c);
    const t0 = { ...k.g.traffic };
    const { got } = await batched(c, Array(c.seqs.length).fill(shared));
    ['q', 'k', 'out', 'cache k', 'cache v'].forEach((name, i) => assert.ok(sameBits(got[i]!, want[i]!), `${name} differs`));
    const row = 2 * 4 * kvDim; // K and V bytes of one cached position, all KV heads
    const read = k.g.traffic.kvBytesRead - t0.kvBytesRead;
    const ideal = k.g.traffic.kvBytesIdeal - t0.kvBytesIdeal;
    assert.equal(ideal, row * (21 + 13 + 15));
    // the 13 rows: one tile (positions 0..14), where blocks of 8 read 0..9 and 0..14
    assert.equal(read, row * (21 + 13 + 15), 'decode, verify and the prefill once');
  });

  test('grouped attention past 64 positions (contexts 1, 63, 64, 65, 200, 700; decode and prefill rows; pages of 16) == the per-(head, row) kernel bit for bit, decode KV read once', async () => {
    // the grouped kernel keeps each query's chains of the per-(head, row) kernel (score Σ_d in
    // order, the same 64-wide trees, output Σ_p in order), so the bits must be equal; head
    // dims 16 and 256 (threads take two output elements), groups of 2 and 4 query heads
    const spec = [{ t: 1, start: 0 }, { t: 1, start: 62 }, { t: 1, start: 63 }, { t: 1, start: 64 }, { t: 1, start: 199 }, { t: 1, start: 699 },
      { t: 13, start: 55 }, { t: 0, start: 30 }, { t: 9, start: 120 }, { t: 20, start: 680 }];
    for (const d of [{ numHeads: 4, numKvHeads: 2, headDim: 16 }, { numHeads: 8, numKvHeads: 2, headDim: 256 }]) {
      const { want, got, decode } = await groupedVsRows(d, 16, spec);
      got.forEach((g, i) => assert.ok(sameBits(g, want[i]!), `heads ${d.numHeads}/${d.numKvHeads} × ${d.headDim}: sequence ${i} (${JSON.stringify(spec[i])}) differs`));
      // decode rows read their context once per KV head: the ideal
      assert.equal(decode.read / decode.ideal, 1, `heads ${d.numHeads}/${d.numKvHeads}: decode KV read ÷ ideal`);
    }
  });

  test('causalConvSeqs and gdnRecurrentSeqs: one dispatch each == one call per sequence (t = 1, 0, 3, 2; scratch or not), bit for bit', async () => {
    const r = rng(5);
    const [hk, hv, dk, dv, taps] = [2, 4, 16, 24, 4];
    const dims = { numKeyHeads: hk, numValueHeads: hv, keyDim: dk, valueDim: dv };
    const c = 2 * hk * dk + hv * dv;
    const ts = [1, 0, 3, 2];
    const scratchOf = [false, false, true, false];
    const rows = ts.reduce((a, b) => a + b, 0);
    const sym = (n: number) => Float32Array.from({ length: n }, () => 2 * r() - 1);
    const [x, g, beta] = [sym(rows * c), sym(rows * hv).map((v) => -Math.abs(v)), sym(rows * hv).map((v) => Math.abs(v))];
    const win0 = sym(ts.length * (taps - 1) * c);
    const st0 = sym(ts.length * hv * dk * dv);
    const w = randomWeight(createRefKernels(), 'f32', c, taps, () => 2 * r() - 1); // a vector weight (never packed)
    const scratchRows = 3;
    const runOnce = async (batched: boolean): Promise<Float32Array[]> => {
      const [conv, gx, bx] = [k.alloc(rows * c), upload(g), upload(beta)];
      const xs = upload(x);
      const wins = upload(win0); // every window in one buffer (as the engine's state pool)
      const states = upload(st0);
      const cs = k.alloc(scratchRows * (taps - 1) * c);
      const ss = k.alloc(scratchRows * hv * dk * dv);
      const o = k.alloc(rows * hv * dv);
      let row = 0;
      const seqs = ts.map((t, i) => {
        const s = { row, t, i };
        row += t;
        return s;
      });
      const convSeqs = seqs.map((s) => ({ row: s.row, t: s.t, window: k.view(wins, s.i * (taps - 1) * c, (taps - 1) * c),
        scratch: scratchOf[s.i] ? k.view(cs, 0, s.t * (taps - 1) * c) : undefined }));
      const gdnSeqs = seqs.map((s) => ({ row: s.row, t: s.t, state: k.view(states, s.i * hv * dk * dv, hv * dk * dv),
        scratch: scratchOf[s.i] ? k.view(ss, 0, s.t * hv * dk * dv) : undefined }));
      await readAll(xs);
      const d0 = k.recordedDispatches;
      if (batched) k.causalConvSeqs(conv, xs, w, convSeqs);
      else convSeqsByCalls(k, conv, xs, w, convSeqs);
      if (batched) k.gdnRecurrentSeqs(o, conv, gx, bx, dims, gdnSeqs);
      else gdnSeqsByCalls(k, o, conv, gx, bx, dims, gdnSeqs);
      if (batched) assert.equal(k.recordedDispatches - d0, 2, 'one conv and one recurrence dispatch');
      return readAll(conv, wins, cs, o, states, ss);
    };
    const want = await runOnce(false);
    const got = await runOnce(true);
    ['conv out', 'windows', 'conv scratch', 'gdn out', 'states', 'state scratch'].forEach((name, i) =>
      assert.ok(sameBits(got[i]!, want[i]!), `${name} differs`));
  });

  test('matmulGroup: float weights in one dispatch (bf16 and f32 mixed, 5 entries: two dispatches of bf16 segments), a q8_0 entry after one shared activation quantization; == one matmul each, bit for bit', async () => {
    const r = rng(9);
    const ref = createRefKernels();
    const [m, kk] = [5, 64];
    const sym = () => 2 * r() - 1;
    const q8 = ref.allocWeight('q8_0', 6, kk);
    quantizeRowsGgml('q8_0', Float32Array.from({ length: 6 * kk }, sym), 6, kk, q8.bytes);
    const shapes: [string, number][] = [['bf16', 7], ['f32', 13], ['bf16', 1], ['bf16', 5], ['bf16', 3], ['bf16', 2]];
    const weights = [...shapes.map(([d, n]) => k.packWeight(randomWeight(ref, d as 'bf16' | 'f32', n, kk, sym))), k.packWeight(q8.weight)];
    const x = upload(Float32Array.from({ length: m * kk }, sym));
    const outs = weights.map((w) => k.alloc(m * w.rows));
    await readAll(x);
    for (const [i, w] of weights.entries()) k.matmul(outs[i]!, x, w, m);
    const want = await readAll(...outs);
    const gouts = weights.map((w) => k.alloc(m * w.rows));
    await readAll(x);
    const d0 = k.recordedDispatches;
    k.matmulGroup(x, m, weights.map((w, i) => ({ out: gouts[i]!, w })));
    // bf16: 5 segments (at most 4 per dispatch), f32: 1, q8_0: quant_acts + 1
    assert.equal(k.recordedDispatches - d0, 2 + 1 + 2);
    const got = await readAll(...gouts);
    got.forEach((g, i) => assert.ok(sameBits(g, want[i]!), `entry ${i} (${weights[i]!.dtype}) differs`));
  });

  test('matmulAdd (the residual add in the matmul dispatch) == matmul then add, bit for bit: bf16 and q8_0', async () => {
    const r = rng(19);
    const ref = createRefKernels();
    const [m, kk, n] = [3, 64, 11];
    const sym = () => 2 * r() - 1;
    const q8 = ref.allocWeight('q8_0', n, kk);
    quantizeRowsGgml('q8_0', Float32Array.from({ length: n * kk }, sym), n, kk, q8.bytes);
    for (const w of [k.packWeight(randomWeight(ref, 'bf16', n, kk, sym)), k.packWeight(q8.weight)]) {
      const x = upload(Float32Array.from({ length: m * kk }, sym));
      const res = Float32Array.from({ length: m * n }, sym);
      const [a, tmp] = [upload(res), k.alloc(m * n)];
      k.matmul(tmp, x, w, m);
      k.add(a, a, tmp, m * n);
      const [want] = await readAll(a);
      const b = upload(res);
      await readAll(b);
      const d0 = k.recordedDispatches;
      k.matmulAdd(b, x, w, m, k.alloc(m * n));
      assert.equal(k.recordedDispatches - d0, w.dtype === 'q8_0' ? 2 : 1, 'quant_acts + matmul, or the float matmul alone');
      const [got] = await readAll(b);
      assert.ok(sameBits(got!, want!), `${w.dtype}: matmulAdd differs from matmul + add`);
    }
  });

  test('matmulGroup with a norm: folded into the float matmuls (one dispatch) == rmsNorm then the group, bit for bit; quantized entries: into their activation quantization', async () => {
    const r = rng(23);
    const ref = createRefKernels();
    const [m, kk] = [4, 96];
    const sym = () => 2 * r() - 1;
    const nw = randomWeight(ref, 'bf16', 1, kk, () => 0.3 * sym());
    const q8 = ref.allocWeight('q8_0', 5, kk);
    quantizeRowsGgml('q8_0', Float32Array.from({ length: 5 * kk }, sym), 5, kk, q8.bytes);
    const xs = Float32Array.from({ length: m * kk }, () => 3 * sym());
    for (const [zc, weights] of [[true, [k.packWeight(randomWeight(ref, 'bf16', 9, kk, sym)), k.packWeight(randomWeight(ref, 'bf16', 2, kk, sym))]],
      [false, [k.packWeight(randomWeight(ref, 'f32', 3, kk, sym)), k.packWeight(q8.weight)]]] as const) {
      const x = upload(xs);
      const normed = k.alloc(m * kk);
      const want = weights.map((w) => k.alloc(m * w.rows));
      k.rmsNorm(normed, x, nw, m, 1e-6, zc);
      k.matmulGroup(normed, m, weights.map((w, i) => ({ out: want[i]!, w })));
      const wantRows = await readAll(...want);
      const got = weights.map((w) => k.alloc(m * w.rows));
      await readAll(x);
      const d0 = k.recordedDispatches;
      k.matmulGroup(x, m, weights.map((w, i) => ({ out: got[i]!, w })), { w: nw, eps: 1e-6, zeroCentered: zc, out: k.alloc(m * kk) });
      const quant = weights.some((w) => w.dtype === 'q8_0');
      assert.equal(k.recordedDispatches - d0, quant ? 3 : 1, quant ? 'norm + quant_acts in one, q8_0 and f32 matmuls' : 'the norm folded into one dispatch');
      const gotRows = await readAll(...got);
      gotRows.forEach((g, i) => assert.ok(sameBits(g, wantRows[i]!), `zeroCentered ${zc}: entry ${i} (${weights[i]!.dtype}) differs`));
    }
  });

  test('attentionInputs (q/gate split, head norms, RoPE, KV write) in one dispatch == the separate calls, bit for bit, gated or not', async () => {
    const ref = createRefKernels();
    for (const gated of [true, false]) {
      const c = makeCase();
      const r = rng(gated ? 3 : 4);
      const sym = () => 2 * r() - 1;
      const qgHost = Float32Array.from({ length: c.rows * qd * (gated ? 2 : 1) }, () => 3 * sym());
      const [qNorm, kNorm] = [randomWeight(ref, 'bf16', 1, hd, () => 0.2 * sym()), randomWeight(ref, 'bf16', 1, hd, () => 0.2 * sym())];
      const runOnce = async (fused: boolean): Promise<Float32Array[]> => {
        const cache = cacheOf(c);
        const qg = upload(qgHost);
        const q = gated ? k.alloc(c.rows * qd) : qg;
        const gate = gated ? k.alloc(c.rows * qd) : null;
        const [kk, v] = [upload(c.kk), upload(c.v)];
        await readAll(qg);
        const b = k.stepBatch(c.seqs, rope);
        const a = { qg, gated, q, gate, k: kk, v, qNorm, kNorm, eps: 1e-6, kv: c.seqs.map(() => cache) };
        const d0 = k.recordedDispatches;
        if (fused) k.attentionInputs(a, b, dims);
        else attentionInputsByCalls(k, a, b, dims);
        if (fused) assert.equal(k.recordedDispatches - d0, 1, 'one dispatch');
        return readAll(q, ...(gate ? [gate] : []), kk, cache.k, cache.v);
      };
      const want = await runOnce(false);
      const got = await runOnce(true);
      got.forEach((g, i) => assert.ok(sameBits(g, want[i]!), `gated ${gated}: output ${i} differs`));
    }
  });

  test('matmulAdd with a gated input (x·silu(b), x·sigmoid(b)) == the element-wise product, matmul, add, bit for bit; one dispatch for float weights, two for quantized', async () => {
    const r = rng(29);
    const ref = createRefKernels();
    const [m, kk, n] = [3, 64, 10];
    const sym = () => 2 * r() - 1;
    const q8 = ref.allocWeight('q8_0', n, kk);
    quantizeRowsGgml('q8_0', Float32Array.from({ length: n * kk }, sym), n, kk, q8.bytes);
    const [xs, bs, res] = [Float32Array.from({ length: m * kk }, () => 3 * sym()), Float32Array.from({ length: m * kk }, () => 3 * sym()),
      Float32Array.from({ length: m * n }, sym)];
    for (const w of [k.packWeight(randomWeight(ref, 'bf16', n, kk, sym)), k.packWeight(q8.weight)]) {
      for (const act of ['silu', 'sigmoid'] as const) {
        const [x, b, a, tmp] = [upload(xs), upload(bs), upload(res), k.alloc(m * n)];
        if (act === 'silu') k.mulSilu(x, x, b, m * kk);
        else k.mulSigmoid(x, x, b, m * kk);
        k.matmul(tmp, x, w, m);
        k.add(a, a, tmp, m * n);
        const [want] = await readAll(a);
        const [x2, b2, a2] = [upload(xs), upload(bs), upload(res)];
        await readAll(x2);
        const d0 = k.recordedDispatches;
        k.matmulAdd(a2, x2, w, m, k.alloc(m * n), { b: b2, act });
        assert.equal(k.recordedDispatches - d0, w.dtype === 'q8_0' ? 2 : 1, 'quantized: quant_acts with the gate + the matmul');
        const [got] = await readAll(a2);
        assert.ok(sameBits(got!, want!), `${w.dtype} ${act}: differs`);
      }
    }
  });

  test('MoE weight bytes: the grouped GEMMs read only routed experts, float ones once per call (the device tally = the host count)', async () => {
    const r = rng(31);
    const ref = createRefKernels();
    const [h, ie, e, topK] = [32, 16, 6, 2];
    const sym = () => 2 * r() - 1;
    const experts = Array.from({ length: e }, () => ({ gate: k.packWeight(randomWeight(ref, 'bf16', ie, h, sym)),
      up: k.packWeight(randomWeight(ref, 'bf16', ie, h, sym)), down: k.packWeight(randomWeight(ref, 'bf16', h, ie, sym)) }));
    const perExpert = 3 * ie * h * 2;
    // decode (1 row) and prefill (20 rows: expert 1 gets 20 entries, more than a 16-row tile, still one read)
    for (const idsHost of [[4, 1], [...Array.from({ length: 19 }, (_, i) => [1, i % 3 === 0 ? 0 : 3]).flat(), 1, 4]]) {
      const m = idsHost.length / topK;
      const ids = k.allocI32(m * topK);
      k.write(ids, 0, idsHost);
      k.moeTally.restart();
      k.moeExperts(k.alloc(m * h), upload(Float32Array.from({ length: m * h }, sym)), ids, upload(Float32Array.from({ length: m * topK }, () => 0.5)), m, topK, experts,
        { slot: k.alloc(m * topK * h), rowsIn: k.alloc(m * h), rowsOut: k.alloc(m * h), gate: k.alloc(m * ie), up: k.alloc(m * ie) });
      const { read, ideal } = await k.moeWeightBytes();
      const counts = Array.from({ length: e }, (_, x) => idsHost.filter((id) => id === x).length);
      assert.equal(read, counts.filter((c) => c > 0).length * perExpert, `m ${m}`);
      assert.equal(ideal, counts.filter((c) => c > 0).length * perExpert, `m ${m}`);
    }
  });

  test('a batch whose rows are not stacked in order is refused, naming the sequence', () => {
    assert.throws(() => k.stepBatch([{ row: 0, t: 2, start: 0, pageTable: [0] }, { row: 3, t: 1, start: 0, pageTable: [1] }], rope),
      /sequence 1 \(row 3, t 1, start 0\) is not stacked after row 2/);
  });
});

/** attentionBatch (the grouped kernel) against k.attention per sequence (a workgroup per
 * (head, row)) over one shared random paged cache; also the KV bytes counted for the whole
 * batch and for a batch of its decode rows alone. */
async function groupedVsRows(d: { numHeads: number; numKvHeads: number; headDim: number }, pageSize: number, spec: readonly { t: number; start: number }[]):
  Promise<{ want: Float32Array[]; got: Float32Array[]; decode: { read: number; ideal: number } }> {
  const r = rng(101);
  const sym = (n: number) => Float32Array.from({ length: n }, () => 2 * r() - 1);
  const [qd, kvd] = [d.numHeads * d.headDim, d.numKvHeads * d.headDim];
  const pagesOf = (s: { t: number; start: number }) => Math.ceil(Math.max(1, s.start + s.t) / pageSize);
  const pool = spec.reduce((n, s) => n + pagesOf(s), 0);
  // every sequence's pages are spread over the pool in reverse order, so page p of a table is
  // never at pool slot p
  let slot = pool;
  const tables = spec.map((s) => Array.from({ length: pagesOf(s) }, () => --slot));
  const layout = (sp: readonly { t: number; start: number }[], ix: readonly number[]) => {
    let row = 0;
    return sp.map((s, i) => { const b = { row, t: s.t, start: s.start, pageTable: tables[ix[i]!]! }; row += s.t; return b; });
  };
  const seqs = layout(spec, spec.map((_, i) => i));
  const rows = spec.reduce((n, s) => n + s.t, 0);
  const q = upload(sym(rows * qd));
  const n = pool * pageSize * kvd;
  const cache = k.alloc(2 * n);
  k.write(cache, 0, sym(2 * n));
  const kv: KvLayerView<GpuTensor> = { k: k.view(cache, 0, n), v: k.view(cache, n, n), pageSize };
  const perRow = k.alloc(rows * qd);
  for (const s of seqs) if (s.t > 0) k.attention(k.view(perRow, s.row * qd, s.t * qd), k.view(q, s.row * qd, s.t * qd), qd, kv, s.pageTable, s.start, s.t, d);
  const counted = async (sp: readonly BatchSeq[], out: GpuTensor, x: GpuTensor) => {
    const t0 = { ...k.g.traffic };
    k.attentionBatch(out, x, qd, sp.map(() => kv), k.stepBatch(sp, rope), d);
    await readAll(out);
    return { read: k.g.traffic.kvBytesRead - t0.kvBytesRead, ideal: k.g.traffic.kvBytesIdeal - t0.kvBytesIdeal };
  };
  const grouped = k.alloc(rows * qd);
  await counted(seqs, grouped, q);
  const [want, got] = await readAll(perRow, grouped);
  const decodeIx = spec.flatMap((s, i) => (s.t === 1 ? [i] : []));
  const decodeSeqs = layout(decodeIx.map((i) => spec[i]!), decodeIx);
  const decode = await counted(decodeSeqs, k.alloc(decodeSeqs.length * qd), upload(sym(decodeSeqs.length * qd)));
  const bySeq = (a: Float32Array) => seqs.map((s) => a.subarray(s.row * qd, (s.row + s.t) * qd));
  return { want: bySeq(want!), got: bySeq(got!), decode };
}
