// Bytes attention moves per full-attention layer on webgpu, by schedule, counted block by
// block (not measured on a device), for a cold prefill of T tokens and for one decode row at
// context T. Columns: K/V read; the score scratch the kernels kept in device memory before the
// online softmax (SC: written with the score, read and rewritten with exp, read with the
// output: 16 bytes per (query head, position)); q read once per block and the output written
// once; all of it ÷ the ideal (K/V, q and the output each once); the workgroups a schedule
// launches; barriers a workgroup passes per 16 cache positions. Run after `npx tsc`:
// node scripts/attention-traffic.mjs [--json] [--storage 16,32,48,64] (KiB of workgroup memory; default 16,32)
// Schedules:
//   tile+SC   the prefill tile kernel before the online softmax: blocks of QT / G rows, scores through SC
//   tile      the online tile kernel (wgsl/attention-tile.ts tileShapeFor): no SC, QT = 128 (64 at hd 256)
//   prefill   the kernel attentionTilePlan picks now: a query per thread (wgsl/attention-prefill.ts,
//             256 threads × 2 queries up to head dim 64, × 1 past it) where one block's K and V
//             fit the workgroup memory together; `prefill-split` where only one block's K (then
//             its V) fits (head dim 256 at 16 KiB); else `tile`
//   decode+SC, decode   one row at context T in a decode block (ATTENTION_QMAX queries), before / now
// Not counted: q re-read from device memory per block of positions (q_tile_reads: per K tile
// of a block in `tile`, per query and 16-position block in `prefill`; a thread's q is hd·4
// bytes: an L1/L2 hit on a GPU).
import { groupShapeFor, tileShapeFor } from '../dist/src/kernels/webgpu/wgsl/attention-tile.js';
import { prefillBarriersPerBlock, prefillQueries, prefillShapeFor } from '../dist/src/kernels/webgpu/wgsl/attention-prefill.js';
import { ONLINE_BLOCK } from '../dist/src/kernels/webgpu/wgsl/attention-online.js';

const SHAPES = [
  { name: 'tiny-think', nh: 4, nkv: 2, hd: 64 },
  { name: 'qwen3.5-0.8b', nh: 8, nkv: 2, hd: 256 },
  { name: 'qwen3.5-4b', nh: 16, nkv: 4, hd: 256 },
];
// maxComputeWorkgroupStorageSize: the WebGPU minimum, and lavapipe's (and many GPUs'); --storage for others
const storageArg = process.argv.indexOf('--storage');
const STORAGES = (storageArg > 0 ? process.argv[storageArg + 1].split(',').map(Number) : [16, 32]).map((kib) => kib * 1024);
/** The tile's queries before (independent of the storage: the K/V tile shrank instead). */
const qtBefore = (hd) => Math.max(8, Math.min(128, 2 ** Math.floor(Math.log2((64 * 256) / hd))));

/** Σ over blocks of `per` rows of a T-row cold prefill of the positions each block reads. */
function positionsRead(T, per) {
  let n = 0;
  for (let r = 0; r < T; r += per) n += Math.min(T, r + per);
  return n;
}

/** Barriers per 16 positions: the tile kernel passes, per block of 16, one after each K tile
 * load and its scores, one after the fold, one after each V tile load and its sums; the
 * prefill kernel two per K+V tile of BC positions, four per block split (prefillBarriersPerBlock). */
const tileBarriers = (bc) => 4 * (ONLINE_BLOCK / bc) + 1;

function schedules(s, T, storage) {
  const g = s.nh / s.nkv;
  const kvPos = 2 * 4 * s.nkv * s.hd; // K and V bytes of one position, all KV heads
  const qRow = 4 * s.nh * s.hd; // a row's q (and its output)
  const tile = tileShapeFor(s.hd, storage);
  const pre = prefillShapeFor(s.hd, storage, 256);
  const dec = groupShapeFor(s.hd, storage);
  const tileRows = Math.floor(tile.qt / g);
  const preRows = pre ? Math.floor(prefillQueries(pre) / g) : tileRows;
  const rowsBefore = Math.floor(qtBefore(s.hd) / g);
  const prefill = { kvIdeal: kvPos * T, io: 2 * qRow * T, sc: 16 * s.nh * ((T * (T + 1)) / 2) };
  const decode = { kvIdeal: kvPos * T, io: 2 * qRow, sc: 16 * s.nh * T };
  const workgroups = (rows) => s.nkv * Math.ceil(T / rows);
  // the tile kernel: a block's q re-read per K tile of BC positions (positions 0..last of the block)
  const qTile = (rows, bc) => { let n = 0; for (let r = 0; r < T; r += rows) n += Math.ceil(Math.min(T, r + rows) / bc); return 4 * rows * g * s.hd * s.nkv * n; };
  // the prefill kernel: each query's q once per 16-position block it attends
  const qPre = () => { let n = 0; for (let p = 0; p < T; p++) n += Math.ceil((p + 1) / ONLINE_BLOCK); return 4 * s.nh * s.hd * n; };
  const rows = [
    { case: 'prefill', schedule: 'tile+SC', rows: rowsBefore, kv: kvPos * positionsRead(T, rowsBefore), scratch: prefill.sc, io: prefill.io, ideal: prefill,
      workgroups: workgroups(rowsBefore), barriers_per_16: null },
    { case: 'prefill', schedule: 'tile', rows: tileRows, kv: kvPos * positionsRead(T, tileRows), scratch: 0, io: prefill.io, ideal: prefill,
      workgroups: workgroups(tileRows), barriers_per_16: tileBarriers(tile.bc), q_tile_reads: qTile(tileRows, tile.bc) },
    { case: 'prefill', schedule: pre ? (pre.split ? 'prefill-split' : 'prefill') : 'prefill=tile', rows: preRows, kv: kvPos * positionsRead(T, preRows), scratch: 0, io: prefill.io, ideal: prefill,
      workgroups: workgroups(preRows), barriers_per_16: pre ? prefillBarriersPerBlock(pre) : tileBarriers(tile.bc), q_tile_reads: pre ? qPre() : qTile(tileRows, tile.bc) },
    { case: 'decode', schedule: 'decode+SC', rows: 1, kv: kvPos * T, scratch: decode.sc, io: decode.io, ideal: decode, workgroups: s.nkv, barriers_per_16: null },
    { case: 'decode', schedule: 'decode', rows: 1, kv: kvPos * T, scratch: 0, io: decode.io, ideal: decode, workgroups: s.nkv, barriers_per_16: null,
      q_tile_reads: 4 * g * s.hd * s.nkv * Math.ceil(T / dec.bc) },
  ];
  return rows.map(({ ideal, ...r }) => ({
    model: s.name, T, storage_kib: storage / 1024, ...r, q_tile_reads: r.q_tile_reads ?? null,
    kv_ratio: r.kv / ideal.kvIdeal, total_ratio: (r.kv + r.scratch + r.io) / (ideal.kvIdeal + ideal.io), mib: (r.kv + r.scratch + r.io) / 2 ** 20,
  }));
}

const all = STORAGES.flatMap((st) => SHAPES.flatMap((s) => [256, 2048].flatMap((T) => schedules(s, T, st))));
if (process.argv.includes('--json')) {
  console.log(JSON.stringify(all, null, 1));
} else {
  console.log('KiB  model         T     case     schedule      rows  KV÷ideal  all bytes÷ideal  MiB/layer  workgroups  barriers/16');
  for (const r of all) {
    console.log(`${String(r.storage_kib).padEnd(4)} ${r.model.padEnd(13)} ${String(r.T).padEnd(5)} ${r.case.padEnd(8)} ${r.schedule.padEnd(13)} ${String(r.rows).padStart(4)} ${r.kv_ratio.toFixed(2).padStart(9)} ${r.total_ratio.toFixed(2).padStart(16)} ${r.mib.toFixed(3).padStart(10)} ${String(r.workgroups).padStart(11)} ${String(r.barriers_per_16 ?? '-').padStart(12)}`);
  }
}
