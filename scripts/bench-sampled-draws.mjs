// Sampled MTP rounds: drafts drawn on the kernels and replayed on the host (speculative/
// draft-device.ts) against the per-step draft path (one read-back a draft step), on one model.
// Runs the same seeded sampled requests both ways (candidates on), checks the ids agree, and
// prints one JSON object: per case and k, read-backs and bytes per verify step (one MTP round of
// the batch: its drafting and its verify) both ways, draft read-backs per round (those that are
// not a target step's, ÷ verify steps), the chained path's rounds, passes,
// disagreements and refused rows; with --reps R, each case runs R times per engine and the median
// wall time is reported too (a same-run A/B: both engines loaded in turn per k).
// Usage: node scripts/bench-sampled-draws.mjs [--model DIR] [--kernels webgpu|wasm]
//        [--streams S] [--gen N] [--ks 2,3,4] [--cases a,b] [--reps R] [--candidates on|off|auto]
//        (cases: qwen, minP, topP, penalised, biased, json, jsonGreedy; default all)
//        (off: every chain per step; on: sampled and greedy replayed chains on the kernels)
//        (needs dist/: npx tsc; --candidates: the sampled-candidates hook, auto = the backend's default)
import { parseArgs } from 'node:util';
import { resolve } from 'node:path';
import { Engine } from '../dist/src/engine/engine.js';
import { TokenTexts } from '../dist/src/server/api/logprobs.js';
import { structuredConstraint } from '../dist/src/server/api/structured.js';

const { values: v } = parseArgs({
  options: {
    model: { type: 'string', default: '../shared/models/tiny-think' },
    kernels: { type: 'string', default: 'webgpu' },
    streams: { type: 'string', default: '2' },
    gen: { type: 'string', default: '16' },
    ks: { type: 'string', default: '2,3,4' },
    cases: { type: 'string' },
    reps: { type: 'string', default: '1' },
    candidates: { type: 'string', default: 'on' },
  },
});
const CASES = {
  qwen: { temperature: 0.7, topK: 20, topP: 0.8 },
  minP: { temperature: 1.0, minP: 0.1 },
  topP: { temperature: 0.3, topP: 0.95 },
  // adjusted rows (penaltyPicks `apply` on the device, replayed with the touched ids' raw logits)
  penalised: { temperature: 0.7, topK: 20, topP: 0.8, repetitionPenalty: 1.3, presencePenalty: 0.5, frequencyPenalty: 0.3 },
  biased: { temperature: 0.7, topK: 20, topP: 0.8, logitsAdjust: { bias: new Map([[54, 2.1], [57, -4], [200, 6]]) } },
  // a JSON schema (the chat route's constraint, a fresh one per request): proposals drawn
  // without the mask, the replay applies it (draft-device.ts)
  json: { temperature: 0.7, topK: 20, topP: 0.8, schema: { type: 'object', properties: { n: { type: 'integer' }, s: { type: 'string', maxLength: 8 } }, required: ['n', 's'] } },
  // the same schema, greedy: later picks unmasked, kept where the exact mask allows them
  jsonGreedy: { temperature: 0, schema: { type: 'object', properties: { n: { type: 'integer' }, s: { type: 'string', maxLength: 8 } }, required: ['n', 's'] } },
};

/** The request fields of a case: `schema` becomes a JSON-schema constraint over the engine. */
function requestOf(engine, sampling) {
  const { schema, ...rest } = sampling;
  if (!schema) return rest;
  const ctx = { engine, texts: new TokenTexts(engine.tokenizer) };
  return { ...rest, logitsAdjust: { bias: null, constraint: structuredConstraint(ctx, { kind: 'json_schema', name: 't', schema }, null, false) } };
}
if (v.cases) for (const name of Object.keys(CASES)) if (!v.cases.split(',').includes(name)) delete CASES[name];
const streams = Number(v.streams);
const gen = Number(v.gen);

async function runCase(engine, sampling) {
  const k = engine.model.kernels;
  const readBack = k.readBack;
  let [reads, bytes] = [0, 0];
  k.readBack = (ranges) => { reads++; for (const r of ranges) bytes += 4 * r.length; return readBack.call(k, ranges); };
  const [d0, g0, st0] = [engine.sampledDrafts, engine.penaltyDrafts, engine.stats()];
  const t0 = performance.now();
  try {
    const ids = await Promise.all(Array.from({ length: streams }, async (_, i) => {
      const promptIds = Array.from({ length: 12 }, (_, j) => (j * 37 + i * 101 + 5) % 1000);
      return [...(await engine.complete({ promptIds, maxTokens: gen, ignoreEos: true, seed: 77 + i, ...requestOf(engine, sampling) })).outputIds];
    }));
    const [d1, g1, st1] = [engine.sampledDrafts, engine.penaltyDrafts, engine.stats()];
    const verify = st1.steps.verify - st0.steps.verify;
    const targetSteps = ['prefill', 'decode', 'verify'].reduce((n, f) => n + st1.steps[f] - st0.steps[f], 0);
    const chained = Object.fromEntries(Object.keys(d1).map((f) => [f, d1[f] - d0[f]]));
    // rounds of greedy chains alone (constrained, penalised): their own counters
    chained.greedy = Object.fromEntries(Object.keys(g1).map((f) => [f, g1[f] - g0[f]]));
    return { ids, verify, targetSteps, reads, bytes, chained, ms: performance.now() - t0 };
  } finally {
    k.readBack = readBack;
  }
}

const out = { model: resolve(v.model), kernels: v.kernels, streams, gen, node: process.version, runs: [] };
for (const spec of v.ks.split(',').map(Number)) {
  const got = {};
  for (const sampledChain of [false, true]) {
    const engine = await Engine.load({ model: resolve(v.model), kernels: v.kernels, specTokens: spec, specAdaptive: false, prefixCache: false, maxRunning: streams,
      maxContext: 512, kvCacheTokens: 4096, log: () => {} }, { ...(v.candidates === 'auto' ? {} : { sampledCandidates: v.candidates === 'on' }), sampledChain, penaltyChain: sampledChain });
    try {
      for (const [name, sampling] of Object.entries(CASES)) {
        const runs = [];
        for (let r = 0; r < Number(v.reps); r++) runs.push(await runCase(engine, sampling));
        const ms = runs.map((r) => r.ms).sort((a, b) => a - b);
        (got[name] ??= {})[sampledChain ? 'on' : 'off'] = { ...runs[0], medianMs: Math.round(ms[Math.floor(ms.length / 2)]) };
      }
    } finally {
      await engine.close();
    }
  }
  for (const [name, { on, off }] of Object.entries(got)) {
    if (JSON.stringify(on.ids) !== JSON.stringify(off.ids)) throw new Error(`k = ${spec}, ${name}: ids differ with the chained draws`);
    // draft read-backs per round: every read-back that is not a target step's (one each, no refused row), ÷ verify steps
    const per = (r) => ({ verifySteps: r.verify, readBacks: r.reads, readBacksPerVerifyStep: +(r.reads / r.verify).toFixed(2),
      draftReadBacksPerRound: +((r.reads - r.targetSteps) / r.verify).toFixed(2), bytesPerVerifyStep: Math.round(r.bytes / r.verify),
      medianMs: r.medianMs });
    out.runs.push({ k: spec, case: name, sampling: CASES[name], off: per(off), on: { ...per(on), ...on.chained } });
  }
}
console.log(JSON.stringify(out, null, 1));
