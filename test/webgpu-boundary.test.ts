// The webgpu backend in the typed-boundary shape (src/kernels/webgpu/kernels.ts): ops
// recorded in program order with host inputs (ids, positions, page tables, writes) taken
// at call time, one readBack per step — checked against the ref twin on a small chain of
// layer ops, and for ordering (a write after an op does not reach back into it).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createRefKernels } from '../src/kernels/ref/index.js';
import { plainRopeTable } from '../src/kernels/rope-table.js';
import { WebGpuBoundaryKernels } from '../src/kernels/webgpu/kernels.js';
import { randomWeight, relErr, rng } from './numeric.js';
import { gpuUnderTest } from './webgpu-helpers.js';

const ref = createRefKernels();
let k: WebGpuBoundaryKernels;
before(async () => { k = new WebGpuBoundaryKernels(await gpuUnderTest()); });
after(() => k?.dispose());

const sym = (r: () => number) => () => 2 * r() - 1;

describe('webgpu kernels behind the typed boundary', () => {
  test('embed → rmsNorm → matmul → rope → kvWrite/attention → gather/copy rows: equals the ref', async () => {
    const r = rng(21);
    const [vocab, d, nH, nKV, hd, t] = [40, 32, 2, 1, 16, 3];
    const table = randomWeight(ref, 'bf16', vocab, d, sym(r));
    const norm = randomWeight(ref, 'bf16', 1, d, sym(r));
    const wq = randomWeight(ref, 'f32', nH * hd, d, sym(r));
    const wk = randomWeight(ref, 'f32', 2 * nKV * hd, d, sym(r));
    const ids = [5, 39, 0];
    const positions = [7, 8, 9];
    const pageTable = [2, 0, 1];
    const ps = 4;
    const rot = 8;
    const theta = 1e6;
    const invFreq = Float64Array.from({ length: rot / 2 }, (_, f) => Math.pow(theta, (-2 * f) / rot));
    // ref
    const x = new Float32Array(t * d);
    ref.embed(x, table, ids);
    ref.rmsNorm(x, x, norm, t, 1e-6, true);
    const q = new Float32Array(t * nH * hd);
    const kv = new Float32Array(t * 2 * nKV * hd);
    ref.matmul(q, x, wq, t);
    ref.matmul(kv, x, wk, t);
    ref.rope(q, positions, t, nH, hd, plainRopeTable(theta, rot), nH * hd);
    ref.rope(kv, positions, t, nKV, hd, plainRopeTable(theta, rot), 2 * nKV * hd);
    const kOnly = new Float32Array(t * nKV * hd);
    const vOnly = new Float32Array(t * nKV * hd);
    for (let i = 0; i < t; i++) {
      kOnly.set(kv.subarray(i * 2 * nKV * hd, i * 2 * nKV * hd + nKV * hd), i * nKV * hd);
      vOnly.set(kv.subarray(i * 2 * nKV * hd + nKV * hd, (i + 1) * 2 * nKV * hd), i * nKV * hd);
    }
    const cache = { k: new Float32Array(3 * ps * nKV * hd), v: new Float32Array(3 * ps * nKV * hd), pageSize: ps };
    // history: positions 0..6 zero (cache rows zero), then the 3 tokens
    ref.kvWrite(cache, pageTable, 7, kOnly, vOnly, t, nKV * hd);
    const att = new Float32Array(t * nH * hd);
    ref.attention(att, q, nH * hd, cache, pageTable, 7, t, { numHeads: nH, numKvHeads: nKV, headDim: hd });
    // gpu
    const gx = k.alloc(t * d);
    k.embed(gx, k.packWeight(table), ids);
    k.rmsNorm(gx, gx, norm, t, 1e-6, true);
    const gq = k.alloc(t * nH * hd);
    const gkv = k.alloc(t * 2 * nKV * hd);
    k.matmul(gq, gx, k.packWeight(wq), t);
    k.matmul(gkv, gx, k.packWeight(wk), t);
    k.rope(gq, positions, t, nH, hd, { invFreq, scale: 1 }, nH * hd);
    k.rope(gkv, positions, t, nKV, hd, { invFreq, scale: 1 }, 2 * nKV * hd);
    const gk = k.alloc(t * nKV * hd);
    const gv = k.alloc(t * nKV * hd);
    k.copyRows(gk, 0, nKV * hd, gkv, 0, 2 * nKV * hd, t, nKV * hd);
    k.copyRows(gv, 0, nKV * hd, gkv, nKV * hd, 2 * nKV * hd, t, nKV * hd);
    const gcache = { k: k.alloc(cache.k.length), v: k.alloc(cache.v.length), pageSize: ps };
    k.kvWrite(gcache, pageTable, 7, gk, gv, t, nKV * hd);
    const gatt = k.alloc(t * nH * hd);
    k.attention(gatt, gq, nH * hd, gcache, pageTable, 7, t, { numHeads: nH, numKvHeads: nKV, headDim: hd });
    const gg = k.alloc(2 * d);
    k.gatherRows(gg, gx, [2, 0], d);
    const [hx, hatt, hg] = await k.readBack([{ t: gx, offset: 0, length: t * d }, { t: gatt, offset: 0, length: gatt.length }, { t: gg, offset: 0, length: 2 * d }]);
    assert.ok(relErr(hx!, x) <= 1e-5, `norm ${relErr(hx!, x)}`);
    assert.ok(relErr(hatt!, att) <= 1e-5, `attention ${relErr(hatt!, att)}`);
    assert.deepEqual([...hg!], [...hx!.subarray(2 * d, 3 * d), ...hx!.subarray(0, d)]);
  });

  test('writes keep program order with the ops; addSigmoidScaled', async () => {
    const a = k.alloc(4);
    const b = k.alloc(4);
    const out = k.alloc(4);
    k.write(a, 0, [1, 2, 3, 4]);
    k.add(out, a, a, 4); // sees 1..4
    k.write(a, 1, [10, 20]); // after the add
    k.write(b, 0, [0.5, 0.5, 0.5, 0.5]);
    const gate = k.alloc(2);
    k.write(gate, 0, [0, 100]);
    k.addSigmoidScaled(b, a, gate, 2, 2); // b[i, :] += σ(g[i])·a[i, :]
    const [o, aa, bb] = await k.readBack([{ t: out, offset: 0, length: 4 }, { t: a, offset: 0, length: 4 }, { t: b, offset: 0, length: 4 }]);
    assert.deepEqual([...o!], [2, 4, 6, 8]);
    assert.deepEqual([...aa!], [1, 10, 20, 4]);
    assert.deepEqual([...bb!], [0.5 + 0.5 * 1, 0.5 + 0.5 * 10, 0.5 + 20, 0.5 + 4]);
  });

  test('moeExperts: the expert MLPs of each (row, slot), summed in slot order; a row alone == in the batch', async () => {
    const r = rng(22);
    const [E, H, I, m, topK] = [4, 32, 16, 3, 2];
    const experts = Array.from({ length: E }, () => ({
      gate: randomWeight(ref, 'bf16', I, H, sym(r)), up: randomWeight(ref, 'bf16', I, H, sym(r)), down: randomWeight(ref, 'bf16', H, I, sym(r)),
    }));
    const ids = [2, 0, 2, 3, 1, 2];
    const wts = [0.7, 0.3, 0.5, 0.5, 0.9, 0.1];
    const x = Float32Array.from({ length: m * H }, sym(r));
    // reference: each (row, slot) through its expert, slots summed in order
    const want = new Float32Array(m * H);
    const g1 = new Float32Array(I);
    const u1 = new Float32Array(I);
    const y1 = new Float32Array(H);
    for (let i = 0; i < m; i++) {
      for (let s = 0; s < topK; s++) {
        const e = experts[ids[i * topK + s]!]!;
        const xi = x.subarray(i * H, (i + 1) * H);
        ref.matmul(g1, xi, e.gate, 1);
        ref.matmul(u1, xi, e.up, 1);
        ref.mulSilu(u1, u1, g1, I);
        ref.matmul(y1, u1, e.down, 1);
        for (let d = 0; d < H; d++) want[i * H + d] = Math.fround(want[i * H + d]! + wts[i * topK + s]! * y1[d]!);
      }
    }
    const packed = experts.map((e) => ({ gate: k.packWeight(e.gate), up: k.packWeight(e.up), down: k.packWeight(e.down) }));
    const run = async (rows: number[]) => {
      const n = rows.length;
      const gx = k.alloc(n * H);
      rows.forEach((row, j) => k.write(gx, j * H, x.subarray(row * H, (row + 1) * H)));
      const gi = k.allocI32(n * topK);
      k.write(gi, 0, rows.flatMap((row) => ids.slice(row * topK, (row + 1) * topK)));
      const gw = k.alloc(n * topK);
      k.write(gw, 0, rows.flatMap((row) => wts.slice(row * topK, (row + 1) * topK)));
      const out = k.alloc(n * H);
      const scratch = { slot: k.alloc(n * topK * H), rowsIn: k.alloc(n * H), rowsOut: k.alloc(n * H), gate: k.alloc(n * I), up: k.alloc(n * I) };
      k.moeExperts(out, gx, gi, gw, n, topK, packed, scratch);
      return (await k.readBack([{ t: out, offset: 0, length: n * H }]))[0]!;
    };
    const all = await run([0, 1, 2]);
    assert.ok(relErr(all, want) <= 1e-5, `moe ${relErr(all, want)}`);
    const alone = await run([1]);
    assert.deepEqual([...alone], [...all.subarray(H, 2 * H)]);
  });

  test('host inputs beyond the upload arena: values land; memory settles across steps', async () => {
    const n = 40_000; // three of these overflow the first arena within one step
    const ts = [k.alloc(n), k.alloc(n), k.alloc(n)];
    let settled = 0;
    for (let step = 0; step < 3; step++) {
      ts.forEach((t, i) => k.write(t, 0, Float32Array.from({ length: n }, (_, j) => step * 1e6 + i * n + j)));
      const back = await k.readBack(ts.map((t) => ({ t, offset: 0, length: n })));
      back.forEach((b, i) => { assert.equal(b[0], step * 1e6 + i * n); assert.equal(b[n - 1], step * 1e6 + i * n + n - 1); });
      if (step === 1) settled = k.g.alloc.bytes;
      if (step === 2) assert.equal(k.g.alloc.bytes, settled, 'no arena growth once settled');
    }
  });

  test('an unpacked matmul weight is refused with a message naming it', () => {
    const w = randomWeight(ref, 'f32', 3, 4, () => 0);
    assert.throws(() => k.matmul(k.alloc(3), k.alloc(4), w, 1), /weight \[3, 4\] was not packed/);
  });
});
