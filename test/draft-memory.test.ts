// Device memory of MTP draft passes (engine/draft-memory.ts): the memory plan reserves the
// buffers the sampled and penalised draft passes use (a plan for k = 4, batch 16 on the
// qwen3.5-0.8b shape's vocabulary reports them, and a budget that cannot hold them lowers the
// running requests); a buffer grown past its reservation gives the old one to Kernels.free;
// and a long run of sampled and penalised MTP chains (forced on, wasm) allocates every
// draft-pass byte at engine start, within the plan, and nothing during the run — counted
// through a wrapper of the kernels' alloc / allocI32 / free. One draft logits buffer serves a
// pass: rows read whole are staged at their step (Kernels.stage: a copy as of then, delivered
// by the next read-back), refused rows recomputed from kept hidden rows — a pass refusing more
// rows than the buffer holds still reads them in one read-back, ids == the host path.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { formatPlan, type MemoryNeeds, planMemory } from '../src/engine/memory-plan.js';
import { DraftPassMemory, type DraftPassShape, draftPassBytes, draftPassElems, draftPassMemory, draftRowBytes, penaltyTableBound } from '../src/engine/draft-memory.js';
import { MAX_DRAW_CANDIDATES } from '../src/kernels/candidate-draws.js';
import { createWasmKernels } from '../src/kernels/wasm/index.js';
import { createRefKernels } from '../src/kernels/ref/index.js';
import type { AnyKernels, Tensor } from '../src/kernels/types.js';
import { SHAPES } from '../src/tools/model-shapes.js';
import { withEngine } from './engine-helpers.js';
import { TINY_THINK } from './paths.js';
import { DRAW_CASES, drawRequests, runDraws } from './sampled-draw-cases.js';
import { GROWTH_ENGINE, growthRequests, WIDE_BIAS } from './penalty-growth-cases.js';

const SHAPE = SHAPES['qwen3.5-0.8b']!;
const MB = 1e6;

/** The plan's needs of a small hybrid model with the 0.8b shape's head (k = 4 verify scratch). */
function needs(draftRow: (context: number) => number): MemoryNeeds {
  const slot = 2 * MB;
  return {
    weightBytes: 1.5e9, kvBytesPerToken: 7 * 2 * 512 * 4, kvLayerBytesPerToken: 2 * 512 * 4,
    slotBytes: slot, scratchRowBytes: 5 * slot, draftRowBytes: draftRow, modelMaxContext: 262144,
  };
}

const rowAt = (k: number, vocab: number) => (context: number) => draftRowBytes(k, vocab, SHAPE.hidden, context);

test('the plan reserves the draft-pass buffers: k = 4, 16 running, the 0.8b shape (hidden 1024, 248,320 ids), penalty values bounded by the context', () => {
  assert.equal(SHAPE.vocab, 248320);
  assert.equal(SHAPE.hidden, 1024);
  for (const vocab of [32768, SHAPE.vocab]) {
    for (const context of [4096, 32768]) {
      const shape: DraftPassShape = { batch: 16, k: 4, vocab, hidden: SHAPE.hidden, candidates: MAX_DRAW_CANDIDATES, context };
      // the header's table by hand: logits ONE [16, V]; candidates 2 × 4·16·c (c = MAX_DRAW_CANDIDATES); ids 2·4·16;
      // kept hidden rows 10·16·1024; penalty values 4·16·(1 + T) + 16·6, T = min(V, C + 4) table ids a row
      const t = Math.min(vocab, context + 4);
      const vals = 4 * 16 * (1 + t) + 16 * 6;
      const want = 4 * (16 * vocab + 2 * 4 * 16 * MAX_DRAW_CANDIDATES + 2 * 4 * 16 + 10 * 16 * 1024 + vals);
      // before: penalty values 4·16·(1 + V + 4), whatever the context
      const before = want + 4 * (4 * 16 * (vocab + 5) - vals);
      assert.equal(draftPassElems(shape).vals, vals);
      assert.equal(draftPassBytes(shape), want);
      assert.equal(16 * draftRowBytes(4, vocab, SHAPE.hidden, context), want, 'linear in the batch');
      const plan = planMemory(needs(rowAt(4, vocab)), { prefixCache: true, pageSize: 16, maxRunning: 16, maxContext: context }, 64e9);
      assert.equal(plan.maxContext, context);
      assert.equal(plan.draftBytes, want, `draft buffers at V = ${vocab}, context ${context}`);
      assert.match(formatPlan(plan), /MTP draft buffers/);
      const pools = plan.kvBytes + plan.runningStateBytes + plan.cacheStateBytes + plan.scratchBytes + plan.draftBytes;
      assert.ok(pools <= plan.budgetBytes, `${pools} within ${plan.budgetBytes}`);
      const line = formatPlan(plan).match(/MTP draft buffers [^,]*/)![0];
      console.log(JSON.stringify({ vocab, context, draftBytes: plan.draftBytes, beforeBytes: before, savedBytes: before - plan.draftBytes, line,
        valsBytes: 4 * vals, valsBeforeBytes: 4 * 4 * 16 * (vocab + 5) }));
    }
  }
  // the bound: the context's ids and the drafts before a pass, at most the vocabulary
  assert.equal(penaltyTableBound(1000, 100, 4), 104);
  assert.equal(penaltyTableBound(1000, 4096, 4), 1000);
  assert.equal(draftPassElems({ batch: 16, k: 4, vocab: 32768, hidden: 1024, candidates: 256, context: 1 << 20 }).vals, 4 * 16 * 32769 + 16 * 6, 'at most V');
  assert.equal(draftRowBytes(0, SHAPE.vocab, SHAPE.hidden, 4096), 0, 'no speculation, no draft buffers');
});

test('the plan counts running requests at the context cap and reserves the draft buffers at the max context it settles on', () => {
  // a budget whose KV holds fewer tokens than the model's 262,144: the context settles lower
  const budget = { bytes: 2 * 1e9 };
  const plan = planMemory(needs(rowAt(4, SHAPE.vocab)), { prefixCache: false, pageSize: 16, maxRunning: 16, budget }, 0);
  assert.ok(plan.maxContext < 262144 && plan.maxContext < SHAPE.vocab, `context ${plan.maxContext}`);
  assert.equal(plan.draftBytes, 16 * draftRowBytes(4, SHAPE.vocab, SHAPE.hidden, plan.maxContext));
  assert.ok(plan.draftBytes < 16 * draftRowBytes(4, SHAPE.vocab, SHAPE.hidden, 262144), 'less than at the cap');
  const pools = plan.kvBytes + plan.runningStateBytes + plan.scratchBytes + plan.draftBytes;
  assert.ok(pools <= budget.bytes, `${pools} within ${budget.bytes}`);
});

test('a budget the draft buffers do not fit: fewer running requests by default, a clear error when --max-running is given', () => {
  const row = draftRowBytes(4, SHAPE.vocab, SHAPE.hidden, 262144);
  // 2 MB a slot, 10 MB of verify scratch and 5 MB of draft buffers a running request
  const budget = { bytes: 250 * MB };
  const without = planMemory(needs(() => 0), { prefixCache: false, pageSize: 16, budget }, 0);
  const withDrafts = planMemory(needs(() => row), { prefixCache: false, pageSize: 16, budget }, 0);
  assert.ok(withDrafts.maxRunning < without.maxRunning, `${withDrafts.maxRunning} < ${without.maxRunning} running`);
  assert.equal(withDrafts.draftBytes, withDrafts.maxRunning * row);
  assert.ok(withDrafts.kvBytes + withDrafts.runningStateBytes + withDrafts.scratchBytes + withDrafts.draftBytes <= budget.bytes);
  assert.equal(planMemory(needs(() => 0), { prefixCache: false, pageSize: 16, maxRunning: 16, budget }, 0).maxRunning, 16);
  assert.throws(() => planMemory(needs(() => row), { prefixCache: false, pageSize: 16, maxRunning: 16, budget }, 0),
    /cannot hold 16 running request\(s\).*MTP draft buffers/);
});

/** Counts allocations through the kernels (alloc, allocI32, free) until `stop`. */
function countAllocs(k: AnyKernels): { allocs: number; bytes: number; frees: number; stop: () => void } {
  const { alloc, allocI32 } = k;
  const free = k.free;
  const c = { allocs: 0, bytes: 0, frees: 0, stop: () => { Object.assign(k, { alloc, allocI32, free }); } };
  k.alloc = (n: number) => { c.allocs++; c.bytes += 4 * n; return alloc.call(k, n); };
  k.allocI32 = (n: number) => { c.allocs++; c.bytes += 4 * n; return allocI32.call(k, n); };
  k.free = (t: Tensor) => { c.frees++; c.bytes -= 4 * t.length; free?.call(k, t); };
  return c;
}

test('a buffer grown past its reservation hands the old one to Kernels.free; a reservation at the same shape allocates nothing', async () => {
  const k = await createWasmKernels({ threads: 1 });
  try {
    const shape = { batch: 2, k: 3, vocab: 100, hidden: 8, candidates: 16, context: 1000 };
    const count = countAllocs(k);
    const mem = new DraftPassMemory(k, 100);
    mem.reserve(shape);
    assert.equal(count.bytes, draftPassBytes(shape));
    assert.equal(mem.stats.bytes, draftPassBytes(shape));
    mem.reserve(shape);
    assert.equal(count.allocs, 6, 'ids, saved, vals, candidate ids and values, ONE logits buffer');
    mem.logitsRows(2);
    assert.equal(count.allocs, mem.stats.allocs, 'nothing new at the reserved shape');
    mem.logitsRows(5);
    assert.equal(count.frees, 1, 'the replaced logits buffer freed');
    assert.equal(count.bytes, draftPassBytes(shape) + 3 * 100 * 4);
    assert.equal(mem.stats.bytes, count.bytes);
    count.stop();
    // a backend's binding limit caps each reserved buffer (the plan's bytes stay an upper bound)
    const narrow = Object.create(k, { limits: { value: { ...k.limits, maxBindingBytes: 4 * 250 } } }) as AnyKernels;
    const capped = new DraftPassMemory(narrow, 100);
    capped.reserve(shape);
    assert.ok(capped.stats.bytes < draftPassBytes(shape), `${capped.stats.bytes} < ${draftPassBytes(shape)}`);
    assert.equal(capped.logitsRows(2), capped.logitsRows(2), 'two rows of 100 fit 250 elements');
    assert.equal(capped.stats.allocs, 6, 'nothing grown past the cap by the shape');
  } finally {
    k.dispose();
  }
});

// Sampled chains verified by rejection sampling (seeded requests are matched under 'auto', and a
// matched chain's rows are neither read back nor replayed): the replay's buffers are what is tested.
test('wasm, sampled and penalised MTP chains forced on: every draft-pass byte allocated at start, within the plan; a long run allocates none', async () => {
  const opts = { model: TINY_THINK(), kernels: 'wasm' as const, specAdaptive: false, kvCacheTokens: 4096, maxContext: 1024, prefixCache: false,
    maxRunning: 8, specTokens: 4, sampledCandidates: true, sampledChain: true, penaltyChain: true, specSampling: 'rejection' as const };
  await withEngine(opts, async (e) => {
    const plan = e.memoryPlan!;
    const v = Math.min(32768, e.info.sampleVocab);
    const mem = draftPassMemory(e.model.kernels, v);
    const h = e.model.config.hiddenSize;
    assert.equal(mem.stats.bytes, draftPassBytes({ batch: 8, k: 4, vocab: v, hidden: h, candidates: MAX_DRAW_CANDIDATES, context: e.maxContext }), 'reserved at start');
    assert.ok(plan.draftBytes > 0 && mem.stats.bytes <= plan.draftBytes, `held ${mem.stats.bytes} within the plan's ${plan.draftBytes}`);
    const start = { ...mem.stats };
    const count = countAllocs(e.model.kernels);
    const [a, b, c] = drawRequests(DRAW_CASES.hot, 48, 3);
    const mixed = [
      a!, { ...b!, ...DRAW_CASES.qwen },
      { ...c!, temperature: 0, repetitionPenalty: 1.3, presencePenalty: 0.5, frequencyPenalty: 0.3 },
      { ...a!, temperature: 0, seed: 3, logitsAdjust: { bias: new Map([[54, 2], [57, -4]]) } },
    ];
    // penalised greedy chains alone make draft-device.ts's penalised rounds (with sampled ones, its sampled rounds)
    const penalised = drawRequests({ temperature: 0, repetitionPenalty: 1.3, frequencyPenalty: 0.2 }, 48, 8);
    let rounds = 0;
    try {
      for (const reqs of [drawRequests(DRAW_CASES.qwen, 48, 8), mixed, penalised, drawRequests(DRAW_CASES.minP, 48, 8)]) {
        const r = await runDraws(e, reqs);
        rounds += r.sampled.rounds;
      }
    } finally {
      count.stop();
    }
    assert.ok(rounds >= 20, `${rounds} sampled rounds`);
    assert.ok(e.penaltyDrafts.rounds > 0, 'penalised chains drafted on the kernels too');
    assert.deepEqual(mem.stats, start, 'the draft passes allocated and freed nothing');
    assert.equal(count.frees, 0);
    console.log(JSON.stringify({ rounds, penaltyRounds: e.penaltyDrafts.rounds, draftBytes: mem.stats.bytes, planDraftBytes: plan.draftBytes,
      runAllocs: count.allocs, runAllocBytes: count.bytes }));
  });
});

for (const [name, make] of [['ref', async () => createRefKernels()], ['wasm', () => createWasmKernels({ threads: 1 })]] as const) {
  test(`${name}: Kernels.stage copies ranges as they are now; the next read-back delivers them with its own`, async () => {
    const k: AnyKernels = await make();
    try {
      const t = k.alloc(8);
      k.write(t, 0, [1, 2, 3, 4, 5, 6, 7, 8]);
      const staged = k.stage([{ t, offset: 2, length: 2 }, { t, offset: 7, length: 1 }]);
      k.fill(t, 0, 8, 9); // a later kernel overwrites the buffer
      const [now] = await k.readBack([{ t, offset: 0, length: 1 }]);
      assert.deepEqual([...now!], [9]);
      assert.deepEqual(staged.data!.map((d) => [...d]), [[3, 4], [8]]);
    } finally {
      k.dispose();
    }
  });
}

test('wasm MTP k = 4, 8 chains: every row refused (up to 4 × 8, the one logits buffer holds 8) or top-p alone (staged): ids and read-backs == host path\'s', async () => {
  const opts = { model: TINY_THINK(), kernels: 'wasm' as const, specAdaptive: false, kvCacheTokens: 4096, maxContext: 1024, prefixCache: false,
    maxRunning: 8, specTokens: 4, sampledCandidates: true, specSampling: 'rejection' as const };
  for (const sampling of [{ temperature: 2, minP: 1e-6 }, DRAW_CASES.topP]) {
    const reqs = drawRequests(sampling, 10, 8);
    const want = await withEngine({ ...opts, sampledChain: false }, (e) => runDraws(e, reqs));
    const got = await withEngine({ ...opts, sampledChain: true }, (e) => runDraws(e, reqs));
    assert.deepEqual(got.ids, want.ids, `${JSON.stringify(sampling)}: ids == host path`);
    const s = got.sampled;
    assert.ok(s.rounds > 0);
    assert.ok(s.refusedReads <= s.passes, 'at most one read of refused rows a pass');
    if ('minP' in sampling) {
      // the host path reads each draft step twice (candidates, then the refused rows); here one pass and one read of its refused rows
      assert.equal(want.reads - got.reads, 2 * s.steps - s.passes - s.refusedReads, `read-backs ${want.reads} → ${got.reads}`);
      assert.ok(s.refused > 8 * s.refusedReads, `${s.refused} refused rows in ${s.refusedReads} reads: some read carried more than the buffer's 8 rows`);
    } else {
      assert.equal(want.reads - got.reads, s.steps - s.passes, `read-backs ${want.reads} → ${got.reads}`);
      assert.equal(s.refused, 0, 'top-p alone: read whole, never refused');
    }
    console.log(JSON.stringify({ sampling, rounds: s.rounds, passes: s.passes, refused: s.refused, refusedReads: s.refusedReads, reads: got.reads, hostReads: want.reads }));
  }
});

test('wasm: biased chains whose tables pass the reserved bound (600 bias ids, context 128) grow the penalty values (doubling, each old buffer freed); ids == host path', async () => {
  const opts = { ...GROWTH_ENGINE, model: TINY_THINK(), kernels: 'wasm' as const, sampledCandidates: true, specSampling: 'rejection' as const };
  const reqs = growthRequests();
  const want = await withEngine({ ...opts, sampledChain: false, penaltyChain: false }, (e) => runDraws(e, reqs));
  await withEngine({ ...opts, sampledChain: true, penaltyChain: true }, async (e) => {
    const v = Math.min(32768, e.info.sampleVocab);
    const mem = draftPassMemory(e.model.kernels, v);
    const reserved = draftPassElems({ batch: 2, k: 4, vocab: v, hidden: e.model.config.hiddenSize, candidates: MAX_DRAW_CANDIDATES, context: 128 }).vals;
    assert.ok(penaltyTableBound(v, 128, 4) === 132 && WIDE_BIAS.size > 132, `the bias (${WIDE_BIAS.size} ids) passes the bound`);
    assert.equal(mem.vals.cap, reserved, 'reserved at the context bound');
    const start = { ...mem.stats };
    const got = await runDraws(e, reqs);
    assert.deepEqual(got.ids, want.ids, 'ids == host path');
    assert.ok(got.sampled.rounds > 0, 'the chains (a sampled one among them) drafted on the kernels');
    assert.ok(mem.vals.cap > reserved, `penalty values grew: ${reserved} → ${mem.vals.cap}`);
    assert.equal(mem.stats.allocs - start.allocs, mem.stats.frees - start.frees, 'each growth freed the buffer it replaced');
    const growths = mem.stats.allocs - start.allocs;
    assert.ok(growths > 0 && mem.vals.cap >= reserved * 2 ** growths, `${growths} growths, each at least doubling`);
    console.log(JSON.stringify({ reservedVals: reserved, grownVals: mem.vals.cap, growths, rounds: got.rounds }));
  });
});
