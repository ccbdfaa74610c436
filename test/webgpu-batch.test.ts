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

let k: WebGpuBoundaryKernels;
before(async () => { k = new WebGpuBoundaryKernels(await gpuUnderTest()); });
after(() => k?.dispose());

const [nH, nKV, hd, ps] = [4, 2, 16, 4];
const kvDim = nKV * hd;
const qd = nH * hd;
const rope = plainRopeTable(1e6, 8);
const dims = { numHeads: nH, numKvHeads: nKV, headDim: hd };
const SEQS = [{ t: 3, start: 9 }, { t: 0, start: 4 }, { t: 1, start: 17 }, { t: 5, start: 0 }];
const PAGES_PER = 7;

interface Case { seqs: BatchSeq[]; rows: number; q: Float32Array; kk: Float32Array; v: Float32Array; hist: Float32Array[] }

function makeCase(): Case {
  const r = rng(77);
  let row = 0;
  // page tables interleave the sequences' pages over one pool, shuffled within a sequence
  const seqs = SEQS.map((s, i) => {
    const pageTable = Array.from({ length: PAGES_PER }, (_, p) => ((p * 3) % PAGES_PER) * SEQS.length + i);
    const b = { row, t: s.t, start: s.start, pageTable };
    row += s.t;
    return b;
  });
  const sym = (n: number) => Float32Array.from({ length: n }, () => 2 * r() - 1);
  return { seqs, rows: row, q: sym(row * qd), kk: sym(row * kvDim), v: sym(row * kvDim), hist: [sym(PAGES_PER * SEQS.length * ps * kvDim), sym(PAGES_PER * SEQS.length * ps * kvDim)] };
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

  test('a batch whose rows are not stacked in order is refused, naming the sequence', () => {
    assert.throws(() => k.stepBatch([{ row: 0, t: 2, start: 0, pageTable: [0] }, { row: 3, t: 1, start: 0, pageTable: [1] }], rope),
      /sequence 1 \(row 3, t 1, start 0\) is not stacked after row 2/);
  });
});
