// Prefix-cache benchmark: time to first token of turn 2 of a multi-turn chat
// whose turn 1 is ~N tokens, and of turn 2 sent again, with the prefix cache on vs off; the
// prompt tokens re-prefilled at each hit (prompt − cached). Prints one JSON object.
// Usage: node scripts/bench-prefix.mjs [--model DIR] [--kernels ref|wasm] [--tokens N]
//        [--threads T] [--repeat R]
// Run `npm run build` first (it imports dist/).
import { parseArgs } from 'node:util';
import { resolve } from 'node:path';
import { Engine } from '../dist/src/engine/engine.js';

const { values: v } = parseArgs({
  options: {
    model: { type: 'string', default: 'models/tiny-think' },
    kernels: { type: 'string', default: 'wasm' },
    tokens: { type: 'string', default: '2048' },
    threads: { type: 'string' },
    repeat: { type: 'string', default: '3' },
  },
});
const target = Number(v.tokens);
const repeat = Number(v.repeat);

function engineOptions(prefixCache) {
  return {
    model: resolve(v.model), kernels: v.kernels, maxRunning: 2, cacheStateSlots: 24, maxContext: 8192, kvCacheTokens: 3 * 8192,
    specAdaptive: false, prefixCache, ...(v.threads ? { threads: Number(v.threads) } : {}),
  };
}

/** A system prompt and a first user message of about `target` tokens together. */
function conversation(engine) {
  const lines = [];
  let text = '';
  for (let i = 0; engine.tokenizer.encode(text).length < target - 40; i++) {
    lines.push(`- item ${i}: value ${(i * 7919) % 10007}, tag t${(i * 31) % 97}`);
    if (i % 16 === 15) text = lines.join('\n');
  }
  return [
    { role: 'system', content: 'You are a careful assistant that answers questions about the inventory below.' },
    { role: 'user', content: `Inventory:\n${lines.join('\n')}\nWhich item has tag t5?` },
  ];
}

/** Milliseconds from submission to the first generated token, and the done event. */
async function timeToFirstToken(engine, messages) {
  const t0 = performance.now();
  let ttft = -1;
  let done = null;
  for await (const ev of engine.generate({ messages, maxTokens: 8, temperature: 0 })) {
    if (ev.type === 'delta' && ev.ids.length > 0 && ttft < 0) ttft = performance.now() - t0;
    if (ev.type === 'done') done = ev;
  }
  return { ttft, done };
}

async function measure(prefixCache) {
  const engine = await Engine.load(engineOptions(prefixCache));
  try {
    const runs = [];
    for (let r = 0; r < repeat; r++) {
      // a fresh conversation per repetition (a different first line), so turn 1 is cold
      const [system, user] = conversation(engine);
      const first = [system, { ...user, content: `Session ${r}.\n${user.content}` }];
      const t1 = await timeToFirstToken(engine, first);
      const reply = t1.done.text.split('</think>').pop().trim();
      const second = [...first, { role: 'assistant', content: reply }, { role: 'user', content: 'And which item has tag t6?' }];
      const t2 = await timeToFirstToken(engine, second);
      const again = await timeToFirstToken(engine, second);
      runs.push({
        turn1Ms: t1.ttft, turn2Ms: t2.ttft, againMs: again.ttft, prompt: t2.done.usage.promptTokens, cached: t2.done.usage.cachedTokens,
        againCached: again.done.usage.cachedTokens, ids: t2.done.outputIds, againIds: again.done.outputIds,
      });
    }
    return runs;
  } finally {
    await engine.close();
  }
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)];
const off = await measure(false);
const on = await measure(true);
const onMs = median(on.map((r) => r.turn2Ms));
const offMs = median(off.map((r) => r.turn2Ms));
process.stdout.write(JSON.stringify({
  bench: 'prefix-cache-turn2-ttft', model: v.model, kernels: v.kernels, repeat,
  turn2_prompt_tokens: on[0].prompt, turn2_cached_tokens: on.map((r) => r.cached),
  turn1_ttft_ms_cold: median(off.map((r) => r.turn1Ms)),
  turn2_ttft_ms_cache_off: offMs, turn2_ttft_ms_cache_on: onMs, ratio_on_over_off: onMs / offMs,
  turn2_reprefill_tokens: on.map((r) => r.prompt - r.cached),
  same_prompt_ttft_ms_cache_on: median(on.map((r) => r.againMs)), same_prompt_ttft_ms_cache_off: median(off.map((r) => r.againMs)),
  same_prompt_reprefill_tokens: on.map((r) => r.prompt - r.againCached),
  same_output: on.every((r, i) => JSON.stringify(r.ids) === JSON.stringify(off[i].ids) && JSON.stringify(r.againIds) === JSON.stringify(off[i].againIds)),
}) + '\n');
