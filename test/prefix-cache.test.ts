// Invariant 6 (docs/ARCHITECTURE.md "Invariants"): a prefix-cache hit gives bit-identical logits (every sampled
// position) and ids to a cold run, in any order of arrival; snapshots taken during chunked
// prefill, decode and MTP verify equal a cold prefill of exactly that many tokens (1e-5);
// a second chat turn reuses the first turn's prompt.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Engine } from '../src/engine/engine.js';
import type { GenerateRequest } from '../src/engine/request-builder.js';
import type { Request } from '../src/engine/request.js';
import { prefixKey } from '../src/engine/prefix.js';
import { messageEnds } from '../src/frontend/message-ends.js';
import type { ChatMessage } from '../src/frontend/chat-template.js';
import { createRefKernels } from '../src/kernels/ref/index.js';
import { loadModel, allocSequenceMemory, type Model } from '../src/model/model.js';
import { forwardHidden } from '../src/model/forward.js';
import { StepArena } from '../src/model/arena.js';
import { evalPrompts, runAll, sameBits, withEngine, type RunResult } from './engine-helpers.js';
import { TINY_THINK } from './paths.js';
import { relErr } from './numeric.js';
import { historyConstraint } from './constraint-helpers.js';

const KERNELS = (process.env['DELTASERVE_TEST_KERNELS'] ?? 'wasm') as 'ref' | 'wasm';

/** Multi-turn conversations from eval items: turn 2 re-sends turn 1 with its answer. */
function conversations(n: number): { first: ChatMessage[]; second: ChatMessage[] }[] {
  return evalPrompts(n).map((messages, i) => ({
    first: messages,
    second: [...messages, { role: 'assistant', content: String(17 * i + 3) }, { role: 'user', content: `What is ${i} + ${2 * i + 1}?` }],
  }));
}

function assertSameOutputs(got: RunResult[], want: RunResult[], label: string): void {
  got.forEach((g, i) => {
    assert.deepEqual(g.ids, want[i]!.ids, `${label}: request ${i} ids`);
    assert.equal(g.logits.length, want[i]!.logits.length, `${label}: request ${i} logits count`);
    g.logits.forEach((l, t) => assert.ok(sameBits(l, want[i]!.logits[t]!), `${label}: request ${i} token ${t} logits differ from cold`));
  });
}

async function sequential(e: Engine, reqs: GenerateRequest[]): Promise<RunResult[]> {
  const out: RunResult[] = [];
  for (const r of reqs) out.push(...(await runAll(e, [r])));
  return out;
}

test('hit == cold: multi-turn chats and repeated / extended prompts, sequential and concurrent, both orders', async () => {
  const convs = conversations(6);
  const firsts = convs.map((c) => ({ messages: c.first, maxTokens: 12 }));
  const seconds = convs.map((c) => ({ messages: c.second, maxTokens: 12 }));
  const raw = { prompt: 'Here are some values:\n- ab=12\n- cd=34\nWhat is the value of ab?', maxTokens: 8 };
  const rawLonger = { ...raw, prompt: raw.prompt + ' And of cd?' };
  const all: GenerateRequest[] = [...firsts, ...seconds, raw, rawLonger, raw];
  const cold = await withEngine({ model: TINY_THINK(), kernels: KERNELS, prefixCache: false }, (e) => sequential(e, all));
  for (const order of ['forward', 'reverse'] as const) {
    const reqs = order === 'forward' ? all : [...all].reverse();
    const want = order === 'forward' ? cold : [...cold].reverse();
    const seq = await withEngine({ model: TINY_THINK(), kernels: KERNELS }, async (e) => {
      const r = await sequential(e, reqs);
      const s = e.stats().prefixCache!;
      if (order === 'forward') assert.ok(s.hits >= 4 && s.hitTokens >= 4 * 64, `expected hits, got ${JSON.stringify(s)}`);
      e.checkIntegrity();
      return r;
    });
    assertSameOutputs(seq, want, `sequential ${order}`);
    const conc = await withEngine({ model: TINY_THINK(), kernels: KERNELS, maxRunning: 4 }, async (e) => {
      await sequential(e, reqs.slice(0, 3)); // warm part of the cache, then a concurrent burst
      return runAll(e, reqs);
    });
    assertSameOutputs(conc, want, `concurrent ${order}`);
  }
});

test('a second chat turn reports cached_tokens ≥ the first turn prompt without its generation prompt, rounded down to 64', async () => {
  await withEngine({ model: TINY_THINK(), kernels: KERNELS }, async (e) => {
    for (const size of ['short', 'long'] as const) {
      const filler = size === 'long' ? Array.from({ length: 215 }, (_, i) => `- k${i}=${(i * 37) % 1000}`).join('\n') : 'hello';
      const first: ChatMessage[] = [{ role: 'user', content: `Here are some values:\n${filler}\nWhat is the value of k3?` }];
      const withoutGen = e.tokenizer.encode(first.map((m) => `<|im_start|>${m.role}\n${m.content}<|im_end|>\n`).join('')).length;
      const r1 = await e.complete({ messages: first, maxTokens: 16 });
      if (size === 'long') assert.ok(r1.usage.promptTokens >= 1900, `long conversation has ${r1.usage.promptTokens} tokens`);
      const reply = r1.text.split('</think>').pop()!.trim();
      const r2 = await e.complete({ messages: [...first, { role: 'assistant', content: reply }, { role: 'user', content: 'And of k5?' }], maxTokens: 4 });
      const want = Math.floor(withoutGen / 64) * 64;
      assert.ok(r2.usage.cachedTokens >= want, `${size}: cached ${r2.usage.cachedTokens} < ${want}`);
    }
  });
});

/** Cold state after exactly `tokens` (chunked prefill, then the Gated DeltaNet states). */
function coldState(model: Model, tokens: readonly number[]): Float32Array[] {
  const ws = new StepArena(model);
  const mem = allocSequenceMemory(model, tokens.length + 1);
  forwardHidden(model, ws, [{ tokens, start: 0, pageTable: mem.pageTable, kv: mem.kv, state: mem.state, chunked: true }]);
  return mem.state.flatMap((s) => [s.conv, s.ssm]);
}

test('snapshots from chunked prefill, decode and MTP verify (k = 0, 3) equal a cold prefill of that length', async () => {
  const ref = loadModel(TINY_THINK(), createRefKernels());
  const prompt = { prompt: 'Here are some values:\n' + Array.from({ length: 30 }, (_, i) => `- v${i}=${i * 7}`).join('\n'), maxTokens: 150, ignoreEos: true };
  // (k = 1..3 verify-made snapshots are checked bit for bit in prefix-exact.test.ts)
  // The cold references by token sequence: k = 0 and 3 generate the same greedy tokens, so the
  // second engine's snapshots are checked against the same ref prefills, computed once (the
  // ref kernels' prefills were most of this file's time)
  const colds = new Map<string, Float32Array[]>();
  const cold = (tokens: readonly number[]): Float32Array[] => {
    const key = tokens.join(',');
    const have = colds.get(key) ?? coldState(ref, tokens);
    colds.set(key, have);
    return have;
  };
  for (const k of [0, 3]) {
    await withEngine({ model: TINY_THINK(), kernels: KERNELS, specTokens: k, specAdaptive: false, stateTrackInterval: 64 }, async (e) => {
      const done = await e.complete(prompt);
      const tokens = [...done.promptIds, ...done.outputIds];
      const cache = (e as unknown as { prefix: { cache: import('../src/cache/radix-cache.js').RadixCache; state: import('../src/cache/state-pool.js').StatePool } }).prefix;
      let checked = 0;
      for (let p = 64; p < tokens.length; p += 64) {
        const key = prefixKey({ tokens, splits: [done.promptIds.length] } as unknown as Request, tokens.length, 64);
        const m = cache.cache.match(key, p, done.promptIds.length);
        assert.ok(m && m.length === p, `k=${k}: no snapshot at ${p}`);
        const got = cache.state.view(m.snap.slot).flatMap((s) => [s.conv, s.ssm]);
        const want = cold(tokens.slice(0, p));
        got.forEach((g, i) => assert.ok(relErr(g, want[i]!) <= 1e-5, `k=${k} p=${p}: state part ${i} rel err ${relErr(g, want[i]!)}`));
        cache.cache.unlock(m.handle);
        checked++;
      }
      assert.ok(checked >= 3, 'snapshots in prefill and in generation');
      e.checkIntegrity();
    });
  }
});

test('an answer that stops on <|im_end|> is snapshotted at the end of its message: turn 2 resumes there, bit-exact (MTP on and off)', async () => {
  for (const specTokens of [3, 0]) {
    const opts = { model: TINY_THINK(), kernels: KERNELS, specTokens, specAdaptive: false };
    await withEngine(opts, async (e) => {
      const tok = e.tokenizer;
      const imEnd = tok.tokenToId('<|im_end|>')!;
      // four free tokens, then <|im_end|>: the answer closes its message
      const stopAfter4 = (generated: readonly number[]): Uint32Array | null => {
        if (generated.length < 4) return null;
        const mask = new Uint32Array(Math.ceil(e.model.config.vocabSize / 32));
        mask[imEnd >> 5] = 1 << (imEnd & 31);
        return mask;
      };
      const turn1: ChatMessage[] = [{ role: 'user', content: `Values:\n${Array.from({ length: 20 }, (_, i) => `- k${i}=${i * 13}`).join('\n')}\nWhat is k4?` }];
      const t1 = await e.complete({ messages: turn1, maxTokens: 8, logitsAdjust: { bias: null, constraint: historyConstraint(stopAfter4) } });
      assert.equal(t1.outputIds.at(-1), imEnd, 'the answer ends with <|im_end|>');
      for (let i = 0; i < 500 && (e.stats().running + e.stats().waiting > 0); i++) await new Promise((r) => setTimeout(r, 5));
      // turn 2 as a template renders it when the client sends the answer back as generated
      const answerEnd = t1.promptIds.length + t1.outputIds.length + 1;
      const ids = [...t1.promptIds, ...t1.outputIds, ...tok.encode('\n<|im_start|>user\nAnd k7?<|im_end|>\n<|im_start|>assistant\n<think>\n')];
      const turn2 = { promptIds: ids, messageBoundaries: messageEnds(tok, ids), maxTokens: 8 };
      assert.ok(turn2.messageBoundaries.includes(answerEnd), 'the answer ends a message of turn 2');
      const [hot] = await runAll(e, [turn2]);
      const usage = (await e.complete(turn2)).usage; // the same prompt again: whole
      assert.equal(usage.cachedTokens, ids.length, `k=${specTokens}: the same turn 2 again cached ${usage.cachedTokens} of ${ids.length}`);
      const reuse = e.stats().prefixCache!;
      assert.ok(reuse.reprefillTokens <= ids.length - answerEnd, `k=${specTokens}: turn 2 re-prefilled ${reuse.reprefillTokens}, the new message is ${ids.length - answerEnd} tokens`);
      const [cold] = await withEngine({ ...opts, prefixCache: false }, (c) => runAll(c, [turn2]));
      assertSameOutputs([hot!], [cold!], `k=${specTokens}: turn 2`);
      e.checkIntegrity();
    });
  }
});
