// Batch invariance (invariant 3 of docs/ARCHITECTURE.md, the ground of MTP's exact losslessness), bit for bit:
// a row's result is the same alone or in a batch of M, with 1 or 2 threads; the Gated
// DeltaNet recurrence over T tokens in one call equals T one-token calls, and with
// per-step scratch equals without; conv likewise. Plus chunked ≈ recurrent (≤ 1e-5).
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { GdnDims, Kernels, KvLayerView, Weight, WeightDType } from '../src/kernels/types.js';
import { createWasmKernels } from '../src/kernels/wasm/index.js';
import { decodeHeadsPerUnit } from '../src/kernels/wasm/attention-blocking.js';
import { randomWeight, rng } from './numeric.js';

const k1 = await createWasmKernels({ threads: 1 });
const k2 = await createWasmKernels({ threads: 2 });
// 3 and 5 threads: a single query's attention units split GQA groups (8 heads, 2 KV heads:
// 2 and 1 heads per unit, where 1 and 2 threads score whole groups; decodeHeadsPerUnit)
const k3 = await createWasmKernels({ threads: 3 });
const k5 = await createWasmKernels({ threads: 5 });
after(() => {
  k1.dispose();
  k2.dispose();
  k3.dispose();
  k5.dispose();
});

function fill(k: Kernels, n: number, f: () => number): Float32Array {
  const a = k.alloc(n);
  for (let i = 0; i < n; i++) a[i] = f();
  return a;
}

function copy(k: Kernels, src: ArrayLike<number>): Float32Array {
  const a = k.alloc(src.length);
  a.set(src);
  return a;
}

const weight = randomWeight;

/** Same weight contents in another backend's memory. */
function cloneWeight(k: Kernels, w: Weight): Weight {
  const { weight: c, bytes } = k.allocWeight(w.dtype, w.rows, w.cols);
  bytes.set(new Uint8Array(w.data.buffer, w.data.byteOffset, w.data.byteLength));
  return c;
}

function same(got: ArrayLike<number>, want: ArrayLike<number>, what: string, n = want.length): void {
  for (let i = 0; i < n; i++) {
    if (!Object.is(got[i], want[i])) assert.fail(`${what}: [${i}] ${got[i]} !== ${want[i]} (not bit-identical)`);
  }
}

const sym = (r: () => number) => () => 2 * r() - 1;

// T·HV·dk·dv ≥ 64K for T ≥ 4: multi-token calls on 2 threads use the pool
const dims: GdnDims = { numKeyHeads: 2, numValueHeads: 4, keyDim: 64, valueDim: 64 };
const width = 2 * 2 * 64 + 4 * 64;
const ss = 4 * 64 * 64;
const ov = 4 * 64;

function gdnInputs(r: () => number, t: number) {
  return {
    qkv: fill(k1, t * width, sym(r)),
    g: fill(k1, t * 4, () => -0.01 - 2 * r()),
    beta: fill(k1, t * 4, () => 0.05 + 0.9 * r()),
    s0: fill(k1, ss, () => 0.5 * (2 * r() - 1)),
  };
}

describe('batch invariance (bit-exact)', () => {
  test('matmul: row alone == row in a batch of M (1..17), threads 1 == 2, bf16, f16 and f32', () => {
    const r = rng(21);
    // (N, K): K tails of 3, 6, 3 mod 8; N·K ≥ 256K so 2 threads use the pool; M ≥ 4 spans tiles
    for (const [n, kk] of [[67, 4099], [300, 1030], [33, 8195]] as const) {
      for (const dtype of ['bf16', 'f16', 'f32'] as const) {
        const raw = weight(k1, dtype, n, kk, sym(r));
        const w2 = k2.packWeight(cloneWeight(k2, raw));
        const w1 = k1.packWeight(raw);
        const mMax = 17; // 12..17: 6-row blocks, then a 4-row block and leftover rows (wideTiles)
        const x = fill(k1, mMax * kk, sym(r));
        const x2 = copy(k2, x);
        const alone: Float32Array[] = [];
        for (let i = 0; i < mMax; i++) {
          const o = k1.alloc(n);
          k1.matmul(o, x.subarray(i * kk, (i + 1) * kk), w1, 1);
          alone.push(o);
        }
        for (let m = 1; m <= mMax; m++) {
          for (const [kern, ww, xx] of [[k1, w1, x], [k2, w2, x2]] as const) {
            const out = kern.alloc(m * n);
            kern.matmul(out, xx, ww, m);
            for (let i = 0; i < m; i++) same(out.subarray(i * n, (i + 1) * n), alone[i]!, `${dtype} N=${n} K=${kk} row ${i} of M=${m} threads=${kern.threads}`);
          }
        }
      }
    }
  });

  test('rmsNorm / gatedRmsNorm: row alone == row in batch', () => {
    const r = rng(22);
    const d = 257;
    const w = weight(k1, 'f32', 1, d, sym(r));
    const m = 9;
    const x = fill(k1, m * d, sym(r));
    const z = fill(k1, m * d, sym(r));
    const all = k1.alloc(m * d);
    const gated = k1.alloc(m * d);
    k1.rmsNorm(all, x, w, m, 1e-6, true);
    k1.gatedRmsNorm(gated, x, z, w, m, 1e-6);
    for (let i = 0; i < m; i++) {
      const o = k1.alloc(d);
      k1.rmsNorm(o, x.subarray(i * d, (i + 1) * d), w, 1, 1e-6, true);
      same(o, all.subarray(i * d, (i + 1) * d), `rmsNorm row ${i}`);
      k1.gatedRmsNorm(o, x.subarray(i * d, (i + 1) * d), z.subarray(i * d, (i + 1) * d), w, 1, 1e-6);
      same(o, gated.subarray(i * d, (i + 1) * d), `gatedRmsNorm row ${i}`);
    }
  });

  // A batched call scores blocks of queries × whole GQA groups per cache walk, halved while a
  // thread has no unit (T = 40: blocks of 8; T = 23: 8, 8 and a short 7; T = 5: one block
  // on 1–2 threads, 3 + 2 on 3, 2 + 2 + 1 on 5); a single query's units hold the whole
  // group on 1–2 threads, half of it on 3 and one head on 5: a head's result must not care.
  // hd 20 and 36 run the kernel's 4-lane tails, hd 32 its 16-lane body only.
  for (const [start, t, hd] of [[90, 5, 32], [1020, 5, 32], [90, 40, 20], [1020, 23, 36]] as const) test(`attention: T queries at once == one query at a time; threads 1 == 2 (start ${start}, T ${t}, hd ${hd})`, () => {
    const r = rng(23);
    const nH = 8;
    const nKV = 2;
    const ps = 16;
    const kvDim = nKV * hd;
    const pages = Math.ceil((start + t) / ps);
    const pageTable = Int32Array.from({ length: pages }, (_, i) => pages - 1 - i);
    const dims = { numHeads: nH, numKvHeads: nKV, headDim: hd };
    const mk = (k: Kernels): KvLayerView => ({ k: k.alloc(pages * ps * kvDim), v: k.alloc(pages * ps * kvDim), pageSize: ps });
    const kv1 = mk(k1);
    const kv2 = mk(k2);
    const hk = fill(k1, (start + t) * kvDim, sym(r));
    const hv = fill(k1, (start + t) * kvDim, sym(r));
    k1.kvWrite(kv1, pageTable, 0, hk, hv, start + t, kvDim);
    k2.kvWrite(kv2, pageTable, 0, hk, hv, start + t, kvDim);
    const q = fill(k1, t * nH * hd, () => 3 * (2 * r() - 1));
    const all1 = k1.alloc(t * nH * hd);
    const all2 = k2.alloc(t * nH * hd);
    k1.attention(all1, q, nH * hd, kv1, pageTable, start, t, dims);
    k2.attention(all2, copy(k2, q), nH * hd, kv2, pageTable, start, t, dims);
    same(all2, all1, 'threads 1 vs 2');
    for (const [label, k, kv] of [['threads 2', k2, kv2], ['threads 3', k3, mk(k3)], ['threads 5', k5, mk(k5)]] as const) {
      if (k !== k2) {
        k.kvWrite(kv, pageTable, 0, copy(k, hk), copy(k, hv), start + t, kvDim);
        const all = k.alloc(t * nH * hd);
        k.attention(all, copy(k, q), nH * hd, kv, pageTable, start, t, dims);
        same(all, all1, `threads 1 vs ${label}`);
      }
      for (let i = 0; i < t; i++) {
        const o = k.alloc(nH * hd);
        k.attention(o, copy(k, q.subarray(i * nH * hd, (i + 1) * nH * hd)), nH * hd, kv, pageTable, start + i, 1, dims);
        same(o, all1.subarray(i * nH * hd, (i + 1) * nH * hd), `query ${i} alone, ${label}`);
      }
    }
  });

  test('decode attention units: whole GQA groups unless threads would idle, then the largest divisor that feeds them', () => {
    assert.equal(decodeHeadsPerUnit(4, 2, 1), 4);
    assert.equal(decodeHeadsPerUnit(4, 2, 2), 4);
    assert.equal(decodeHeadsPerUnit(4, 2, 3), 2);
    assert.equal(decodeHeadsPerUnit(4, 2, 5), 1);
    assert.equal(decodeHeadsPerUnit(4, 2, 16), 1);
    assert.equal(decodeHeadsPerUnit(8, 2, 4), 4);
    assert.equal(decodeHeadsPerUnit(6, 1, 4), 1); // 6 heads on 4 threads: 6 units of 1 (2 would give 3)
    assert.equal(decodeHeadsPerUnit(6, 1, 3), 2);
    assert.equal(decodeHeadsPerUnit(1, 8, 2), 1);
  });

  test('moeRoute: row alone == row in batch', () => {
    const r = rng(24);
    const m = 7;
    const e = 33;
    const topK = 4;
    const logits = fill(k1, m * e, sym(r));
    const ids = k1.allocI32(m * topK);
    const w = k1.alloc(m * topK);
    k1.moeRoute(ids, w, logits, m, e, topK, true);
    for (let i = 0; i < m; i++) {
      const id1 = k1.allocI32(topK);
      const w1 = k1.alloc(topK);
      k1.moeRoute(id1, w1, logits.subarray(i * e, (i + 1) * e), 1, e, topK, true);
      same(id1, ids.subarray(i * topK, (i + 1) * topK), `ids row ${i}`);
      same(w1, w.subarray(i * topK, (i + 1) * topK), `weights row ${i}`);
    }
  });

  test('gdnRecurrent: T at once == T single steps == with scratch (states step by step); threads 1 == 2', () => {
    const r = rng(25);
    const t = 6;
    const { qkv, g, beta, s0 } = gdnInputs(r, t);
    // T at once, in place (threads 1)
    const sAll = copy(k1, s0);
    const oAll = k1.alloc(t * ov);
    k1.gdnRecurrent(oAll, qkv, g, beta, sAll, dims, t);
    // T single steps (threads 2), recording the state after each step
    const sStep = copy(k2, s0);
    const after: Float32Array[] = [];
    for (let i = 0; i < t; i++) {
      const o = k2.alloc(ov);
      k2.gdnRecurrent(o, copy(k2, qkv.subarray(i * width, (i + 1) * width)), copy(k2, g.subarray(i * 4, i * 4 + 4)),
        copy(k2, beta.subarray(i * 4, i * 4 + 4)), sStep, dims, 1);
      same(o, oAll.subarray(i * ov, (i + 1) * ov), `step ${i} output vs T at once`);
      after.push(Float32Array.from(sStep));
    }
    same(sStep, sAll, 'final state: single steps vs T at once');
    // with scratch (threads 2): committed state untouched, scratch[i] == state after step i
    const sCommitted = copy(k2, s0);
    const scratch = k2.alloc(t * ss);
    const oSc = k2.alloc(t * ov);
    k2.gdnRecurrent(oSc, copy(k2, qkv), copy(k2, g), copy(k2, beta), sCommitted, dims, t, scratch);
    same(oSc, oAll, 'outputs with scratch');
    same(sCommitted, s0, 'committed state');
    for (let i = 0; i < t; i++) same(scratch.subarray(i * ss, (i + 1) * ss), after[i]!, `scratch[${i}]`);
  });

  test('causalConv: T at once == T single steps == with scratch', () => {
    const r = rng(26);
    const c = 67;
    const t = 5;
    const w = weight(k1, 'bf16', c, 4, sym(r));
    const x = fill(k1, t * c, sym(r));
    const w0 = fill(k1, 3 * c, sym(r));
    const winAll = copy(k1, w0);
    const outAll = k1.alloc(t * c);
    k1.causalConv(outAll, x, winAll, w, t);
    const win = copy(k1, w0);
    const wins: Float32Array[] = [];
    for (let i = 0; i < t; i++) {
      const o = k1.alloc(c);
      k1.causalConv(o, x.subarray(i * c, (i + 1) * c), win, w, 1);
      same(o, outAll.subarray(i * c, (i + 1) * c), `step ${i}`);
      wins.push(Float32Array.from(win));
    }
    same(win, winAll, 'final window');
    const sc = k1.alloc(t * 3 * c);
    const o2 = k1.alloc(t * c);
    const wRead = copy(k1, w0);
    k1.causalConv(o2, x, wRead, w, t, sc);
    same(o2, outAll, 'outputs with scratch');
    for (let i = 0; i < t; i++) same(sc.subarray(i * 3 * c, (i + 1) * 3 * c), wins[i]!, `scratch window ${i}`);
  });
});

describe('chunked == recurrent', () => {
  test('gdnChunked: one call == calls split at absolute multiples of 64 (bit-exact), threads 1 == 2', () => {
    const r = rng(28);
    const t = 200;
    const pos0 = 23; // chunks [23, 64) [64, 128) [128, 192) [192, 223)
    const { qkv, g, beta, s0 } = gdnInputs(r, t);
    const sOne = copy(k1, s0);
    const oOne = k1.alloc(t * ov);
    k1.gdnChunked(oOne, qkv, g, beta, sOne, dims, t, pos0);
    const s2 = copy(k2, s0);
    const o2 = k2.alloc(t * ov);
    k2.gdnChunked(o2, copy(k2, qkv), copy(k2, g), copy(k2, beta), s2, dims, t, pos0);
    same(o2, oOne, 'threads 1 vs 2');
    same(s2, sOne, 'state threads 1 vs 2');
    const sSplit = copy(k2, s0);
    for (const [a, b] of [[0, 41], [41, 105], [105, 200]] as const) {
      const o = k2.alloc((b - a) * ov);
      k2.gdnChunked(o, copy(k2, qkv.subarray(a * width, b * width)), copy(k2, g.subarray(a * 4, b * 4)),
        copy(k2, beta.subarray(a * 4, b * 4)), sSplit, dims, b - a, pos0 + a);
      same(o, oOne.subarray(a * ov, b * ov), `tokens ${a}..${b}`);
    }
    same(sSplit, sOne, 'state after split calls');
  });

  test('gdnChunked ≈ gdnRecurrent within 1e-5 (T = 150: two full chunks and a tail)', () => {
    const r = rng(27);
    const t = 150;
    const { qkv, g, beta, s0 } = gdnInputs(r, t);
    const sR = copy(k2, s0);
    const sC = copy(k2, s0);
    const oR = k2.alloc(t * ov);
    const oC = k2.alloc(t * ov);
    k2.gdnRecurrent(oR, qkv, g, beta, sR, dims, t);
    k2.gdnChunked(oC, qkv, g, beta, sC, dims, t);
    const err = (a: Float32Array, b: Float32Array): number => {
      let d = 0;
      let m = 0;
      for (let i = 0; i < a.length; i++) {
        d = Math.max(d, Math.abs(a[i]! - b[i]!));
        m = Math.max(m, Math.abs(b[i]!));
      }
      return d / m;
    };
    assert.ok(err(oC, oR) <= 1e-5, `outputs: ${err(oC, oR)}`);
    assert.ok(err(sC, sR) <= 1e-5, `state: ${err(sC, sR)}`);
  });
});
