// Device memory of MTP draft passes on webgpu (lavapipe; engine/draft-memory.ts): Kernels.free
// destroys a buffer once the work recorded before it has run (the next read-back), and an
// engine whose sampled and penalised draft passes run on the device (its default) reserves
// their buffers in the memory plan, allocates them at start, and a sampled + penalised run
// allocates none — counted through a wrapper of the kernels — its ids the wasm host path's with
// a request whose candidate rows are refused (recomputed from kept hidden rows into the one
// draft logits buffer); Kernels.stage copies a range as it is when recorded, delivered by the
// next read-back. Few tokens: lavapipe costs
// ~0.25 CPU-s a step.
import { before, test } from 'node:test';
import assert from 'node:assert/strict';
import { draftPassBytes, draftPassMemory, draftRowBytes } from '../src/engine/draft-memory.js';
import { MAX_DRAW_CANDIDATES } from '../src/kernels/candidate-draws.js';
import type { WebGpuBoundaryKernels } from '../src/kernels/webgpu/kernels.js';
import type { Tensor } from '../src/kernels/types.js';
import { withEngine } from './engine-helpers.js';
import { TINY_THINK } from './paths.js';
import { webgpuEngineKernels } from './webgpu-helpers.js';
import { DRAW_CASES, drawRequests, runDraws } from './sampled-draw-cases.js';

before(webgpuEngineKernels);

// rejection sampling: a seeded request's chain is matched under 'auto', and a matched chain's rows are
// neither read back nor replayed (the refused rows recomputed here are the replay's)
const base = { kernels: 'webgpu' as const, specTokens: 3, specAdaptive: false, kvCacheTokens: 2048, maxContext: 1024, prefixCache: false, maxRunning: 8, specSampling: 'rejection' as const };

// a min-p the candidates cannot hold: its rows refused, recomputed from kept hidden rows into the one logits buffer
const reqs = [...drawRequests(DRAW_CASES.qwen, 8, 2), { ...drawRequests(DRAW_CASES.hot, 8, 1)[0]!, temperature: 0, repetitionPenalty: 1.3 },
  { ...drawRequests({ temperature: 2, minP: 1e-6 }, 8, 1)[0]!, seed: 77 }];

test('webgpu: the plan reserves the draft buffers, they are allocated at start, and a sampled + penalised MTP run allocates none (refused rows recomputed: ids == wasm host path); free destroys after the next read-back', async () => {
  const host = { ...base, kernels: 'wasm' as const, model: TINY_THINK(), sampledCandidates: false, sampledChain: false, penaltyChain: false };
  const want = await withEngine(host, (e) => runDraws(e, reqs));
  await withEngine({ ...base, model: TINY_THINK() }, async (e) => {
    const k = e.model.kernels;
    const g = (k as unknown as WebGpuBoundaryKernels).g;
    const plan = e.memoryPlan!;
    const h = e.model.config.hiddenSize;
    // the draft head's width: --draft-vocab capped at the model's and the tokenizer's ids
    const v = Math.min(32768, e.info.sampleVocab);
    assert.equal(plan.draftBytes, 8 * draftRowBytes(3, v, h, plan.maxContext), 'the plan reserves 8 chains of 3 drafts');
    const mem = draftPassMemory(k, v);
    assert.equal(mem.stats.bytes, draftPassBytes({ batch: 8, k: 3, vocab: v, hidden: h, candidates: MAX_DRAW_CANDIDATES, context: e.maxContext }), 'allocated at start');
    assert.ok(mem.stats.bytes <= plan.draftBytes);
    const start = { ...mem.stats };
    let allocs = 0;
    const { alloc, allocI32 } = k;
    k.alloc = (n: number) => { allocs++; return alloc.call(k, n); };
    k.allocI32 = (n: number) => { allocs++; return allocI32.call(k, n); };
    let r;
    try {
      r = await runDraws(e, reqs);
    } finally {
      Object.assign(k, { alloc, allocI32 });
    }
    assert.ok(r.sampled.rounds > 0, 'sampled rounds on the device');
    assert.ok(r.sampled.refused > 0 && r.sampled.refusedReads <= r.sampled.passes, `refused rows ${r.sampled.refused}`);
    assert.deepEqual(r.ids, want.ids, 'ids == the wasm host path (refused rows recomputed bit for bit)');
    assert.deepEqual(mem.stats, start, 'the draft passes allocated nothing');
    // free: the buffer stays until the next read-back (recorded work may read it), then is destroyed
    const before = g.alloc.bytes;
    const t: Tensor = k.alloc(1 << 16);
    assert.equal(g.alloc.bytes, before + 4 * (1 << 16));
    k.fill(t, 0, 1 << 16, 3);
    k.free!(t);
    assert.equal(g.alloc.bytes, before + 4 * (1 << 16), 'kept until the read-back');
    const [back] = await k.readBack([{ t, offset: 5, length: 1 }]);
    assert.equal(back![0], 3, 'work recorded before free ran on the buffer');
    assert.equal(g.alloc.bytes, before, 'destroyed after the read-back');
    // stage: a copy recorded in order (later work overwrites the tensor), mapped by the next
    // read-back — one transfer, its bytes counted there — and no device buffer holds it
    const c = (k as unknown as WebGpuBoundaryKernels).counters;
    const s0 = { steps: c.steps, bytes: c.readBackBytes, held: g.alloc.bytes };
    const u: Tensor = k.alloc(8);
    k.write(u, 0, [1, 2, 3, 4, 5, 6, 7, 8]);
    const staged = k.stage([{ t: u, offset: 2, length: 2 }, { t: u, offset: 7, length: 1 }]);
    k.fill(u, 0, 8, 9);
    assert.equal(staged.data, null, 'not before the read-back');
    const [now] = await k.readBack([{ t: u, offset: 0, length: 1 }]);
    assert.deepEqual([...now!], [9]);
    assert.deepEqual(staged.data!.map((d) => [...d]), [[3, 4], [8]], 'the values as they were when staged');
    assert.deepEqual([c.steps - s0.steps, c.readBackBytes - s0.bytes, g.alloc.bytes - s0.held], [1, 4 * 4, 4 * 8], 'one read-back of 4 values; only the tensor held');
    console.log(JSON.stringify({ planDraftBytes: plan.draftBytes, draftBytes: mem.stats.bytes, rounds: r.sampled.rounds, refused: r.sampled.refused,
      refusedReads: r.sampled.refusedReads, otherAllocsInRun: allocs }));
  });
});
