// Bytes a cold prefill's attention moves per full-attention layer on webgpu, by schedule,
// counted block by block (not measured on a device): K/V read, the score scratch the exact
// kernels keep in memory (SC: written with the score, read and rewritten with exp, read with
// the output: 16 bytes per (query, position)), and split-K partials (hd + 2 floats written
// and read back per (query, key chunk)). Also the workgroups a schedule launches: the
// parallelism a GPU gets. Run after `npx tsc`: node scripts/attention-traffic.mjs [--json]
// Schedules:
//   grouped  ATTENTION_GROUP's blocks of 16 / G rows (decode and verify; prefill before tiles)
//   tile     the tile kernel: blocks of QT / G rows (wgsl/attention-tile.ts tileShapeFor)
//   one      one block per sequence (what KV read ÷ ideal ≤ 1.05 needs at T ≥ 21 rows)
//   tile-recompute  tiles without SC: scores recomputed (K read 3×: max, Σ exp, output)
//   tile-online     tiles with an online softmax (flash-attention; other bits, no SC)
//   split-K  a workgroup per (KV head, chunk of BC keys) over all queries, combined after
//            (flash-decoding; other bits): K/V once, partials written and read
import { tileShapeFor } from '../dist/src/kernels/webgpu/wgsl/attention-tile.js';

const SHAPES = [
  { name: 'tiny-think', nh: 4, nkv: 2, hd: 64 },
  { name: 'qwen3.5-0.8b', nh: 8, nkv: 2, hd: 256 },
  { name: 'qwen3.5-4b', nh: 16, nkv: 4, hd: 256 },
];
const STORAGE = 16384; // the WebGPU minimum maxComputeWorkgroupStorageSize

/** Σ over blocks of `per` rows of a T-row cold prefill of the positions each block reads. */
function positionsRead(T, per) {
  let n = 0;
  for (let r = 0; r < T; r += per) n += Math.min(T, r + per);
  return n;
}

function schedules(s, T) {
  const g = s.nh / s.nkv;
  const kvPos = 2 * 4 * s.nkv * s.hd; // K and V bytes of one position, all KV heads
  const ideal = kvPos * T;
  const pairs = s.nh * ((T * (T + 1)) / 2); // (query, position) pairs
  const sc = 16 * pairs;
  const shape = tileShapeFor(s.hd, STORAGE);
  const tileRows = Math.floor(shape.qt / g);
  const groupRows = Math.floor(16 / g);
  const blocks = (per) => s.nkv * Math.ceil(T / per);
  // split-K: a chunk's K and V in workgroup memory
  const bc = Math.floor(STORAGE / (2 * 4 * s.hd));
  let partialPairs = 0;
  for (let c = 0; c < T; c += bc) partialPairs += s.nh * (T - c);
  const rows = [
    { schedule: 'grouped', rows: groupRows, kv: kvPos * positionsRead(T, groupRows), scratch: sc, workgroups: blocks(groupRows), exact: true },
    { schedule: 'tile', rows: tileRows, kv: kvPos * positionsRead(T, tileRows), scratch: sc, workgroups: blocks(tileRows), exact: true },
    { schedule: 'one', rows: T, kv: ideal, scratch: sc, workgroups: s.nkv, exact: true },
    { schedule: 'tile-recompute', rows: tileRows, kv: 2 * kvPos * positionsRead(T, tileRows), scratch: 0, workgroups: blocks(tileRows), exact: true },
    { schedule: 'tile-online', rows: tileRows, kv: kvPos * positionsRead(T, tileRows), scratch: 0, workgroups: blocks(tileRows), exact: false },
    { schedule: `split-K (${bc} keys)`, rows: T, kv: ideal, scratch: 2 * 4 * (s.hd + 2) * partialPairs, workgroups: s.nkv * Math.ceil(T / bc), exact: false },
  ];
  return rows.map((r) => ({ model: s.name, T, ...r, kv_ratio: r.kv / ideal, total_ratio: (r.kv + r.scratch) / ideal, mib: (r.kv + r.scratch) / 2 ** 20 }));
}

const all = SHAPES.flatMap((s) => [256, 2048].flatMap((T) => schedules(s, T)));
if (process.argv.includes('--json')) {
  console.log(JSON.stringify(all, null, 1));
} else {
  console.log('model         T     schedule            rows  KV÷ideal  (KV+scratch)÷ideal  MiB/layer  workgroups  bits');
  for (const r of all) {
    console.log(`${r.model.padEnd(13)} ${String(r.T).padEnd(5)} ${r.schedule.padEnd(19)} ${String(r.rows).padStart(4)} ${r.kv_ratio.toFixed(2).padStart(9)} ${r.total_ratio.toFixed(2).padStart(19)} ${r.mib.toFixed(2).padStart(10)} ${String(r.workgroups).padStart(11)}  ${r.exact ? 'today\'s' : 'other'}`);
  }
}
