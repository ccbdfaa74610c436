// CONSTRAINED GREEDY MTP chains (a JSON schema, temperature 0) drafted on the kernels
// (speculative/draft-device.ts maskReplayed: a pass's first pick under its mask, later picks
// unmasked, each kept by the replay only where the step's exact mask allows it, else a redraft
// from that step) == the per-step path (argmaxRowsMasked, a read-back per draft step; forced
// off), on the wasm engine (forced on): identical ids AND every proposal (the draftOverride
// hook) at k = 2, 3, 4, one request alone, three batched, and two with a sampled constrained
// chain (its rounds chain as sampled rounds, the greedy chains riding), and a penalised and a
// biased one (finished from gathered logits under the mask). Every read-back is a target step
// or a draft pass: 2 per round without a disagreement. The schema makes unmasked picks
// disallowed (disagreements > 0): skipping the mask check changes the proposals.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Engine } from '../src/engine/engine.js';
import type { Constraint } from '../src/constrain/constraint.js';
import type { ServerContext } from '../src/server/context.js';
import type { GenerateRequest } from '../src/engine/request-builder.js';
import { TokenTexts } from '../src/server/api/logprobs.js';
import { structuredConstraint } from '../src/server/api/structured.js';
import { withEngine } from './engine-helpers.js';
import { TINY_THINK } from './paths.js';
import { DRAW_CASES, drawRequests, runDraws, type DrawRun } from './sampled-draw-cases.js';
import { Rng } from '../src/util/rng.js';
import { createRefKernels } from '../src/kernels/ref/index.js';
import { unmaskedPickExact } from '../src/engine/speculative/draft-rules.js';

const opts = { kernels: 'wasm' as const, specAdaptive: false, kvCacheTokens: 2048, maxContext: 1024, prefixCache: false, maxRunning: 8, sampledCandidates: true };
const N = 24;
const SCHEMA = { type: 'object', properties: { n: { type: 'integer' }, s: { type: 'string', maxLength: 8 } }, required: ['n', 's'] };

function constraintFor(engine: Engine): Constraint {
  const ctx = { engine, texts: new TokenTexts(engine.tokenizer) } as unknown as ServerContext;
  return structuredConstraint(ctx, { kind: 'json_schema', name: 't', schema: SCHEMA }, null, false)!;
}

type Mix = 'alone' | 'batched' | 'mixed' | 'penalised';

/** Greedy requests under the schema (a fresh constraint each): one alone, three prompts
 * batched, two with a sampled (hot) one mixed (its rounds chain as sampled rounds), or a
 * penalised one and a biased one (finished from gathered logits, under the mask). */
function constrained(e: Engine, mix: Mix): GenerateRequest[] {
  const c = (r: GenerateRequest, bias: Map<number, number> | null = null): GenerateRequest => ({ ...r, logitsAdjust: { bias, constraint: constraintFor(e) } });
  if (mix === 'penalised') {
    const [a, b] = drawRequests({ temperature: 0 }, N, 2);
    return [c({ ...a!, repetitionPenalty: 1.3, presencePenalty: 0.5, frequencyPenalty: 0.3 }), c(b!, new Map([[54, 2.1], [57, -4], [125, 6]]))];
  }
  const greedy = drawRequests({ temperature: 0 }, N, { alone: 1, batched: 3, mixed: 2 }[mix]).map((r) => c(r));
  return mix === 'mixed' ? [...greedy, c({ ...drawRequests(DRAW_CASES.hot, N, 1)[0]!, seed: 1003 })] : greedy;
}

type Run = DrawRun & { drafts: number[][]; greedy: { rounds: number; passes: number; disagreements: number; ended: number } };

/** The run, every proposal in order ([committed length, ...drafts]), and the greedy rounds'
 * counters (DeviceDrafts.stats.penalised: rounds of greedy chains alone). */
async function run(k: number, on: boolean, mix: Mix, specRedrafts = k): Promise<Run> {
  const drafts: number[][] = [];
  const draftOverride = (req: { tokens: readonly number[] }, d: number[]): number[] => { drafts.push([req.tokens.length, ...d]); return d; };
  return withEngine({ ...opts, model: TINY_THINK(), specTokens: k, sampledChain: on, penaltyChain: on, specRedrafts, draftOverride }, async (e) => {
    const g0 = e.penaltyDrafts;
    const got = await runDraws(e, constrained(e, mix));
    const g1 = e.penaltyDrafts;
    return { ...got, drafts, greedy: { rounds: g1.rounds - g0.rounds, passes: g1.passes - g0.passes, disagreements: g1.disagreements - g0.disagreements, ended: g1.ended - g0.ended } };
  });
}

for (const k of [2, 3, 4]) {
  for (const mix of ['alone', 'batched', 'mixed', 'penalised'] as const) {
    test(`wasm MTP k = ${k}, ${mix}: JSON-schema greedy chains drafted on the kernels == the per-step path, 2 read-backs a clean round`, async () => {
      const off = await run(k, false, mix);
      const on = await run(k, true, mix);
      assert.deepEqual(on.ids, off.ids, 'ids == per-step path');
      assert.deepEqual(on.drafts, off.drafts, 'every proposal == the per-step path\'s');
      assert.ok(on.ids.every((ids) => ids.length > 0));
      const [g, s] = [on.greedy, on.sampled];
      assert.equal(off.greedy.rounds + off.sampled.rounds, 0, 'forced off: no chained round');
      assert.ok(g.rounds + s.rounds > 0, 'chained rounds');
      assert.ok(on.reads <= off.reads, `read-backs ${off.reads} → ${on.reads}`);
      if (mix === 'mixed') assert.ok(s.rounds > 0, 'sampled rounds, the greedy constrained chains riding');
      else {
        assert.ok(g.rounds > 0, 'greedy chained rounds');
        assert.ok(g.disagreements > 0, 'an unmasked pick the schema refuses (the mask check matters)');
        // every read-back a target step or a draft pass: 2 a round, plus one a redraft
        assert.equal(on.reads, on.targetSteps + g.passes, 'read-backs: target steps + draft passes');
        if (mix === 'alone') assert.equal(g.passes, g.rounds + g.disagreements, 'one chain: a pass per round and per refused pick');
        else assert.ok(g.passes >= g.rounds && g.passes <= g.rounds + g.disagreements, `passes ${g.passes}`);
      }
      const draftReads = (r: Run): number => r.reads - r.targetSteps;
      console.log(JSON.stringify({ k, mix, reads: [off.reads, on.reads], draftReads: [draftReads(off), draftReads(on)], rounds: on.rounds, greedy: g, sampled: s.rounds }));
    });
  }
}

test('no redraft pass (the default): a refused pick ends its chain; ids == the per-step path, every read-back a target step or a round\'s one draft pass', async () => {
  for (const mix of ['alone', 'penalised'] as const) {
    const off = await run(3, false, mix);
    const on = await run(3, true, mix, 0);
    const g = on.greedy;
    assert.deepEqual(on.ids, off.ids, `${mix}: ids == per-step path`);
    // (a refused pick at a chain's last draft ends nothing: the verify picks there anyway)
    assert.ok(g.ended > 0 && g.ended <= g.disagreements, `${mix}: refused picks ended chains (${g.ended} of ${g.disagreements})`);
    assert.equal(g.passes, g.rounds, `${mix}: one draft pass a round`);
    assert.equal(on.reads, on.targetSteps + g.passes, `${mix}: read-backs: target steps + one draft pass a round`);
  }
});

test('the replay\'s test: an allowed unmasked argmax above −∞ is the masked argmax (ties to the lowest id, NaN, ±∞: the reference\'s argmaxRowsMasked)', () => {
  const k = createRefKernels();
  const n = 70;
  const rng = new Rng(12345);
  const next = (m: number): number => Math.floor(rng.next() * m);
  const values = [-Infinity, Infinity, NaN, -1, 0, -0, 2.5, 2.5, 7];
  const [out, masked] = [new Int32Array(1), new Int32Array(1)];
  let [kept, refusedByLogit] = [0, 0];
  for (let trial = 0; trial < 4000; trial++) {
    // few distinct values (ties everywhere); some rows all −∞ / NaN
    const pool = trial % 5 === 0 ? [-Infinity, NaN] : values;
    const row = Float32Array.from({ length: n }, () => pool[next(pool.length)]!);
    const mask = Uint32Array.from({ length: 3 }, () => (next(4) === 0 ? 0xffffffff : (next(1 << 16) * 65536 + next(1 << 16)) >>> 0));
    k.argmax(out, row, 1, n);
    k.argmaxRowsMasked(masked, 0, row, 1, n, n, [mask]);
    const pick = out[0]!;
    if (unmaskedPickExact(mask, pick, row[pick]!)) {
      kept++;
      assert.equal(masked[0], pick, `row ${trial}: the kept pick is the masked argmax`);
    } else if (((mask[pick >>> 5]! >>> (pick & 31)) & 1) === 1) refusedByLogit++;
  }
  assert.ok(kept > 1000, `picks kept ${kept}`);
  assert.ok(refusedByLogit > 0, 'allowed picks at −∞ refused');
  // why the logit matters: NaN then −∞, id 0 masked: the unmasked argmax is 1 (allowed), the masked one 0
  const row = Float32Array.from([NaN, -Infinity, NaN]);
  k.argmax(out, row, 1, 3);
  k.argmaxRowsMasked(masked, 0, row, 1, 3, 3, [Uint32Array.of(0b110)]);
  assert.deepEqual([out[0], masked[0]], [1, 0]);
  assert.equal(unmaskedPickExact(Uint32Array.of(0b110), 1, -Infinity), false);
});
