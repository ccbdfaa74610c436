// Bytes attention moves per full-attention layer on webgpu, by schedule, counted block by
// block (not measured on a device), for a cold prefill of T tokens and for one decode row at
// context T. Columns: K/V read; the score scratch the kernels kept in device memory before the
// online softmax (SC: written with the score, read and rewritten with exp, read with the
// output: 16 bytes per (query head, position)); q read once per block and the output written
// once; all of it ÷ the ideal (K/V, q and the output each once). Also the workgroups a
// schedule launches. Run after `npx tsc`: node scripts/attention-traffic.mjs [--json]
// Schedules:
//   tile+SC   the prefill tile kernel before: blocks of QT / G rows, scores through SC
//   tile      the tile kernel now (online softmax, wgsl/attention-tile.ts tileShapeFor): no SC
//   decode+SC, decode   one row at context T in a decode block (ATTENTION_QMAX queries), before / now
// Not counted: q rows re-read from device memory once per K tile of a block (a block's q is
// QT·hd·4 bytes, 64 KiB at head dim 256: an L1/L2 hit on a GPU, listed as q_tile_reads).
import { groupShapeFor, tileShapeFor } from '../dist/src/kernels/webgpu/wgsl/attention-tile.js';

const SHAPES = [
  { name: 'tiny-think', nh: 4, nkv: 2, hd: 64 },
  { name: 'qwen3.5-0.8b', nh: 8, nkv: 2, hd: 256 },
  { name: 'qwen3.5-4b', nh: 16, nkv: 4, hd: 256 },
];
// maxComputeWorkgroupStorageSize: the WebGPU minimum, and lavapipe's (and many GPUs')
const STORAGES = [16384, 32768];
/** The tile's queries before (independent of the storage: the K/V tile shrank instead). */
const qtBefore = (hd) => Math.max(8, Math.min(128, 2 ** Math.floor(Math.log2((64 * 256) / hd))));

/** Σ over blocks of `per` rows of a T-row cold prefill of the positions each block reads. */
function positionsRead(T, per) {
  let n = 0;
  for (let r = 0; r < T; r += per) n += Math.min(T, r + per);
  return n;
}

function schedules(s, T, storage) {
  const g = s.nh / s.nkv;
  const kvPos = 2 * 4 * s.nkv * s.hd; // K and V bytes of one position, all KV heads
  const qRow = 4 * s.nh * s.hd; // a row's q (and its output)
  const shape = tileShapeFor(s.hd, storage);
  const dec = groupShapeFor(s.hd, storage);
  const tileRows = Math.floor(shape.qt / g);
  const rowsBefore = Math.floor(qtBefore(s.hd) / g);
  const blocks = s.nkv * Math.ceil(T / tileRows);
  const prefill = { kvIdeal: kvPos * T, io: 2 * qRow * T, sc: 16 * s.nh * ((T * (T + 1)) / 2) };
  const decode = { kvIdeal: kvPos * T, io: 2 * qRow, sc: 16 * s.nh * T };
  const kvTile = kvPos * positionsRead(T, tileRows);
  const kvBefore = kvPos * positionsRead(T, rowsBefore);
  // a block's q re-read per K tile of BC positions (positions 0..last of the block)
  const qTile = (bc, lastOf) => { let n = 0; for (let r = 0; r < T; r += tileRows) n += Math.ceil(lastOf(r) / bc); return n; };
  const rows = [
    { case: 'prefill', schedule: 'tile+SC', rows: rowsBefore, kv: kvBefore, scratch: prefill.sc, io: prefill.io, ideal: prefill, workgroups: s.nkv * Math.ceil(T / rowsBefore) },
    { case: 'prefill', schedule: 'tile', rows: tileRows, kv: kvTile, scratch: 0, io: prefill.io, ideal: prefill, workgroups: blocks,
      q_tile_reads: 4 * shape.qt * s.hd * s.nkv * qTile(shape.bc, (r) => Math.min(T, r + tileRows)) },
    { case: 'decode', schedule: 'decode+SC', rows: 1, kv: kvPos * T, scratch: decode.sc, io: decode.io, ideal: decode, workgroups: s.nkv },
    { case: 'decode', schedule: 'decode', rows: 1, kv: kvPos * T, scratch: 0, io: decode.io, ideal: decode, workgroups: s.nkv,
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
  console.log('KiB  model         T     case     schedule   rows  KV÷ideal  all bytes÷ideal  MiB/layer  workgroups');
  for (const r of all) {
    console.log(`${String(r.storage_kib).padEnd(4)} ${r.model.padEnd(13)} ${String(r.T).padEnd(5)} ${r.case.padEnd(8)} ${r.schedule.padEnd(10)} ${String(r.rows).padStart(4)} ${r.kv_ratio.toFixed(2).padStart(9)} ${r.total_ratio.toFixed(2).padStart(16)} ${r.mib.toFixed(3).padStart(10)} ${String(r.workgroups).padStart(11)}`);
  }
}
