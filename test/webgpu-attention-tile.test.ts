// The prefill tile kernel (kernels/webgpu/wgsl/attention-tile.ts) against the per-(head, row)
// attention kernel (k.attention, the definition of a row's bits): prefill rows of one
// sequence in tiles of QT / G rows, decode rows beside them (the grouped kernel), contexts 1
// to 700 over pages of 16, head dims 16 / 64 / 256 and 1 / 4 / 8 query heads per KV head,
// bit for bit; and the KV bytes read (each tile reads its sequence's cache once per KV
// head) and the score scratch's bytes.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { AttentionDims, BatchSeq, KvLayerView } from '../src/kernels/types.js';
import { plainRopeTable } from '../src/kernels/rope-table.js';
import { WebGpuBoundaryKernels } from '../src/kernels/webgpu/kernels.js';
import type { GpuTensor } from '../src/kernels/webgpu/tensor.js';
import { attentionTilePlan } from '../src/kernels/webgpu/attention-group.js';
import { tileShapeFor, tileWorkgroupBytes } from '../src/kernels/webgpu/wgsl/attention-tile.js';
import { rng } from './numeric.js';
import { gpuUnderTest } from './webgpu-helpers.js';
import { sameBits } from './engine-helpers.js';

let k: WebGpuBoundaryKernels;
before(async () => { k = new WebGpuBoundaryKernels(await gpuUnderTest()); });
after(() => k?.dispose());

const PAGE = 16;
const rope = plainRopeTable(1e6, 8);

function upload(a: Float32Array): GpuTensor {
  const t = k.alloc(a.length);
  k.write(t, 0, a);
  return t;
}

/** A batch of `spec` over one random paged cache (pages in reverse pool order): the
 * per-(head, row) kernel's output, attentionBatch's, and attentionBatch's KV bytes read. */
async function tileVsRows(d: AttentionDims, spec: readonly { t: number; start: number }[]):
  Promise<{ want: Float32Array; got: Float32Array; seqs: BatchSeq[]; read: number; ideal: number; scores: number }> {
  const r = rng(211);
  const sym = (n: number) => Float32Array.from({ length: n }, () => 2 * r() - 1);
  const [qd, kvd] = [d.numHeads * d.headDim, d.numKvHeads * d.headDim];
  const pagesOf = (s: { t: number; start: number }) => Math.ceil(Math.max(1, s.start + s.t) / PAGE);
  let slot = spec.reduce((n, s) => n + pagesOf(s), 0);
  const n = slot * PAGE * kvd;
  let row = 0;
  const seqs = spec.map((s) => {
    const b = { row, t: s.t, start: s.start, pageTable: Array.from({ length: pagesOf(s) }, () => --slot) };
    row += s.t;
    return b;
  });
  const q = upload(sym(row * qd));
  const cache = upload(sym(2 * n));
  const kv: KvLayerView<GpuTensor> = { k: k.view(cache, 0, n), v: k.view(cache, n, n), pageSize: PAGE };
  const perRow = k.alloc(row * qd);
  for (const s of seqs) if (s.t > 0) k.attention(k.view(perRow, s.row * qd, s.t * qd), k.view(q, s.row * qd, s.t * qd), qd, kv, s.pageTable, s.start, s.t, d);
  const tiled = k.alloc(row * qd);
  const t0 = { ...k.g.traffic };
  k.attentionBatch(tiled, q, qd, seqs.map(() => kv), k.stepBatch(seqs, rope), d);
  const [want, got] = await k.readBack([perRow, tiled].map((t) => ({ t, offset: 0, length: t.length })));
  const tr = k.g.traffic;
  return { want: want!, got: got!, seqs, read: tr.kvBytesRead - t0.kvBytesRead, ideal: tr.kvBytesIdeal - t0.kvBytesIdeal, scores: tr.scoreBytes - t0.scoreBytes };
}

describe('webgpu prefill attention tiles', () => {
  test('shapes fit the workgroup memory they are sized for (16 KiB: the WebGPU minimum)', () => {
    for (const hd of [16, 64, 128, 256]) {
      const s = tileShapeFor(hd, 16384);
      assert.ok(s, `head dim ${hd} fits 16 KiB`);
      assert.ok(tileWorkgroupBytes(s) <= 16384, `head dim ${hd}: ${tileWorkgroupBytes(s)} bytes`);
    }
    assert.deepEqual(tileShapeFor(256, 16384), { qt: 64, bc: 8, hd: 256 });
    assert.deepEqual(tileShapeFor(64, 16384), { qt: 128, bc: 16, hd: 64 });
    assert.equal(tileShapeFor(1024, 16384), null, 'no shape: the grouped kernel serves');
  });

  for (const d of [{ numHeads: 2, numKvHeads: 2, headDim: 16 }, { numHeads: 8, numKvHeads: 2, headDim: 64 }, { numHeads: 8, numKvHeads: 1, headDim: 256 }]) {
    const g = d.numHeads / d.numKvHeads;
    test(`head dim ${d.headDim}, ${g} query heads per KV head: tiles == the per-(head, row) kernel bit for bit, cache read once per tile`, async () => {
      const plan = attentionTilePlan(k.g, d);
      assert.ok(plan, 'the device fits a tile');
      const rows = plan.rows;
      // a prefill from position 0 over two tiles and a bit (contexts 1 up), one ending at
      // context 700, a decode row and a verify row (the grouped kernel), an empty sequence
      const spec = [{ t: 2 * rows + 3, start: 0 }, { t: 1, start: 450 }, { t: rows + 5, start: 695 - rows }, { t: 0, start: 9 }, { t: 2, start: 64 }];
      const { want, got, seqs, read, ideal, scores } = await tileVsRows(d, spec);
      const qd = d.numHeads * d.headDim;
      for (const [i, s] of seqs.entries()) {
        const [a, b] = [got.subarray(s.row * qd, (s.row + s.t) * qd), want.subarray(s.row * qd, (s.row + s.t) * qd)];
        assert.ok(sameBits(a, b), `sequence ${i} (${JSON.stringify(spec[i])}; tile ${plan.shape.qt}×${plan.shape.bc}) differs`);
      }
      // K and V of every KV head: each block reads positions 0..its last row's
      const pos = 2 * 4 * d.numKvHeads * d.headDim;
      const blocks = (s: { t: number; start: number }, per: number) =>
        Array.from({ length: Math.ceil(s.t / per) }, (_, b) => s.start + Math.min(s.t, (b + 1) * per));
      const group = Math.floor(16 / g);
      const lasts = spec.flatMap((s) => blocks(s, s.t > group ? rows : group));
      assert.equal(read, pos * lasts.reduce((x, y) => x + y, 0), 'tile blocks of QT / G rows, decode and verify once');
      assert.equal(ideal, pos * spec.reduce((x, s) => x + (s.t > 0 ? s.start + s.t : 0), 0));
      // the score scratch: 16 bytes per (query head, row, position it sees)
      const seen = spec.reduce((x, s) => x + s.t * s.start + (s.t * (s.t + 1)) / 2, 0);
      assert.equal(scores, 16 * d.numHeads * seen);
    });
  }
});
