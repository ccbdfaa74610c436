// Engine step-loop benchmark: tokens per second through Engine.generate (schedule, forward,
// sample, update, draft, the event stream), unlike `deltaserve bench`, which times the model
// forward alone. Four tests: decode (1 stream, MTP off), decode8 (8 streams, MTP off),
// verify (1 stream, MTP k fixed, every step a verify round) and prefill (one prompt, time
// to its first token). Prints one JSON object.
// Usage: node scripts/bench-engine.mjs [--dist DIR] [--model DIR] [--kernels wasm|ref]
//        [--threads T] [--repeat R] [--gen N] [--prompt P]
// --dist: the compiled tree to import (default ./dist; pass another build's dist to compare
// two versions of the code in the same run).
import { parseArgs } from 'node:util';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const { values: v } = parseArgs({
  options: {
    dist: { type: 'string', default: 'dist' },
    model: { type: 'string', default: '../shared/models/tiny-think' },
    kernels: { type: 'string', default: 'wasm' },
    threads: { type: 'string' },
    repeat: { type: 'string', default: '3' },
    gen: { type: 'string', default: '128' },
    prompt: { type: 'string', default: '512' },
  },
});
const { Engine } = await import(pathToFileURL(resolve(v.dist, 'src/engine/engine.js')).href);
const gen = Number(v.gen);
const promptLen = Number(v.prompt);

function options(specTokens) {
  return {
    model: resolve(v.model), kernels: v.kernels, maxRunning: 8, prefixCache: false, specTokens, specAdaptive: false,
    ...(v.threads ? { threads: Number(v.threads) } : {}), log: () => {},
  };
}

/** Prompt ids that differ per stream (no id is special in the tiny vocabularies' low range). */
function prompt(n, salt) {
  return Array.from({ length: n }, (_, i) => 10 + ((i * 37 + salt * 101) % 500));
}

/** Generated tokens per second of `streams` concurrent requests, counted from the moment
 * every stream has its first token (prefill excluded) to the last done event. */
async function decodeRate(engine, streams, len) {
  let firsts = 0;
  let t0 = 0;
  let after = 0;
  const one = async (s) => {
    let seen = false;
    for await (const ev of engine.generate({ promptIds: prompt(len, s), maxTokens: gen, temperature: 0, ignoreEos: true })) {
      if (ev.type !== 'delta' || ev.ids.length === 0) continue;
      if (!seen) {
        seen = true;
        if (++firsts === streams) t0 = performance.now();
      } else if (firsts === streams) after += ev.ids.length;
    }
  };
  await Promise.all(Array.from({ length: streams }, (_, s) => one(s)));
  return after / ((performance.now() - t0) / 1000);
}

/** Prompt tokens per second to the first generated token of one request. */
async function prefillRate(engine, len, salt) {
  const t0 = performance.now();
  await engine.complete({ promptIds: prompt(len, salt), maxTokens: 1, temperature: 0, ignoreEos: true });
  return len / ((performance.now() - t0) / 1000);
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function measure(specTokens, fn) {
  const engine = await Engine.load(options(specTokens));
  try {
    await fn(engine, -1); // warm-up
    const runs = [];
    for (let r = 0; r < Number(v.repeat); r++) runs.push(await fn(engine, r));
    return { median: median(runs), runs };
  } finally {
    await engine.close();
  }
}

const out = {
  node: process.version, dist: v.dist, kernels: v.kernels, gen, prompt_tokens: promptLen,
  decode_tok_s: await measure(0, (e) => decodeRate(e, 1, 32)),
  decode8_tok_s: await measure(0, (e) => decodeRate(e, 8, 32)),
  verify_tok_s: await measure(3, (e) => decodeRate(e, 1, 32)),
  prefill_tok_s: await measure(0, (e, r) => prefillRate(e, promptLen, r + 2)),
};
console.log(JSON.stringify(out));
