// Same-run A/B of overlapped decode (src/engine/overlap.ts) through the engine on webgpu:
// two engines (--overlap on and off) in one process, greedy requests of --gen tokens at each
// --streams count, runs alternating on/off for --reps, the median decode tokens/s (from the
// last request's first token to the end) and the median process CPU seconds of a run (on a
// CPU adapter lavapipe's threads are in it). Outputs are checked identical. Prints JSON.
// --spec-tokens K (> 0): MTP on in both engines, and the A/B is of one read-back a round
// (src/engine/speculative/pending-drafts.ts: drafts read back with their verify) against two
// (drafts read back first), the model's own MTP head drafting.
// --sampled: the requests sample (temperature 0.8, top-k 20, a seed each) instead of greedy.
// Usage: node scripts/ab-overlap.mjs [--model DIR] [--streams 1,4] [--gen 32] [--reps 5] [--spec-tokens K] [--sampled]
import { parseArgs } from 'node:util';
import { Engine } from '../dist/src/engine/engine.js';
import { gpuAdapterOf } from '../dist/src/kernels/index.js';

const { values: v } = parseArgs({ options: {
  model: { type: 'string', default: 'models/tiny-think' }, streams: { type: 'string', default: '1,4' },
  gen: { type: 'string', default: '32' }, reps: { type: 'string', default: '5' }, 'spec-tokens': { type: 'string', default: '0' }, sampled: { type: 'boolean', default: false },
} });
const k = Number(v['spec-tokens']);
const gen = Number(v.gen);
const reps = Number(v.reps);
const PROMPTS = ['The capital of France is', 'Counting from one: one, two, three,', 'Twelve plus seven equals', 'Spell cat backwards:'];

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function run(e, streams) {
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  let lastFirst = t0;
  const done = await Promise.all(Array.from({ length: streams }, async (_, i) => {
    let first = true;
    const sampling = v.sampled ? { temperature: 0.8, topK: 20, seed: 7 + i } : { temperature: 0 };
    for await (const ev of e.generate({ prompt: PROMPTS[i % PROMPTS.length], maxTokens: gen, ignoreEos: true, ...sampling })) {
      if (ev.type === 'delta' && first && ev.ids.length > 0) { first = false; lastFirst = Math.max(lastFirst, performance.now()); }
      if (ev.type === 'done') return ev;
    }
  }));
  const ms = performance.now() - lastFirst;
  const cpu = process.cpuUsage(cpu0);
  return { tokS: (streams * (gen - 1) * 1000) / ms, cpuS: (cpu.user + cpu.system) / 1e6, ids: done.map((d) => d.outputIds.join(',')) };
}

const opts = { model: v.model, kernels: 'webgpu', specTokens: k, specAdaptive: false, prefixCache: false, maxRunning: 8, kvCacheTokens: 4096, maxContext: 1024 };
// MTP: both engines overlap (decode never chains while speculating); the hook picks the round
const on = await Engine.load({ ...opts, overlapSteps: true }, k > 0 ? { deferredDrafts: true } : {});
const off = await Engine.load({ ...opts, overlapSteps: k > 0 }, k > 0 ? { deferredDrafts: false } : {});
const adapter = gpuAdapterOf(on.model.kernels);
const results = [];
for (const streams of v.streams.split(',').map(Number)) {
  await run(on, streams);
  await run(off, streams); // warm-up
  const a = [];
  const b = [];
  for (let r = 0; r < reps; r++) {
    a.push(await run(on, streams));
    b.push(await run(off, streams));
  }
  if (a.some((x, i) => x.ids.join('|') !== b[i].ids.join('|'))) throw new Error(`streams ${streams}: outputs differ between overlap on and off`);
  const onTok = median(a.map((x) => x.tokS));
  const offTok = median(b.map((x) => x.tokS));
  results.push({
    streams, gen, tok_s_overlap: +onTok.toFixed(2), tok_s_plain: +offTok.toFixed(2), speedup: +(onTok / offTok).toFixed(3),
    cpu_s_overlap: +median(a.map((x) => x.cpuS)).toFixed(3), cpu_s_plain: +median(b.map((x) => x.cpuS)).toFixed(3), outputs_identical: true,
  });
}
const steps = on.stats().steps;
const spec = on.stats().spec;
await on.close();
await off.close();
console.log(JSON.stringify({
  bench: 'ab-overlap', ab: k > 0 ? `MTP k = ${k}: one read-back a round (on) vs two (off)` : 'overlapped decode (on) vs the plain loop (off)',
  requests: v.sampled ? 'sampled: temperature 0.8, top-k 20, seeded' : 'greedy', model: v.model, adapter: adapter ? `${adapter.description || adapter.device} (${adapter.cpuEmulation ? 'CPU emulation' : 'GPU'})` : null,
  node: process.version, reps, overlapped_steps: steps.overlapped, mispredicted: steps.mispredicted, decode_steps: steps.decode,
  ...(k > 0 ? { deferred_rounds: spec.deferredRounds, verify_steps: steps.verify, accept_len_mean: +spec.acceptLenMean.toFixed(3) } : {}), results,
}, null, 1));
