// Sampled decode read-backs: the candidate path (engine/candidate-step.ts) against the full
// logits rows, on one model. Runs the same seeded sampled requests with candidates on and
// forced off, checks the ids agree, and prints one JSON object: per sampling case the
// candidate rows, the certificate's refusals (fallback rate), and on webgpu the read-back
// bytes per step both ways (the kernels' counters; CPU backends read in place: no bytes).
// With --spec K (MTP, k = K drafts, not adaptive), sampled rounds: the verify positions' p_i
// and the drafts' q_i read candidates too; it also reports read-backs and bytes per verify
// step (one MTP round of the batch: the drafting after a step, then its verify; the prefill
// step and its drafting are in the totals).
// Usage: node scripts/bench-sampled-reads.mjs [--model DIR] [--kernels wasm|webgpu]
//        [--streams S] [--gen N] [--cases a,b] [--spec K]   (needs dist/: npx tsc)
import { parseArgs } from 'node:util';
import { resolve } from 'node:path';
import { Engine } from '../dist/src/engine/engine.js';

const { values: v } = parseArgs({
  options: {
    model: { type: 'string', default: '../shared/models/tiny-think' },
    kernels: { type: 'string', default: 'wasm' },
    streams: { type: 'string', default: '4' },
    gen: { type: 'string', default: '64' },
    cases: { type: 'string' },
    spec: { type: 'string', default: '0' },
  },
});
const CASES = {
  qwenDefault: { temperature: 0.7, topK: 20, topP: 0.8 },
  hotTopK: { temperature: 2, topK: 20, topP: 0.95 },
  minP: { temperature: 0.7, minP: 0.1 },
  hotMinP: { temperature: 2, minP: 0.1 },
  topPOnly: { temperature: 0.7, topP: 0.8 },
  // issue 47's sweep: top-k past 128 (OpenAI / llama.cpp-style clients) and top-p alone
  topK20: { temperature: 1, topK: 20 },
  topK200: { temperature: 1, topK: 200 },
  topK1000: { temperature: 1, topK: 1000 },
  topP09: { temperature: 1, topP: 0.9 },
};
if (v.cases) for (const name of Object.keys(CASES)) if (!v.cases.split(',').includes(name)) delete CASES[name];
const streams = Number(v.streams);
const gen = Number(v.gen);
const spec = Number(v.spec);

async function runCase(engine, sampling) {
  const k = engine.model.kernels.counters;
  const [s0, b0, c0, st0] = [k?.steps ?? 0, k?.readBackBytes ?? 0, engine.sampledCandidates, engine.stats()];
  const ids = await Promise.all(Array.from({ length: streams }, async (_, i) => {
    const promptIds = Array.from({ length: 24 }, (_, j) => (j * 37 + i * 101 + 5) % 1000);
    return [...(await engine.complete({ promptIds, maxTokens: gen, ignoreEos: true, seed: 77 + i, ...sampling })).outputIds];
  }));
  const c1 = engine.sampledCandidates;
  const st1 = engine.stats();
  const steps = (k?.steps ?? 0) - s0;
  const rounds = { verifySteps: st1.steps.verify - st0.steps.verify, requestRounds: st1.spec.rounds - st0.spec.rounds, accepted: st1.spec.accepted - st0.spec.accepted };
  return { ids, rows: c1.rows - c0.rows, fallbacks: c1.fallbacks - c0.fallbacks, readBacks: steps, bytes: (k?.readBackBytes ?? 0) - b0, rounds };
}

const out = { model: resolve(v.model), kernels: v.kernels, streams, gen, spec, node: process.version, cases: {} };
for (const sampledCandidates of [false, true]) {
  const engine = await Engine.load({ model: resolve(v.model), kernels: v.kernels, specTokens: spec, specAdaptive: false, prefixCache: false, maxRunning: streams, log: () => {} },
    { sampledCandidates });
  try {
    for (const [name, sampling] of Object.entries(CASES)) {
      const r = await runCase(engine, sampling);
      const entry = (out.cases[name] ??= { sampling });
      const side = sampledCandidates ? 'on' : 'off';
      if (sampledCandidates && JSON.stringify(r.ids) !== JSON.stringify(entry.offIds)) throw new Error(`${name}: ids differ with candidates on`);
      if (!sampledCandidates) entry.offIds = r.ids;
      entry[side] = { readBacks: r.readBacks, bytes: r.bytes, bytesPerReadBack: r.readBacks ? Math.round(r.bytes / r.readBacks) : 0 };
      if (spec > 0) {
        const n = r.rounds.verifySteps;
        Object.assign(entry[side], { ...r.rounds, readBacksPerVerifyStep: n ? r.readBacks / n : null, bytesPerVerifyStep: n ? Math.round(r.bytes / n) : null });
      }
      if (sampledCandidates) Object.assign(entry, { candidateRows: r.rows, fallbacks: r.fallbacks, fallbackRate: r.rows ? r.fallbacks / r.rows : null });
    }
  } finally {
    await engine.close();
  }
}
for (const c of Object.values(out.cases)) delete c.offIds;
console.log(JSON.stringify(out, null, 1));
