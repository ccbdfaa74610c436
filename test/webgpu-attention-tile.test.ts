// Every webgpu attention kernel runs one online softmax (kernels/webgpu/wgsl/attention-online.ts):
// the per-(head, row) kernel (k.attention), the decode / verify blocks of the block kernel
// (wgsl/attention-tile.ts), the prefill kernel (wgsl/attention-prefill.ts, a query per
// thread; K and V together, or split where they do not fit) and the tile kernel's prefill
// shape where neither fits give a query the same bits for the same context. Here: a prefill
// of one sequence in blocks of QT / G rows, the same rows as verify-sized sequences (decode /
// verify blocks) and row by row, contexts 1 to 700 over pages of 16 (lengths around multiples
// of the 16-position block), head dims 16 / 64 / 256 (prefill kernel, K and V together), 256
// on a device capped at 16 KiB of workgroup memory (prefill kernel, split) and 512 (tile
// kernel), 1 / 2 / 4 / 8 query heads per KV head, bit for bit; each within the conformance
// tolerance of the reference kernel; and the KV bytes read (each block reads its sequence's
// cache once per KV head). Which kernel a device's limits pick (16 to 64 KiB) is checked on
// limits objects.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { AttentionDims, BatchSeq, KvLayerView } from '../src/kernels/types.js';
import { plainRopeTable } from '../src/kernels/rope-table.js';
import { createRefKernels } from '../src/kernels/ref/index.js';
import { WebGpuBoundaryKernels } from '../src/kernels/webgpu/kernels.js';
import type { GpuTensor } from '../src/kernels/webgpu/tensor.js';
import { attentionGroupShape, attentionPlanFor, attentionTilePlan, type TilePlan } from '../src/kernels/webgpu/attention-group.js';
import { accPerThread, groupShapeFor, tileShapeFor, tileWorkgroupBytes } from '../src/kernels/webgpu/wgsl/attention-tile.js';
import { ONLINE_BLOCK } from '../src/kernels/webgpu/wgsl/attention-online.js';
import { PREFILL_MAX_ACC, PREFILL_MAX_HD, prefillShapeFor, prefillWorkgroupBytes, type PrefillShape } from '../src/kernels/webgpu/wgsl/attention-prefill.js';
import { relErr, rng } from './numeric.js';
import { gpuUnderTest } from './webgpu-helpers.js';
import { sameBits } from './engine-helpers.js';

let k: WebGpuBoundaryKernels;
before(async () => { k = new WebGpuBoundaryKernels(await gpuUnderTest()); });
after(() => k?.dispose());

const PAGE = 16;
const rope = plainRopeTable(1e6, 8);
const ref = createRefKernels();

type Spec = readonly { t: number; start: number }[];

function upload(k: WebGpuBoundaryKernels, a: Float32Array): GpuTensor {
  const t = k.alloc(a.length);
  k.write(t, 0, a);
  return t;
}

/** Pages of one sequence (enough for its last position). */
const pagesOf = (s: { t: number; start: number }): number => Math.ceil(Math.max(1, s.start + s.t) / PAGE);

/** A random paged cache (pages in reverse pool order) and queries for `spec`; per sequence:
 * the per-(head, row) kernel's rows, attentionBatch's rows of `spec` as one batch, of the
 * same rows cut into sequences of `verifyRows` (decode / verify blocks, sharing the page
 * table), the reference kernel's rows; and the KV bytes attentionBatch read of `spec`. */
async function threeWays(k: WebGpuBoundaryKernels, d: AttentionDims, spec: Spec, verifyRows: number) {
  const r = rng(211);
  const sym = (n: number) => Float32Array.from({ length: n }, () => 2 * r() - 1);
  const [qd, kvd] = [d.numHeads * d.headDim, d.numKvHeads * d.headDim];
  let slot = spec.reduce((n, s) => n + pagesOf(s), 0);
  const n = slot * PAGE * kvd;
  let row = 0;
  const seqs: BatchSeq[] = spec.map((s) => {
    const b = { row, t: s.t, start: s.start, pageTable: Array.from({ length: pagesOf(s) }, () => --slot) };
    row += s.t;
    return b;
  });
  const qh = sym(row * qd);
  const ch = sym(2 * n);
  const q = upload(k, qh);
  const cache = upload(k, ch);
  const kv: KvLayerView<GpuTensor> = { k: k.view(cache, 0, n), v: k.view(cache, n, n), pageSize: PAGE };
  const perRow = k.alloc(row * qd);
  for (const s of seqs) if (s.t > 0) k.attention(k.view(perRow, s.row * qd, s.t * qd), k.view(q, s.row * qd, s.t * qd), qd, kv, s.pageTable, s.start, s.t, d);
  const tiled = k.alloc(row * qd);
  const t0 = { ...k.g.traffic };
  k.attentionBatch(tiled, q, qd, seqs.map(() => kv), k.stepBatch(seqs, rope), d);
  const tr = k.g.traffic;
  const read = tr.kvBytesRead - t0.kvBytesRead;
  const ideal = tr.kvBytesIdeal - t0.kvBytesIdeal;
  const pieces: BatchSeq[] = seqs.flatMap((s) => Array.from({ length: Math.ceil(s.t / verifyRows) }, (_, i) =>
    ({ row: s.row + i * verifyRows, t: Math.min(verifyRows, s.t - i * verifyRows), start: s.start + i * verifyRows, pageTable: s.pageTable })));
  const grouped = k.alloc(row * qd);
  k.attentionBatch(grouped, q, qd, pieces.map(() => kv), k.stepBatch(pieces, rope), d);
  const [rows, tiles, blocks] = await k.readBack([perRow, tiled, grouped].map((t) => ({ t, offset: 0, length: t.length })));
  const want = new Float32Array(row * qd);
  const refKv = { k: ch.subarray(0, n), v: ch.subarray(n), pageSize: PAGE };
  for (const s of seqs) if (s.t > 0) ref.attention(want.subarray(s.row * qd), qh.subarray(s.row * qd), qd, refKv, s.pageTable, s.start, s.t, d);
  const cut = (a: Float32Array, s: BatchSeq) => a.subarray(s.row * qd, (s.row + s.t) * qd);
  return { seqs, read, ideal, rows: seqs.map((s) => ({ rows: cut(rows!, s), tiles: cut(tiles!, s), blocks: cut(blocks!, s), ref: cut(want, s) })) };
}

/** A prefill of `plan.rows`-row blocks, decode and verify rows on `kk`: tiles == blocks ==
 * rows bit for bit, ≈ ref, and the KV bytes each block reads; `far`: the longest context. */
async function tilesBlocksRows(kk: WebGpuBoundaryKernels, d: AttentionDims, plan: TilePlan, far = 700): Promise<void> {
  const g = d.numHeads / d.numKvHeads;
  const group = attentionGroupShape(kk.g, d);
  assert.ok(group, 'the device fits the decode / verify block');
  const rows = plan.rows;
  const groupRows = Math.floor(16 / g);
  // a prefill from position 0 over two tiles and a bit (contexts 1 up, every block edge
  // to 2·rows + 3), one ending at context `far`, decode rows at contexts B − 1, B, B + 1,
  // 2·B, 2·B + 1 and far − 249 (around the edges of the softmax blocks of B positions), verify
  // rows at contexts 2·B..2·B + 1, an empty sequence
  const B = ONLINE_BLOCK;
  const spec = [{ t: 2 * rows + 3, start: 0 }, { t: 1, start: far - 250 }, { t: rows + 5, start: far - 5 - rows }, { t: 0, start: 9 },
    { t: 2, start: 2 * B - 1 }, { t: 1, start: B - 2 }, { t: 1, start: B - 1 }, { t: 1, start: B }, { t: 1, start: 2 * B - 1 }, { t: 1, start: 2 * B }];
  const { seqs, read, ideal, rows: got } = await threeWays(kk, d, spec, groupRows);
  for (const [i, x] of got.entries()) {
    const what = `sequence ${i} (${JSON.stringify(spec[i])}; ${plan.kind} ${plan.queries}×${plan.bc}, block ${group.qt}×${group.bc})`;
    assert.ok(sameBits(x.tiles, x.rows), `${what}: attentionBatch differs from the per-row kernel`);
    assert.ok(sameBits(x.blocks, x.rows), `${what}: decode / verify blocks differ from the per-row kernel`);
    assert.ok(relErr(x.rows, x.ref) <= 1e-5, `${what}: rel err ${relErr(x.rows, x.ref)} vs the reference kernel`);
  }
  assert.equal(seqs.length, spec.length);
  // K and V of every KV head: each block reads positions 0..its last row's
  const pos = 2 * 4 * d.numKvHeads * d.headDim;
  const blocks = (s: { t: number; start: number }, per: number) =>
    Array.from({ length: Math.ceil(s.t / per) }, (_, b) => s.start + Math.min(s.t, (b + 1) * per));
  const lasts = spec.flatMap((s) => blocks(s, s.t > groupRows ? rows : groupRows));
  assert.equal(read, pos * lasts.reduce((x, y) => x + y, 0), 'tile blocks of QT / G rows, decode and verify once');
  assert.equal(ideal, pos * spec.reduce((x, s) => x + (s.t > 0 ? s.start + s.t : 0), 0));
}

describe('webgpu attention: one online softmax in every kernel', () => {
  test('shapes fit the workgroup memory they are sized for (16 KiB: the WebGPU minimum)', () => {
    for (const hd of [16, 64, 128, 256, 512, 1024]) {
      for (const s of [tileShapeFor(hd, 16384), groupShapeFor(hd, 16384)]) {
        assert.ok(s, `head dim ${hd} fits 16 KiB`);
        assert.ok(tileWorkgroupBytes(s) <= 16384, `head dim ${hd}: ${tileWorkgroupBytes(s)} bytes`);
        assert.equal(ONLINE_BLOCK % s.bc, 0, 'a K/V tile divides the softmax block');
        assert.ok(accPerThread(s) <= (s.stage ? 64 : 128), `${accPerThread(s)} accumulators a thread`);
      }
    }
    assert.deepEqual(tileShapeFor(256, 16384), { wg: 256, qt: 64, bc: 8, hd: 256, stage: true, order: 'query' });
    assert.deepEqual(tileShapeFor(64, 16384), { wg: 256, qt: 128, bc: 16, hd: 64, stage: true, order: 'query' });
    assert.deepEqual(groupShapeFor(64, 16384), { wg: 16, qt: 16, bc: 16, hd: 64, stage: false, order: 'element', ub: 4 });
    assert.deepEqual(groupShapeFor(256, 16384), { wg: 32, qt: 16, bc: 16, hd: 256, stage: false, order: 'element', ub: 4 });
    assert.deepEqual(groupShapeFor(1024, 16384), { wg: 128, qt: 16, bc: 16, hd: 1024, stage: false, order: 'element', ub: 4 });
  });

  test('prefill shapes (a query per thread): K and V tiles of whole softmax blocks within the workgroup memory, else none', () => {
    for (const storage of [16384, 32768, 49152]) {
      for (const hd of [16, 64, 128, 256, 512]) {
        const s = prefillShapeFor(hd, storage, 256);
        if (!s) { assert.ok(hd > PREFILL_MAX_HD || 4 * ONLINE_BLOCK * hd > storage, `head dim ${hd} at ${storage} bytes: one block's K fits`); continue; }
        assert.ok(prefillWorkgroupBytes(s) <= storage && s.bc % ONLINE_BLOCK === 0, `head dim ${hd}: ${s.bc} positions, ${prefillWorkgroupBytes(s)} bytes`);
        assert.equal(s.split, 2 * 4 * ONLINE_BLOCK * hd > storage, `head dim ${hd} at ${storage} bytes: split only where K and V of a block do not fit together`);
        assert.ok(s.qpt * hd <= Math.max(hd, PREFILL_MAX_ACC), `head dim ${hd}: ${s.qpt} queries a thread`);
      }
    }
    assert.deepEqual(prefillShapeFor(64, 32768, 1024), { wg: 256, qpt: 2, bc: 64, hd: 64, split: false });
    assert.deepEqual(prefillShapeFor(64, 16384, 256), { wg: 256, qpt: 2, bc: 32, hd: 64, split: false });
    assert.deepEqual(prefillShapeFor(256, 32768, 256), { wg: 256, qpt: 1, bc: 16, hd: 256, split: false });
    assert.deepEqual(prefillShapeFor(256, 16384, 256), { wg: 256, qpt: 1, bc: 16, hd: 256, split: true }, 'head dim 256 at 16 KiB: K then V');
    assert.equal(prefillShapeFor(512, 65536, 256), null, 'head dim 512: the shared tile kernel (a thread would hold 512 accumulators)');
  });

  // what a device's limits pick (WebGPU's 16 KiB minimum, lavapipe's 32 KiB, 48 / 64 KiB as
  // NVIDIA's Vulkan driver reports): the query-per-thread kernel at head dim 256 everywhere,
  // split only at 16 KiB, the K/V tile growing with the memory
  test('the prefill plan a device picks from its limits (16 to 64 KiB of workgroup memory)', () => {
    const qwen35 = { numHeads: 8, numKvHeads: 2, headDim: 256 };
    const pick = (kib: number, d: AttentionDims = qwen35) => {
      const p = attentionPlanFor({ maxComputeWorkgroupStorageSize: kib * 1024, maxComputeInvocationsPerWorkgroup: 1024 }, d);
      assert.ok(p, `a plan at ${kib} KiB`);
      return { kind: p.kind, rows: p.rows, bc: p.bc, split: p.kind === 'prefill' ? (p.shape as PrefillShape).split : null };
    };
    assert.deepEqual(pick(16), { kind: 'prefill', rows: 64, bc: 16, split: true });
    assert.deepEqual(pick(32), { kind: 'prefill', rows: 64, bc: 16, split: false });
    assert.deepEqual(pick(48), { kind: 'prefill', rows: 64, bc: 16, split: false });
    assert.deepEqual(pick(64), { kind: 'prefill', rows: 64, bc: 32, split: false });
    const tiny = { numHeads: 4, numKvHeads: 2, headDim: 64 };
    assert.deepEqual([16, 32, 48, 64].map((kib) => pick(kib, tiny)), [32, 64, 64, 64].map((bc) => ({ kind: 'prefill', rows: 256, bc, split: false })));
    assert.deepEqual(pick(64, { numHeads: 4, numKvHeads: 2, headDim: 512 }).kind, 'tile');
    for (const kib of [16, 32, 48, 64]) {
      const p = attentionPlanFor({ maxComputeWorkgroupStorageSize: kib * 1024, maxComputeInvocationsPerWorkgroup: 256 }, qwen35);
      assert.ok(p?.kind === 'prefill' && prefillWorkgroupBytes(p.shape as PrefillShape) <= kib * 1024, `${kib} KiB: fits`);
    }
  });

  // head dims 16 / 64 / 256 take the query-per-thread prefill kernel on a device with 32 KiB of
  // workgroup memory (lavapipe, most GPUs), 512 the shared tile kernel (its K and V of one block
  // need 64 KiB)
  const cases = [{ numHeads: 2, numKvHeads: 2, headDim: 16, kind: 'prefill' }, { numHeads: 8, numKvHeads: 2, headDim: 64, kind: 'prefill' },
    { numHeads: 8, numKvHeads: 1, headDim: 256, kind: 'prefill' }, { numHeads: 4, numKvHeads: 2, headDim: 512, kind: 'tile' }] as const;
  for (const { kind, ...d } of cases) {
    test(`head dim ${d.headDim}, ${d.numHeads / d.numKvHeads} query heads per KV head (${kind}): tiles == blocks == rows bit for bit, ≈ ref, cache read once per block`, async () => {
      assert.ok(k.g.device.limits.maxComputeWorkgroupStorageSize >= 32768, 'a device with 32 KiB of workgroup memory (the kernel a case covers depends on it)');
      const plan = attentionTilePlan(k.g, d);
      assert.equal(plan?.kind, kind);
      assert.ok(plan?.kind !== 'prefill' || !(plan.shape as PrefillShape).split, 'K and V together');
      await tilesBlocksRows(k, d, plan!);
    });
  }

  // head dim 256 on a device capped at 16 KiB of workgroup memory: the split prefill kernel
  // (and the 16 KiB decode / verify block), the Qwen3.5 full-attention head dim there;
  // contexts up to 300 (the suite's time: the kernel's tile loop is the same at any length)
  test('head dim 256 at 16 KiB of workgroup memory (prefill, K then V): tiles == blocks == rows bit for bit, ≈ ref, cache read once per block', async () => {
    const small = new WebGpuBoundaryKernels(await gpuUnderTest({ workgroupStorage: 16384 }));
    try {
      assert.equal(small.g.device.limits.maxComputeWorkgroupStorageSize, 16384, 'the device is capped at 16 KiB');
      const d = { numHeads: 8, numKvHeads: 1, headDim: 256 };
      const plan = attentionTilePlan(small.g, d);
      assert.ok(plan?.kind === 'prefill' && (plan.shape as PrefillShape).split, 'the split prefill kernel');
      await tilesBlocksRows(small, d, plan, 300);
    } finally {
      small.dispose();
    }
  });

  test('more query heads per KV head than a block holds (the per-row kernel in a batch) == the per-row kernel', async () => {
    const d = { numHeads: 17, numKvHeads: 1, headDim: 16 };
    assert.equal(attentionGroupShape(k.g, d), null);
    const { rows: got } = await threeWays(k, d, [{ t: 20, start: 0 }, { t: 1, start: 47 }], 3);
    for (const x of got) {
      assert.ok(sameBits(x.tiles, x.rows) && sameBits(x.blocks, x.rows), 'ATTENTION_BATCH == ATTENTION');
      assert.ok(relErr(x.rows, x.ref) <= 1e-5);
    }
  });
});
