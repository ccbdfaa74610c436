// The typed kernel boundary (docs/ARCHITECTURE.md): the data-movement ops agree between
// backends; the whole forward (decoder stack, LM head, MTP head, MoE) runs on a backend
// whose tensors are opaque handles and gives the same bits as on plain arrays; and the
// engine gives the same tokens when the backend's step read-back is asynchronous.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Kernels, Tensor } from '../src/kernels/types.js';
import { createRefKernels } from '../src/kernels/ref/index.js';
import { ScratchRows, StepArena } from '../src/model/arena.js';
import { forwardHidden, lmHead, mtpForward, readNow } from '../src/model/forward.js';
import { allocSequenceMemory, loadModel, type Model } from '../src/model/model.js';
import { withEngine, runAll, sameBits } from './engine-helpers.js';
import { asyncReadBack, opaqueKernels } from './opaque-kernels.js';
import { randomWeight, rng } from './numeric.js';
import { sharedPath, TINY_THINK } from './paths.js';
import { wasmBackendsUnderTest } from './wasm-backends.js';

const backends = await wasmBackendsUnderTest();
const ref = createRefKernels();

function filled(k: Kernels, n: number, r: () => number): Float32Array {
  const a = k.alloc(n);
  for (let i = 0; i < n; i++) a[i] = r();
  return a;
}

for (const { label, k } of backends) {
  test(`[${label}] data movement and MoE mixing == ref, bit for bit`, () => {
    const r = rng(11);
    const src = Float32Array.from({ length: 7 * 13 }, () => r() * 2 - 1);
    for (const kk of [k, ref]) {
      // strided copy: 5 rows of width 3 from stride 13 (offset 2) into stride 4 (offset 1)
      const dst = kk.alloc(24);
      kk.copyRows(dst, 1, 4, kk.view(filled(kk, src.length, (() => { let i = 0; return () => src[i++]!; })()), 0, src.length), 2, 13, 5, 3);
      for (let row = 0; row < 5; row++) for (let j = 0; j < 3; j++) assert.equal(dst[1 + row * 4 + j], src[2 + row * 13 + j]);
      const g = kk.alloc(3 * 13);
      kk.gatherRows(g, kk.view(filled(kk, src.length, (() => { let i = 0; return () => src[i++]!; })()), 0, src.length), [6, 0, 6], 13);
      assert.deepEqual(Array.from(g.subarray(0, 13)), Array.from(src.subarray(78, 91)));
      kk.write(g, 13, [1.5, -2]);
      assert.deepEqual(Array.from(g.subarray(13, 15)), [1.5, -2]);
      assert.throws(() => kk.view(g, 30, 10), RangeError);
    }
    // moeExperts + addSigmoidScaled: 5 rows, 4 experts, top-2, H = 16, Ie = 24
    const m = 5;
    const h = 16;
    const ie = 24;
    const topK = 2;
    const run = (kk: Kernels): Float32Array => {
      const wr = rng(5);
      const experts = Array.from({ length: 4 }, () => ({
        gate: kk.packWeight(randomWeight(kk, 'bf16', ie, h, wr)), up: kk.packWeight(randomWeight(kk, 'bf16', ie, h, wr)),
        down: kk.packWeight(randomWeight(kk, 'bf16', h, ie, wr)),
      }));
      const xr = rng(9);
      const x = filled(kk, m * h, () => xr() * 2 - 1);
      const ids = kk.allocI32(m * topK);
      ids.set([0, 3, 3, 1, 2, 0, 3, 2, 1, 0]);
      const w = filled(kk, m * topK, () => xr());
      const out = kk.alloc(m * h);
      kk.moeExperts(out, x, ids, w, m, topK, experts, {
        slot: kk.alloc(m * topK * h), rowsIn: kk.alloc(m * h), rowsOut: kk.alloc(m * h), gate: kk.alloc(m * ie), up: kk.alloc(m * ie),
      });
      kk.addSigmoidScaled(out, x, filled(kk, m, () => xr() * 4 - 2), m, h);
      return out.slice();
    };
    const want = run(ref);
    const got = run(k);
    const err = Math.max(...Array.from(got, (v, i) => Math.abs(v - want[i]!))) / Math.max(...Array.from(want, Math.abs));
    assert.ok(err <= 1e-5, `moeExperts rel err ${err}`); // its matmuls: f32 vs the ref's f64 accumulation
  });
}

test('step arena: every scratch field is its own allocation (no two overlap), rows(n) grows and keeps its width', () => {
  const model = loadModel(sharedPath('models', 'tiny-next-moe'), backends[0]!.k);
  const ws = new StepArena(model);
  const fields: { name: string; f: ScratchRows<Float32Array> }[] = [];
  const walk = (o: object, path: string): void => {
    for (const [key, v] of Object.entries(o)) {
      if (v instanceof ScratchRows) fields.push({ name: `${path}${key}`, f: v as ScratchRows<Float32Array> });
      else if (typeof v === 'object' && v !== null && Object.getPrototypeOf(v) === Object.prototype) walk(v as object, `${path}${key}.`);
    }
  };
  walk(ws, '');
  assert.ok(fields.length >= 40, `${fields.length} fields`);
  for (const n of [3, 40]) {
    const spans = fields.map(({ name, f }) => {
      const t = f.rows(n);
      assert.equal(t.length, n * f.width, name);
      return { name, buffer: t.buffer, lo: t.byteOffset, hi: t.byteOffset + t.byteLength };
    });
    for (const a of spans) {
      for (const b of spans) {
        if (a !== b && a.buffer === b.buffer) assert.ok(a.hi <= b.lo || b.hi <= a.lo, `${a.name} overlaps ${b.name} at ${n} rows`);
      }
    }
  }
});

/** Greedy decode of `prompt` for `n` tokens on `model` straight through the model layer
 * (prefill chunked, then one token per step), with the MTP logits after the prompt:
 * every logits row read back. */
function decodeDirect<T extends Tensor, I extends Tensor>(model: Model<T, I>, prompt: number[], n: number): Float32Array[] {
  const ws = new StepArena(model);
  const mem = allocSequenceMemory(model, prompt.length + n + 2);
  const seq = { pageTable: mem.pageTable, kv: mem.kv, state: mem.state };
  const fw = forwardHidden(model, ws, [{ ...seq, tokens: prompt, start: 0, chunked: true }]);
  const rows: Float32Array[] = [lmHead(model, ws, fw.hidden, [prompt.length - 1])];
  if (mem.mtpKv[0]) {
    const mtp = mtpForward(model, ws, [{ tokens: [...prompt.slice(1), 7], hidden: fw.hidden, start: 0, pageTable: mem.pageTable, kv: mem.mtpKv[0] }]);
    rows.push(lmHead(model, ws, mtp, [prompt.length - 1]));
  }
  const argmax = (v: Float32Array): number => v.reduce((b, x, i) => (x > v[b]! ? i : b), 0);
  let next = argmax(rows[0]!);
  for (let i = 0; i < n; i++) {
    const step = forwardHidden(model, ws, [{ ...seq, tokens: [next], start: prompt.length + i, chunked: false }]);
    const l = lmHead(model, ws, step.hidden, [0]);
    rows.push(l);
    next = argmax(l);
  }
  rows.push(readNow(model, mem.state[0]!.ssm, mem.state[0]!.ssm.length).slice());
  return rows;
}

for (const name of ['tiny-think', 'tiny-moe', 'tiny-next-moe']) {
  test(`${name}: the forward on opaque tensor handles == on plain arrays, bit for bit`, () => {
    const dir = sharedPath('models', name);
    const prompt = Array.from({ length: 70 }, (_, i) => (i * 37 + 11) % 500);
    const plain = decodeDirect(loadModel(dir, createRefKernels()), prompt, 4);
    const opaque = decodeDirect(loadModel(dir, opaqueKernels(createRefKernels())), prompt, 4);
    assert.equal(opaque.length, plain.length);
    plain.forEach((row, i) => assert.ok(sameBits(row, opaque[i]!), `${name}: row ${i} differs`));
  });
}

for (const specTokens of [0, 2]) test(`engine (spec tokens ${specTokens}): asynchronous read-backs give the same tokens and logits as synchronous ones`, async () => {
  const wasm = backends[1]!.k;
  const reqs = [
    { prompt: 'The capital of France is', maxTokens: 12 },
    { prompt: 'Count: one, two,', maxTokens: 9 },
    { messages: [{ role: 'user' as const, content: 'What is 2+3?' }], maxTokens: 10 },
  ];
  const run = (kernels: Kernels | ReturnType<typeof asyncReadBack>) =>
    withEngine({ model: TINY_THINK(), kernels, specTokens, specAdaptive: false, maxRunning: 4 }, (e) => runAll(e, reqs));
  const sync = await run(loadShared(wasm));
  const async = await run(asyncReadBack(loadShared(wasm)));
  assert.ok(sync.some((s) => s.ids.length > 3));
  sync.forEach((s, i) => {
    assert.deepEqual(async[i]!.ids, s.ids, `request ${i}`);
    s.logits.forEach((l, j) => assert.ok(sameBits(l, async[i]!.logits[j]!), `request ${i} step ${j}`));
  });
});

/** The shared backend, kept alive across engines (Engine.close disposes its kernels). */
function loadShared(k: Kernels): Kernels {
  return new Proxy(k, { get: (t, p) => (p === 'dispose' ? () => {} : (Reflect.get(t, p, t) as unknown)) });
}

after(() => ref.dispose());
