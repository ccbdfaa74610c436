// The model's scratch arena (model/arena.ts) bounded, reserved and counted by the memory plan:
// the plan's arena bytes equal a hand count of tiny-think's arena at k = 4, 8 running and
// 64-token prefill chunks (every field's rows × width); a budget the arena does not fit
// lowers the running requests or fails naming the arena; a field grown past its reservation
// hands the old buffer to Kernels.free; and a long mixed run on wasm (prefill chunks beside
// verify rows, batches of 1..8, whole-prompt prefix hits, MTP k = 4; dense and MoE models) allocates and frees
// nothing in the arena after engine start, its bytes within the plan — the frees counted
// through a wrapper of the kernels' alloc / allocI32 / free. The draft logits rows are as wide
// as the draft head (--draft-vocab): tiny-think at 512 ids, and the qwen3.5-0.8b shape's plan.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { formatPlan, memoryNeeds, planMemory } from '../src/engine/memory-plan.js';
import type { Engine } from '../src/engine/engine.js';
import type { GenerateRequest } from '../src/engine/request-builder.js';
import { type ArenaModel, arenaBytes, ScratchRows, type StepArena } from '../src/model/arena.js';
import { SHAPES } from '../src/tools/model-shapes.js';
import { createWasmKernels } from '../src/kernels/wasm/index.js';
import type { AnyKernels, Tensor } from '../src/kernels/types.js';
import type { MemorySet } from '../src/kernels/wasm/memory.js';
import { DraftPassMemory } from '../src/engine/draft-memory.js';
import { withEngine } from './engine-helpers.js';
import { sharedPath, TINY_NEXT_MOE, TINY_THINK } from './paths.js';

const LIMITS = { maxRunning: 8, specTokens: 4, maxPrefillTokens: 64, prefixCache: true };

/** tiny-think's arena bytes at n running, k = 4, 64-token chunks, by hand from its config
 * (hidden 256, intermediate 768, vocab 1024; GDN: 2 key heads × 64, 4 value heads × 64;
 * attention: 4 heads, 2 KV heads, head dim 64, output gate; one MTP layer, full attention);
 * the draft logits rows `draft` wide (the engine's: --draft-vocab capped at the tokenizer's 1000 ids). */
function handBytes(n: number, draft = 1000): number {
  const step = 64 + n * 5; // the prefill chunk + 1 + k tokens a request
  const mtp = step + n; // + the position before a prefix hit, a request
  const logits = n * 5;
  const gdn = 2 * 512 + 2 * 256 + 4 * 4; // qkv, conv [convDim 512]; z, o [256]; a, b, g, beta [4]
  const attn = 512 + 128 + 128 + 256 + 256 + 256; // qg, k, v, o, q, gate
  const mlp = 2 * 768;
  const mtpHead = 512 + 4 * 256; // cat, e, h, x, out
  const rows =
    step * 256 * 2 + // x, hidden (main stack only)
    mtp * 256 * 2 + // normed, mixed (the MTP layer too)
    step * gdn + // linear layers: main stack only
    mtp * (attn + mlp + mtpHead) + // full attention and dense MLP: main and MTP layers
    logits * 256 + logits * 1024 + // lm_head input rows, the step's logits
    (n + 1) * 256 + n * 1024 + // prefix hits' hidden (+ the deepstack row) and logits
    n * draft + n * 256; // draft logits and draft hidden rows
  return 4 * rows;
}

/** The engine's arena (the runner's; private, read here only). */
function arenaOf(e: Engine): StepArena<Tensor, Tensor> {
  return (e as unknown as { runner: { ws: StepArena<Tensor, Tensor> } }).runner.ws;
}

/** Counts the kernels' allocations and frees until `stop`. */
function countAllocs(k: AnyKernels): { allocs: number; frees: number; freed: Set<Tensor>; stop: () => void } {
  const { alloc, allocI32 } = k;
  const free = k.free;
  const c = { allocs: 0, frees: 0, freed: new Set<Tensor>(), stop: () => { Object.assign(k, { alloc, allocI32, free }); } };
  k.alloc = (n: number) => { c.allocs++; return alloc.call(k, n); };
  k.allocI32 = (n: number) => { c.allocs++; return allocI32.call(k, n); };
  k.free = (t: Tensor) => { c.frees++; c.freed.add(t); free?.call(k, t); };
  return c;
}

/** Deterministic prompt ids of `len` tokens (ids below the special tokens). */
function promptOf(len: number, seed: number): number[] {
  let s = seed * 2654435761 >>> 0;
  return Array.from({ length: len }, () => (s = (s * 1103515245 + 12345) >>> 0) % 900 + 10);
}

test('the plan counts the arena at its bound: tiny-think, k = 4, 8 running, 64-token chunks, by hand', async () => {
  await withEngine({ model: TINY_THINK(), kernels: 'wasm', specAdaptive: false, kvCacheTokens: 4096, maxContext: 1024, ...LIMITS }, async (e) => {
    const cfg = e.model.config;
    // the hand count's assumptions about the model
    const mlp0 = e.model.weights.layers[0]!.mlp;
    assert.deepEqual([cfg.hiddenSize, mlp0.kind === 'dense' ? mlp0.gate.rows : 0, cfg.vocabSize, e.model.weights.lmHead.rows], [256, 768, 1024, 1024]);
    assert.deepEqual([cfg.linNumKeyHeads, cfg.linKeyDim, cfg.linNumValueHeads, cfg.linValueDim], [2, 64, 4, 64]);
    assert.deepEqual([cfg.numHeads, cfg.numKvHeads, cfg.headDim, cfg.attnOutputGate !== false], [4, 2, 64, true]);
    const layers = [...e.model.weights.layers, ...e.model.weights.mtp.map((m) => m.layer)];
    assert.ok(layers.every((l) => l.mlp.kind === 'dense' && (l.mixer.kind === 'full' || l.mixer.outProjHeadOrder === undefined)));
    assert.deepEqual(e.model.weights.mtp.map((m) => m.layer.mixer.kind), ['full']);
    const plan = e.memoryPlan!;
    assert.equal(plan.maxRunning, 8);
    assert.equal(plan.arenaBytes, handBytes(8), 'the plan holds the arena at its bound');
    assert.match(formatPlan(plan), /model scratch arena/);
    const pools = plan.kvBytes + plan.runningStateBytes + plan.cacheStateBytes + plan.scratchBytes + plan.draftBytes + plan.arenaBytes;
    assert.ok(pools <= plan.budgetBytes);
    // the needs: the prefill chunk's part, and each running request's
    const needs = memoryNeeds(e.model, 4, null, { maxPrefillTokens: 64, prefixCache: true, draftVocab: 1000 });
    assert.equal(needs.arenaFixedBytes, handBytes(0));
    assert.equal(needs.arenaRowBytes, handBytes(1) - handBytes(0));
    assert.equal(arenaOf(e).stats.bytes, handBytes(8), 'reserved at engine start (wasm: no binding cap)');
    console.log(JSON.stringify({ arenaBytes: plan.arenaBytes, fixed: needs.arenaFixedBytes, perRunning: needs.arenaRowBytes, allocs: arenaOf(e).stats.allocs }));

    // a budget the arena does not fit: fewer running requests by default, an error naming it with --max-running
    const without = { ...needs, arenaFixedBytes: 0, arenaRowBytes: 0 };
    const kvMin = 16 * 2 * needs.kvBytesPerToken;
    const runningWithout = 17 * needs.slotBytes + 16 * needs.scratchRowBytes;
    const budget = { bytes: 2 * runningWithout + kvMin + 1 };
    assert.equal(planMemory(without, { prefixCache: false, pageSize: 16, budget }, 0).maxRunning, 16);
    const tight = planMemory(needs, { prefixCache: false, pageSize: 16, budget }, 0);
    assert.ok(tight.maxRunning < 16, `${tight.maxRunning} running beside the arena`);
    assert.equal(tight.arenaBytes, handBytes(tight.maxRunning));
    assert.ok(tight.kvBytes + tight.runningStateBytes + tight.scratchBytes + tight.arenaBytes <= budget.bytes);
    const exact = { bytes: runningWithout + kvMin + 1 }; // 16 running fit only without the arena
    assert.equal(planMemory(without, { prefixCache: false, pageSize: 16, budget: exact, maxRunning: 16 }, 0).maxRunning, 16);
    assert.throws(() => planMemory(needs, { prefixCache: false, pageSize: 16, budget: exact, maxRunning: 16 }, 0),
      /cannot hold 16 running request\(s\).*model scratch arena/);
  });
});

/** The parts of a loaded qwen3.5-0.8b-shaped model the arena reads (sizes only: nothing is
 * allocated): its layers' kinds and widths, the MTP layer, the lm_head's rows. */
function shapeOnly(k: AnyKernels): ArenaModel<Tensor, Tensor> {
  const s = SHAPES['qwen3.5-0.8b']!;
  const cfg = { hiddenSize: s.hidden, vocabSize: s.vocab, numHeads: s.heads, numKvHeads: s.kvHeads, headDim: s.headDim, attnOutputGate: true,
    linNumKeyHeads: s.linKeyHeads, linNumValueHeads: s.linValueHeads, linKeyDim: s.linKeyDim, linValueDim: s.linValueDim };
  const mlp = { kind: 'dense', gate: { rows: s.intermediate } };
  const full = { mixer: { kind: 'full', qProj: { rows: 2 * s.heads * s.headDim } }, mlp };
  const linear = { mixer: { kind: 'linear' }, mlp };
  const layers = Array.from({ length: s.layers }, (_, i) => ((i + 1) % s.fullAttentionInterval === 0 ? full : linear));
  return { kernels: k, config: cfg, weights: { layers, mtp: [{ layer: full }], lmHead: { rows: s.vocab } } } as unknown as ArenaModel<Tensor, Tensor>;
}

test('draft logits rows as wide as --draft-vocab: tiny-think at 512 ids (plan == reservation == hand count less the columns), the 0.8b shape', async () => {
  const opts = { model: TINY_THINK(), kernels: 'wasm' as const, specAdaptive: false, kvCacheTokens: 4096, maxContext: 1024, ...LIMITS, draftVocab: 512 };
  await withEngine(opts, async (e) => {
    const narrow = handBytes(8, 512);
    assert.equal(e.memoryPlan!.arenaBytes, narrow, 'the plan counts 512-wide draft rows');
    assert.equal(arenaOf(e).stats.bytes, narrow, 'reserved at that width');
    assert.equal(arenaOf(e).draftLogits.width, 512);
    const start = { ...arenaOf(e).stats };
    const done = await e.complete({ promptIds: promptOf(40, 3), maxTokens: 12, temperature: 0 });
    assert.equal(done.outputIds.length, 12);
    assert.ok(e.stats().spec.rounds > 0, 'MTP drafted over the narrow rows');
    assert.deepEqual(arenaOf(e).stats, start, 'and grew nothing');
    const full = memoryNeeds(e.model, 4, null, { maxPrefillTokens: 64, prefixCache: true });
    assert.equal(full.arenaRowBytes, handBytes(1, 1024) - handBytes(0, 1024), 'no draftVocab: the whole vocabulary (the width before)');
    console.log(JSON.stringify({ tinyThink: { before: handBytes(8, 1024), atDefault: handBytes(8), at512: narrow } }));
  });
  // the qwen3.5-0.8b shape at 16 running, k = 4, 512-token chunks: the default 32,768-id draft head
  const k = await createWasmKernels({ threads: 1 });
  try {
    const model = shapeOnly(k);
    const l = { maxRunning: 16, specTokens: 4, maxPrefillTokens: 512, prefixCache: true };
    const before = arenaBytes(model, l);
    const after = arenaBytes(model, { ...l, draftVocab: 32768 });
    assert.equal(before - after, 16 * (248320 - 32768) * 4, '16 draft rows of 215,552 fewer columns');
    assert.equal(arenaBytes(model, { ...l, draftVocab: 10 ** 6 }), before, 'capped at the vocabulary');
    assert.throws(() => arenaBytes(model, { ...l, draftVocab: 0 }), /a 0-column draft head/);
    console.log(JSON.stringify({ qwen35_08b: { before, after, savedMB: (before - after) / 1e6 } }));
  } finally {
    k.dispose();
  }
});

test('a field grown past its reservation hands the old buffer to Kernels.free', async () => {
  const k = await createWasmKernels({ threads: 1 });
  try {
    const stats = { allocs: 0, frees: 0, bytes: 0 };
    const count = countAllocs(k);
    const rows = new ScratchRows(k, 8, stats);
    const first = rows.atLeast(4);
    assert.equal(rows.rows(3).length, 24);
    assert.equal(rows.atLeast(4), first, 'within its rows: the same buffer');
    assert.equal(count.allocs, 1);
    rows.rows(9);
    assert.equal(count.frees, 1);
    assert.ok(count.freed.has(first), 'the replaced buffer freed');
    assert.deepEqual(stats, { allocs: 2, frees: 1, bytes: 4 * 9 * 8 });
    count.stop();
  } finally {
    k.dispose();
  }
});

/** The wasm backend's memory (its arenas), read here only. */
function wasmMemory(k: AnyKernels): MemorySet {
  return (k as unknown as { mem: MemorySet }).mem;
}

test('wasm Kernels.free: a replaced arena field\'s and draft buffer\'s memory is reused, zeroed; the top stays', async () => {
  const k = await createWasmKernels({ threads: 1 });
  try {
    const arena = wasmMemory(k).arenas[0]!;
    const stats = { allocs: 0, frees: 0, bytes: 0 };
    const rows = new ScratchRows(k, 256, stats);
    const first = rows.atLeast(64); // 64 KiB
    first.fill(7);
    k.alloc(16); // something after it (a freed top block would just lower the top)
    rows.atLeast(128); // grown: the first buffer freed, a new one bumped above
    const top = arena.usedBytes;
    assert.equal(arena.freeBytes, 64 * 256 * 4, 'the replaced buffer is on the free list');
    const next = k.alloc(64 * 256);
    assert.equal(next.byteOffset, first.byteOffset, 'the next allocation it holds takes its bytes');
    assert.ok(next.every((x) => x === 0), 'zeroed, as alloc() hands out');
    assert.equal(arena.usedBytes, top, 'the memory\'s top did not move');
    assert.equal(arena.freeBytes, 0);
    // a draft-pass buffer grown past its reservation, the same
    const mem = new DraftPassMemory(k, 1000);
    const small = mem.logitsRows(4) as Float32Array;
    k.alloc(16);
    mem.logitsRows(8);
    const top2 = arena.usedBytes;
    assert.equal(k.allocI32(4 * 1000).byteOffset, small.byteOffset, 'the replaced logits buffer reused');
    assert.equal(arena.usedBytes, top2);
    // frees merge; a block ending at the top lowers it; views and double frees are refused
    const [a, b, c] = [k.alloc(100), k.alloc(100), k.alloc(100)];
    const end = arena.usedBytes;
    assert.throws(() => k.free!(k.view(a, 16, 16)), /starts no live allocation/);
    assert.throws(() => k.free!(k.view(a, 0, 50)), /a view of a 448-byte allocation/);
    k.free!(a);
    assert.throws(() => k.free!(a), /freed twice/);
    k.free!(b);
    assert.equal(arena.freeBytes, 2 * 448, 'a and b merged');
    assert.equal(k.alloc(200).byteOffset, a.byteOffset, '800 bytes fit the merged block');
    k.free!(c);
    assert.ok(arena.usedBytes < end, 'c ended at the top: the top came down');
  } finally {
    k.dispose();
  }
});

// dense (tiny-think) and MoE with shared experts (tiny-moe, tiny-next-moe: routed ids, expert rows)
for (const [name, model] of [['tiny-think', TINY_THINK], ['tiny-moe', () => sharedPath('models', 'tiny-moe')], ['tiny-next-moe', TINY_NEXT_MOE]] as const) {
test(`wasm, ${name}, a long mixed run (prefill chunks, batches of 1..8, prefix hits, MTP k = 4): the arena allocates and frees nothing after start`, async () => {
  const opts = { model: model(), kernels: 'wasm' as const, specAdaptive: false, kvCacheTokens: 4096, maxContext: 1024, ...LIMITS };
  await withEngine(opts, async (e) => {
    const plan = e.memoryPlan!;
    const arena = arenaOf(e);
    const start = { ...arena.stats };
    assert.ok(start.bytes > 0 && start.bytes <= plan.arenaBytes, `held ${start.bytes} within the plan's ${plan.arenaBytes}`);
    const count = countAllocs(e.model.kernels);
    const steps0 = e.stats().steps;
    let generated = 0;
    try {
      for (let b = 1; b <= 8; b++) {
        // lengths from a few tokens to several 64-token chunks, so chunks run beside verify rows
        const reqs: GenerateRequest[] = Array.from({ length: b }, (_, i) => ({
          promptIds: promptOf(5 + ((b * 37 + i * 53) % 180), b * 10 + i), maxTokens: 6 + ((b + i) % 9), temperature: 0,
        }));
        // the first of each batch again after it: a whole-prompt prefix hit
        const again = { ...reqs[0]!, maxTokens: 4 };
        const done = await Promise.all([...reqs, again].map((r) => e.complete(r)));
        generated += done.reduce((n, d) => n + d.outputIds.length, 0);
      }
    } finally {
      count.stop();
    }
    const steps = e.stats().steps;
    assert.ok(steps.verify - steps0.verify > 10 && steps.prefill - steps0.prefill > 8, JSON.stringify(steps));
    assert.ok(e.stats().spec.rounds > 0, 'MTP drafted');
    const prefix = e.stats().prefixCache!;
    assert.ok(prefix.hitRequests > 0, 'prompts hit the prefix cache');
    assert.deepEqual(arena.stats, start, 'the arena allocated and freed nothing during the run');
    assert.ok(arena.stats.bytes <= plan.arenaBytes);
    console.log(JSON.stringify({ name, generated, steps, hits: prefix.hitRequests, reprefill: prefix.reprefillTokens, arena: arena.stats, planArenaBytes: plan.arenaBytes, runAllocs: count.allocs, runFrees: count.frees }));
  });
});
}
