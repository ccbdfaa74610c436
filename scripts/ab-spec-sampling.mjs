// Same-run A/B of how seeded sampled requests are verified under MTP (src/engine/speculative/
// accept.ts): three engines in one process on the same requests, runs alternating for --reps
// after a warm-up, the median tokens/s (whole requests: --gen tokens each, --streams at once):
//   off:       --spec-tokens 0;
//   auto:      --spec-tokens K, --spec-sampling auto (the default: a seeded request is matched,
//              the adaptive policy sets its k);
//   rejection: --spec-tokens K, --spec-sampling rejection (rejection sampling: a seeded
//              request keeps k = K, as every sampled request did before matching).
// Reports on ÷ off, whether each engine's ids equal MTP off's (auto's must: the script fails
// otherwise), rounds and accept length. Prints JSON.
// Usage: node scripts/ab-spec-sampling.mjs [--model DIR] [--kernels wasm] [--streams 1,4] [--gen 64] [--reps 5] [--spec-tokens 3]
import { parseArgs } from 'node:util';
import { Engine } from '../dist/src/engine/engine.js';

const { values: v } = parseArgs({ options: {
  model: { type: 'string', default: 'models/tiny-think' }, kernels: { type: 'string', default: 'wasm' }, streams: { type: 'string', default: '1,4' },
  gen: { type: 'string', default: '64' }, reps: { type: 'string', default: '5' }, 'spec-tokens': { type: 'string', default: '3' },
} });
const k = Number(v['spec-tokens']);
const gen = Number(v.gen);
const reps = Number(v.reps);
const PROMPTS = ['Tell me a story about a fox.', 'Count to twenty.', 'What is 12 + 30?', 'List some colours.'];
const SAMPLING = { temperature: 0.7, topK: 20, topP: 0.8 };
const MODES = { off: { specTokens: 0 }, auto: { specTokens: k }, rejection: { specTokens: k, specSampling: 'rejection' } };

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function run(e, streams) {
  const t0 = performance.now();
  const done = await Promise.all(Array.from({ length: streams }, (_, i) => e.complete({
    prompt: PROMPTS[i % PROMPTS.length], maxTokens: gen, ignoreEos: true, ...SAMPLING, seed: 42 + i,
  })));
  return { tokS: (streams * gen * 1000) / (performance.now() - t0), ids: done.map((d) => d.outputIds.join(',')).join('|') };
}

const results = [];
for (const streams of v.streams.split(',').map(Number)) {
  const engines = {};
  for (const [m, o] of Object.entries(MODES)) engines[m] = await Engine.load({ model: v.model, kernels: v.kernels, prefixCache: false, maxRunning: Math.max(8, streams), ...o });
  const tokS = Object.fromEntries(Object.keys(MODES).map((m) => [m, []]));
  const ids = {};
  for (let r = 0; r <= reps; r++) {
    for (const m of Object.keys(MODES)) {
      const out = await run(engines[m], streams);
      if (r > 0) tokS[m].push(out.tokS); // r = 0 warms up
      ids[m] = out.ids;
    }
  }
  if (ids.auto !== ids.off) throw new Error(`${streams} streams: auto's ids differ from MTP off's (a seeded request must be matched)`);
  const row = { streams };
  for (const m of Object.keys(MODES)) {
    const s = engines[m].stats().spec;
    row[m] = { tok_s: +median(tokS[m]).toFixed(1), ids_equal_off: ids[m] === ids.off, rounds: s.rounds, accept_len: +s.acceptLenMean.toFixed(2) };
    await engines[m].close();
  }
  row.auto_over_off = +(row.auto.tok_s / row.off.tok_s).toFixed(2);
  row.rejection_over_off = +(row.rejection.tok_s / row.off.tok_s).toFixed(2);
  results.push(row);
}
console.log(JSON.stringify({ model: v.model, kernels: v.kernels, spec_tokens: k, gen, reps, sampling: SAMPLING, node: process.version, results }));
