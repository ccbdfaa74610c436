// Multimodal RoPE through the kernels' batched rope (three masked passes on ref / wasm): the
// same bits as a direct one-pass rotation of each pair by its own axis' position on ref,
// within float tolerance on wasm; plain rows of the same batch keep plain RoPE's bits.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createKernels } from '../src/kernels/index.js';
import { plainRopeTable } from '../src/kernels/rope-table.js';
import { mropePairAxes } from '../src/vision/positions.js';

const [HEADS, HD, ROT, T] = [2, 16, 12, 5];

/** Direct multimodal rotation (f64 angles and products, one f32 rounding per value). */
function direct(x: Float32Array, positions: Int32Array, axes: Uint8Array, invFreq: Float64Array): Float32Array {
  const out = x.slice();
  const half = invFreq.length;
  for (let j = 0; j < T; j++) for (let h = 0; h < HEADS; h++) for (let f = 0; f < half; f++) {
    const b = j * HEADS * HD + h * HD;
    const a = positions[axes[f]! * T + j]! * invFreq[f]!;
    const [x1, x2] = [x[b + f]!, x[b + f + half]!];
    out[b + f] = x1 * Math.cos(a) - x2 * Math.sin(a);
    out[b + f + half] = x2 * Math.cos(a) + x1 * Math.sin(a);
  }
  return out;
}

for (const name of ['ref', 'wasm'] as const) {
  test(`mrope on ${name}: equals the direct rotation; a plain row in the batch is unchanged`, async () => {
    const k = await createKernels(name, 1);
    try {
      const table = plainRopeTable(10000, ROT);
      const axes = mropePairAxes(ROT / 2, [2, 2, 2], true);
      assert.deepEqual([...axes], [0, 1, 2, 0, 1, 2]);
      const positions = Int32Array.from({ length: 3 * T }, (_, i) => 3 + ((i * 7) % 11));
      const host = Float32Array.from({ length: 2 * T * HEADS * HD }, (_, i) => Math.sin(i * 0.37));
      const x = k.alloc(host.length);
      k.write(x, 0, host);
      const batch = k.stepBatch([
        { row: 0, t: T, start: 9, pageTable: [0], mrope: { positions, pairAxes: axes } },
        { row: T, t: T, start: 9, pageTable: [0] },
      ], table);
      k.ropeBatch(x, batch, HEADS, HD, HEADS * HD);
      const got = (k.readBack([{ t: x, offset: 0, length: host.length }]) as Float32Array[])[0]!;
      const want = direct(host.subarray(0, T * HEADS * HD), positions, axes, table.invFreq);
      const n = T * HEADS * HD;
      if (name === 'ref') assert.deepEqual(got.subarray(0, n), want, 'bit-exact on ref');
      else for (let i = 0; i < n; i++) assert.ok(Math.abs(got[i]! - want[i]!) <= 2e-6, `value ${i}: ${got[i]} vs ${want[i]}`);
      // the plain row: the kernels' own plain rope at start..start+T−1
      const plain = k.alloc(n);
      k.write(plain, 0, host.subarray(n));
      k.rope(plain, Int32Array.from({ length: T }, (_, j) => 9 + j), T, HEADS, HD, table, HEADS * HD);
      assert.deepEqual(got.subarray(n), (k.readBack([{ t: plain, offset: 0, length: n }]) as Float32Array[])[0]!);
    } finally {
      k.dispose();
    }
  });
}
