// CONSTRAINED sampled MTP chains (a JSON schema, temperature > 0) drafted on the kernels
// (speculative/draft-device.ts: a pass's first proposal drawn under its mask, later ones without
// it, as it depends on the drafts before it; the replay applies the mask after the exact drafts, certifies the candidates under
// it and redrafts where the proposal differs) == the per-step host path (forced off), on the
// wasm engine (the path forced on): identical ids at k = 2, 3, 4, with penalties and a bias too,
// and with a 40-id draft head (rows the schema masks whole: draft 0 without a uniform, the
// later uniforms shifted as on the host path). Every proposal (the draftOverride hook) equals
// the host path's, not only the output ids; draft read-backs never exceed the host path's.
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

// rejection sampling (seeded requests are matched under 'auto'): its q's and p's must be exact
const opts = { kernels: 'wasm' as const, specAdaptive: false, specSampling: 'rejection' as const, kvCacheTokens: 2048, maxContext: 1024, prefixCache: false, maxRunning: 8, sampledCandidates: true };
const N = 10;
const SCHEMA = { type: 'object', properties: { n: { type: 'integer' }, s: { type: 'string', maxLength: 8 } }, required: ['n', 's'] };

// a string first: with a 40-id draft head, '{', the key's letters and ':' are masked whole, '"'
// and the string's content are drawn (uniforms used between masked-whole rows)
const STRING_SCHEMA = { type: 'object', properties: { s: { type: 'string' } }, required: ['s'] };

function constraintFor(engine: Engine, schema: unknown): Constraint {
  const ctx = { engine, texts: new TokenTexts(engine.tokenizer) } as unknown as ServerContext;
  return structuredConstraint(ctx, { kind: 'json_schema', name: 't', schema }, null, false)!;
}

/** Sampled requests under the schema (a fresh constraint per request): hot top-k, Qwen's cut
 * with penalties and a bias, top-p alone. */
function constrained(e: Engine, schema: unknown, n: number): GenerateRequest[] {
  const c = (r: GenerateRequest, extra: Partial<GenerateRequest> = {}): GenerateRequest => ({ ...r, ...extra, logitsAdjust: { bias: extra.logitsAdjust?.bias ?? null, constraint: constraintFor(e, schema) } });
  const [hot] = drawRequests(DRAW_CASES.hot, n, 1);
  const [qwen] = drawRequests(DRAW_CASES.qwen, n, 1);
  const [topP] = drawRequests({ temperature: 0.6, topP: 0.9 }, n, 1);
  return [c(hot!), c({ ...qwen!, seed: 1001 }, { presencePenalty: 0.4, repetitionPenalty: 1.2, logitsAdjust: { bias: new Map([[54, 1.5]]) } }), c({ ...topP!, seed: 1002 })];
}

/** The run, and every proposal in order ([committed length, ...drafts]: the draftOverride hook,
 * returning them unchanged): the drafts, not only the ids, must be the host path's. */
async function run(k: number, on: boolean, draftVocab?: number): Promise<DrawRun & { drafts: number[][] }> {
  const [schema, n] = draftVocab ? [STRING_SCHEMA, 20] : [SCHEMA, N];
  const drafts: number[][] = [];
  const draftOverride = (req: { tokens: readonly number[] }, d: number[]): number[] => { drafts.push([req.tokens.length, ...d]); return d; };
  const got = await withEngine({ ...opts, model: TINY_THINK(), specTokens: k, sampledChain: on, penaltyChain: on, draftOverride, ...(draftVocab ? { draftVocab } : {}) },
    (e) => runDraws(e, constrained(e, schema, n)));
  return { ...got, drafts };
}

for (const k of [2, 3, 4]) {
  test(`wasm MTP k = ${k}: JSON-schema sampled chains drafted on the kernels (mask applied by the replay) == host path`, async () => {
    const off = await run(k, false);
    const on = await run(k, true);
    assert.deepEqual(on.ids, off.ids, 'ids == host path');
    assert.deepEqual(on.drafts, off.drafts, 'every proposal == the host path\'s');
    assert.ok(on.ids.every((ids) => ids.length > 0));
    const s = on.sampled;
    assert.equal(off.sampled.rounds, 0, 'forced off: no chained round');
    assert.ok(s.rounds > 0, 'chained rounds');
    assert.ok(s.passes >= s.rounds && s.passes <= s.rounds + s.disagreements, `passes ${s.passes}`);
    assert.ok(on.reads <= off.reads, `read-backs ${off.reads} → ${on.reads}`);
    console.log(JSON.stringify({ k, reads: [off.reads, on.reads], targetSteps: on.targetSteps, ...s }));
  });
}

test('wasm MTP k = 3, a 40-id draft head: rows the schema masks whole (draft 0, no uniform) keep the uniforms aligned: ids == host path', async () => {
  // ids 0..39: control bytes, then '!'.."'": '{', the key's letters and ':' lie outside
  const off = await run(3, false, 40);
  const on = await run(3, true, 40);
  assert.deepEqual(on.ids, off.ids, 'ids == host path');
  assert.deepEqual(on.drafts, off.drafts, 'every proposal == the host path\'s (the uniforms after a masked-whole row shifted)');
  assert.ok(on.sampled.rounds > 0 && on.sampled.disagreements > 0, `chained rounds ${on.sampled.rounds}, disagreements ${on.sampled.disagreements}`);
  console.log(JSON.stringify({ draftVocab: 40, reads: [off.reads, on.reads], ...on.sampled }));
});
