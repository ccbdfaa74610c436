// Commit semantics (docs/ARCHITECTURE.md "Recurrent state"): after every verify + commit, the working slot equals
// (bit for bit) the state of the same request decoded one accepted token at a time — conv
// window ending at the last accepted input — and trackSlot holds exactly the state after
// the tracked step. Verify writes only the row's scratch, never the working slot.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRefKernels } from '../src/kernels/ref/index.js';
import { loadModel } from '../src/model/model.js';
import { forwardHidden } from '../src/model/forward.js';
import { StepArena } from '../src/model/arena.js';
import { KvPool } from '../src/cache/kv-pool.js';
import { StatePool } from '../src/cache/state-pool.js';
import { commit } from '../src/engine/speculative/commit.js';
import { Rng } from '../src/util/rng.js';
import { TINY_THINK } from './paths.js';
import { sameBits } from './engine-helpers.js';

function snapshot(pool: StatePool, slot: number): Float32Array[] {
  return pool.view(slot).flatMap((v) => [v.conv.slice(), v.ssm.slice()]);
}

test('commit == one-by-one decode of the accepted tokens; trackSlot == state after trackStep', () => {
  const k = createRefKernels();
  const model = loadModel(TINY_THINK(), k);
  const ws = new StepArena(model);
  const layout = model.layout;
  const kv = new KvPool({ numPages: 40, pageSize: 16, kvDim: layout.kvDim, numLayers: layout.fullLayers.length, numMtpLayers: 0, alloc: (n) => k.alloc(n) });
  const kMax = 4;
  const pool = new StatePool({ slots: 4, numLinear: layout.linearLayers.length, convSize: layout.convSize, ssmSize: layout.ssmSize,
    batchCapacity: 3, maxSteps: kMax + 1, alloc: (n) => k.alloc(n) });
  const [a, b, track] = [pool.alloc()!, pool.alloc()!, pool.alloc()!];
  const pagesA = kv.alloc(18)!;
  const pagesB = kv.alloc(18)!;
  const rng = new Rng(5);
  const prompt = Array.from({ length: 37 }, () => Math.floor(rng.next() * 990));
  const seq = (slot: number, pages: number[], tokens: number[], start: number, chunked: boolean, scratch: ReturnType<StatePool['scratch']> | null = null) =>
    forwardHidden(model, ws, [{ tokens, start, pageTable: pages, kv: kv.layers, state: pool.view(slot), scratch, chunked }]);
  seq(a, pagesA, prompt, 0, true);
  seq(b, pagesB, prompt, 0, true);
  let len = prompt.length;
  for (let round = 0; round < 12; round++) {
    const steps = 1 + (round % kMax) + (round % 2); // 1..5 verify inputs
    const tokens = Array.from({ length: steps }, () => Math.floor(rng.next() * 990));
    const j = round % steps; // last accepted step, every position over the rounds
    const trackStep = (round * 7) % (j + 1);
    const row = round % 3; // any batch row's scratch works the same
    const before = snapshot(pool, a);
    seq(a, pagesA, tokens, len, false, pool.scratch(row, steps));
    snapshot(pool, a).forEach((x, i) => assert.ok(sameBits(x, before[i]!), 'verify must not write the working slot'));
    commit(pool, [{ row, slot: a, lastAcceptedStep: j, trackSlot: track, trackStep }]);
    let tracked: Float32Array[] | null = null;
    for (let i = 0; i <= j; i++) {
      seq(b, pagesB, [tokens[i]!], len + i, false);
      if (i === trackStep) tracked = snapshot(pool, b);
    }
    const sa = snapshot(pool, a);
    snapshot(pool, b).forEach((x, i) => assert.ok(sameBits(sa[i]!, x), `round ${round}: working state differs (part ${i})`));
    snapshot(pool, track).forEach((x, i) => assert.ok(sameBits(x, tracked![i]!), `round ${round}: track snapshot differs`));
    len += j + 1;
  }
  pool.checkIntegrity([a, b, track]);
});

test('commit skips steps < 0 and trackSlot 0', () => {
  const pool = new StatePool({ slots: 2, numLinear: 1, convSize: 2, ssmSize: 3, batchCapacity: 1, maxSteps: 2, alloc: (n) => new Float32Array(n) });
  const s = pool.alloc()!;
  pool.view(s)[0]!.ssm.set([1, 2, 3]);
  pool.scratch(0, 2)[0]!.ssm.set([9, 9, 9, 8, 8, 8]);
  commit(pool, [{ row: 0, slot: s, lastAcceptedStep: -1, trackSlot: 0, trackStep: 1 }]);
  assert.deepEqual([...pool.view(s)[0]!.ssm], [1, 2, 3]);
  commit(pool, [{ row: 0, slot: s, lastAcceptedStep: 1, trackSlot: 0, trackStep: 0 }]);
  assert.deepEqual([...pool.view(s)[0]!.ssm], [8, 8, 8]);
});
