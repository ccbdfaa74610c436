// Engine step-loop benchmark: tokens per second through Engine.generate (schedule, forward,
// sample, update, draft, the event stream), unlike `deltaserve bench`, which times the model
// forward alone. Four tests: decode (1 stream, MTP off), decode8 (8 streams, MTP off),
// verify (1 stream, MTP k fixed, every step a verify round) and prefill (one prompt, time
// to its first token). Each reports tok/s (wall clock) and cpu_us_per_tok (the process's CPU
// time per token: on a loaded machine far steadier than wall time; with --threads 1 all of it
// is the engine's own thread). Prints one JSON object.
// Usage: node scripts/bench-engine.mjs [--dist DIR] [--compare DIR] [--model DIR]
//        [--kernels wasm|ref] [--threads T] [--repeat R] [--gen N] [--prompt P]
//        [--tests decode,decode8,verify,prefill] [--repetition-penalty R] [--presence-penalty P]
// --repetition-penalty / --presence-penalty: every request is a penalised greedy request
// (picked on the kernels over its untouched ids and finished on the host, MTP drafts too).
// --dist: the compiled tree to import (default ./dist). --compare: another build's dist
// (e.g. main's): both engines are loaded side by side and their runs alternate, so machine
// load falls on both alike; the output adds the other's numbers and after/before ratios
// (of the medians, and the median of the run-by-run ratios).
import { parseArgs } from 'node:util';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const { values: v } = parseArgs({
  options: {
    dist: { type: 'string', default: 'dist' },
    compare: { type: 'string' },
    model: { type: 'string', default: '../shared/models/tiny-think' },
    kernels: { type: 'string', default: 'wasm' },
    threads: { type: 'string' },
    repeat: { type: 'string', default: '3' },
    gen: { type: 'string', default: '128' },
    prompt: { type: 'string', default: '512' },
    tests: { type: 'string', default: 'decode,decode8,verify,prefill' },
    'repetition-penalty': { type: 'string', default: '1' },
    'presence-penalty': { type: 'string', default: '0' },
  },
});
const load = async (dist) => (await import(pathToFileURL(resolve(dist, 'src/engine/engine.js')).href)).Engine;
const builds = [await load(v.dist), ...(v.compare ? [await load(v.compare)] : [])];
const gen = Number(v.gen);
const promptLen = Number(v.prompt);
const penalties = { repetitionPenalty: Number(v['repetition-penalty']), presencePenalty: Number(v['presence-penalty']) };

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

const cpuUs = () => {
  const u = process.cpuUsage();
  return u.user + u.system;
};

/** Generated tokens per second (and CPU µs per token) of `streams` concurrent requests,
 * counted from the moment every stream has its first token (prefill excluded) to the last
 * done event. */
async function decodeRate(engine, streams, len) {
  let firsts = 0;
  let t0 = 0;
  let c0 = 0;
  let after = 0;
  const one = async (s) => {
    let seen = false;
    for await (const ev of engine.generate({ promptIds: prompt(len, s), maxTokens: gen, temperature: 0, ignoreEos: true, ...penalties })) {
      if (ev.type !== 'delta' || ev.ids.length === 0) continue;
      if (!seen) {
        seen = true;
        if (++firsts === streams) {
          t0 = performance.now();
          c0 = cpuUs();
        }
      } else if (firsts === streams) after += ev.ids.length;
    }
  };
  await Promise.all(Array.from({ length: streams }, (_, s) => one(s)));
  return { tok_s: after / ((performance.now() - t0) / 1000), cpu_us_per_tok: (cpuUs() - c0) / after };
}

/** Prompt tokens per second to the first generated token of one request. */
async function prefillRate(engine, len, salt) {
  const t0 = performance.now();
  const c0 = cpuUs();
  await engine.complete({ promptIds: prompt(len, salt), maxTokens: 1, temperature: 0, ignoreEos: true });
  return { tok_s: len / ((performance.now() - t0) / 1000), cpu_us_per_tok: (cpuUs() - c0) / len };
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** `fn` on every build's engine, runs alternating build by build; per build the median
 * and the runs. */
async function measure(specTokens, fn) {
  const engines = [];
  for (const Engine of builds) engines.push(await Engine.load(options(specTokens)));
  try {
    for (const e of engines) await fn(e, -1); // warm-up
    const runs = engines.map(() => []);
    for (let r = 0; r < Number(v.repeat); r++) for (let i = 0; i < engines.length; i++) runs[i].push(await fn(engines[i], r));
    const stats = (rs, key) => ({ median: median(rs.map((r) => r[key])), runs: rs.map((r) => r[key]) });
    const res = runs.map((rs) => ({ tok_s: stats(rs, 'tok_s'), cpu_us_per_tok: stats(rs, 'cpu_us_per_tok') }));
    if (res.length === 1) return res[0];
    const ratio = (key) => ({
      of_medians: res[0][key].median / res[1][key].median,
      paired: median(runs[0].map((x, i) => x[key] / runs[1][i][key])),
    });
    return { ...res[0], compare: res[1], ratio: { tok_s: ratio('tok_s'), cpu_us_per_tok: ratio('cpu_us_per_tok') } };
  } finally {
    for (const e of engines) await e.close();
  }
}

const TESTS = {
  decode: () => measure(0, (e) => decodeRate(e, 1, 32)),
  decode8: () => measure(0, (e) => decodeRate(e, 8, 32)),
  verify: () => measure(3, (e) => decodeRate(e, 1, 32)),
  prefill: () => measure(0, (e, r) => prefillRate(e, promptLen, r + 2)),
};
const out = { node: process.version, dist: v.dist, compare: v.compare ?? null, kernels: v.kernels, threads: v.threads ?? null, gen, prompt_tokens: promptLen, ...penalties };
for (const name of v.tests.split(',')) {
  if (!(name in TESTS)) throw new Error(`--tests: unknown test ${name} (decode, decode8, verify, prefill)`);
  out[name] = await TESTS[name]();
}
console.log(JSON.stringify(out));
