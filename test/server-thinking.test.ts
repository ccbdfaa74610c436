// Closed reasoning masks the think tags: the mask as a function, then on a live
// server where logit_bias pushes `</think>` / `<think>` to the top — after the reasoning closed
// (by the model, by the prompt with thinking off, or by an Anthropic budget) no tag comes out,
// in free text and under a JSON schema alike; MTP on and off give the same tokens; the Anthropic
// budget below 1024 is a 400; reasoning_effort turns thinking off and on.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Engine } from '../src/engine/engine.js';
import { startServer, type RunningServer } from '../src/server/index.js';
import { reasoningClosed, withClosedThinkMask, withReasoningBudget } from '../src/constrain/think.js';
import { historyConstraint, maskAfter } from './constraint-helpers.js';
import { THINK_CLOSE, THINK_OPEN } from '../src/tokenizer/reasoning.js';
import { TINY_THINK } from './paths.js';
import { drained, KERNELS, post } from './server-helpers.js';

const MODEL = 'tiny-think';
const ASK = [{ role: 'user', content: 'What is 12 + 30?' }];
let mtp: Engine;
let plain: Engine;
let servers: RunningServer[];
let openId: number;
let closeId: number;

before(async () => {
  mtp = await Engine.load({ model: TINY_THINK(), kernels: KERNELS, maxRunning: 4, specTokens: 3, specAdaptive: false });
  plain = await Engine.load({ model: TINY_THINK(), kernels: KERNELS, maxRunning: 4, specTokens: 0 });
  servers = [await startServer(mtp, { port: 0, servedModelName: MODEL }), await startServer(plain, { port: 0, servedModelName: MODEL })];
  openId = mtp.tokenizer.tokenToId(THINK_OPEN)!;
  closeId = mtp.tokenizer.tokenToId(THINK_CLOSE)!;
  assert.ok(openId !== undefined && closeId !== undefined, 'tiny-think has single-token think tags');
});
after(async () => {
  for (const s of servers) await s.close();
  await mtp.close();
  await plain.close();
});

const bit = (mask: Uint32Array | null, id: number): boolean => mask === null || ((mask[id >>> 5]! >>> (id & 31)) & 1) === 1;

test('reasoningClosed: open until </think>; closed prompts closed; a bare prompt may open a block only at its first token', () => {
  const ids = { open: 1, close: 2 };
  assert.equal(reasoningClosed([], 'open', ids), false);
  assert.equal(reasoningClosed([5, 6], 'open', ids), false);
  assert.equal(reasoningClosed([5, 2], 'open', ids), true);
  assert.equal(reasoningClosed([], 'closed', ids), true);
  assert.equal(reasoningClosed([], 'none', ids), false);
  assert.equal(reasoningClosed([5], 'none', ids), true);
  assert.equal(reasoningClosed([1, 5], 'none', ids), false);
  assert.equal(reasoningClosed([1, 5, 2], 'none', ids), true);
});

test('withClosedThinkMask: tags masked after the close, intersected with the inner constraint', () => {
  const vocab = 70;
  const innerBits = new Uint32Array(3).fill(0);
  for (const id of [2, 40, 64]) innerBits[id >>> 5]! |= 1 << (id & 31);
  const ids = { open: 40, close: 64 };
  const aloneC = withClosedThinkMask(null, 'open', ids, vocab)!;
  const alone = (g: readonly number[]): Uint32Array | null => maskAfter(aloneC, g);
  assert.equal(alone([3]), null);
  assert.equal(bit(alone([3, 64]), 64), false);
  assert.equal(bit(alone([3, 64]), 40), false);
  assert.equal(bit(alone([3, 64]), 41), true);
  const both = withClosedThinkMask(historyConstraint(() => innerBits), 'closed', ids, vocab)!;
  const m = maskAfter(both, [])!;
  assert.deepEqual([2, 40, 64, 5].map((id) => bit(m, id)), [true, false, false, false]);
  // the budget forces </think> while open; the mask then bans it
  const budgetC = withClosedThinkMask(withReasoningBudget(null, 64, 2, vocab), 'open', ids, vocab)!;
  const budget = (g: readonly number[]): Uint32Array => maskAfter(budgetC, g)!;
  assert.deepEqual([63, 64].map((id) => bit(budget([7, 8]), id)), [false, true]);
  assert.deepEqual([63, 64].map((id) => bit(budget([7, 8, 64]), id)), [true, false]);
});

/** Greedy chat through both servers (MTP on / off): same text; returns the MTP one. */
async function chatBoth(body: Record<string, unknown>): Promise<{ content: string; reasoning: string | null; finish: string }> {
  const got = await Promise.all(servers.map((s) => post(`${s.url}/v1/chat/completions`, { model: MODEL, messages: ASK, temperature: 0, ...body })));
  for (const r of got) assert.equal(r.status, 200, JSON.stringify(r.json));
  const msgs = got.map((r) => (r.json['choices'] as { message: { content: string; reasoning_content: string | null }; finish_reason: string }[])[0]!);
  assert.deepEqual(msgs[0], msgs[1], 'MTP on == off');
  return { content: msgs[0]!.message.content, reasoning: msgs[0]!.message.reasoning_content, finish: msgs[0]!.finish_reason };
}

test('chat: a +100 bias on the think tags cannot bring them back once the reasoning is closed (MTP on == off)', async () => {
  const bias = { logit_bias: { [closeId]: 100, [openId]: 100 }, max_tokens: 24 };
  const off = await chatBoth({ ...bias, reasoning_effort: 'none' });
  assert.equal(off.reasoning, null);
  assert.doesNotMatch(off.content, /<\/?think>/);
  // thinking on: the bias closes the reasoning at once; the tags never follow
  const on = await chatBoth({ ...bias, reasoning_effort: 'high' });
  assert.equal(on.reasoning, '');
  assert.doesNotMatch(on.content, /<\/?think>/);
  const schema = { type: 'object', properties: { note: { type: 'string', maxLength: 40 } }, required: ['note'], additionalProperties: false };
  const json = await chatBoth({ ...bias, max_tokens: 80, response_format: { type: 'json_schema', json_schema: { name: 'n', schema } } });
  assert.doesNotMatch(json.content, /<\/?think>/);
  if (json.finish === 'stop') assert.equal(typeof (JSON.parse(json.content) as { note: string }).note, 'string');
  await drained(mtp);
  await drained(plain);
});

test('engine: a reasoning budget closes the reasoning after that many tokens; the tags never follow', async () => {
  const { ids } = mtp.info.frontend.prompt({ messages: ASK, think: true });
  const ctl = withClosedThinkMask(withReasoningBudget(null, closeId, 3, mtp.sampleVocab), 'open', { open: openId, close: closeId }, mtp.sampleVocab)!;
  const bias = new Map([[openId, 100]]);
  for (const engine of [mtp, plain]) {
    let out: readonly number[] = [];
    for await (const ev of engine.generate({ promptIds: ids, maxTokens: 24, temperature: 0, logitsAdjust: { bias, constraint: ctl } })) {
      if (ev.type === 'done') out = ev.outputIds;
    }
    const at = out.indexOf(closeId);
    assert.ok(at >= 0 && at <= 3, `</think> within the budget: ${out.join(',')}`);
    assert.ok(!out.slice(at + 1).includes(closeId) && !out.slice(at + 1).includes(openId), out.join(','));
  }
});

test('messages: thinking.budget_tokens below 1024 is a 400; reasoning_effort values are checked', async () => {
  const url = servers[0]!.url;
  const r = await post(`${url}/v1/messages`, { model: MODEL, max_tokens: 8, messages: ASK, thinking: { type: 'enabled', budget_tokens: 1023 } });
  assert.equal(r.status, 400);
  assert.match((r.json['error'] as { message: string }).message, /thinking\.budget_tokens must be at least 1024 \(got 1023\)/);
  const bad = await post(`${url}/v1/chat/completions`, { model: MODEL, messages: ASK, max_tokens: 2, reasoning_effort: 'max' });
  assert.equal(bad.status, 400);
  assert.equal((bad.json['error'] as { param: string }).param, 'reasoning_effort');
  const minimal = await chatBoth({ max_tokens: 4, reasoning_effort: 'minimal' });
  assert.equal(minimal.reasoning, null);
  const low = await chatBoth({ max_tokens: 4, reasoning_effort: 'low' });
  assert.equal(typeof low.reasoning, 'string');
  // fields agents send: accepted when they ask for what is served, else a 400 naming them
  const ok = await post(`${url}/v1/chat/completions`, {
    model: MODEL, messages: ASK, max_completion_tokens: 2, modalities: ['text'], verbosity: 'medium', prompt_cache_key: 'k', store: true,
    metadata: { a: 'b' }, service_tier: 'auto', user: 'u', safety_identifier: 's', parallel_tool_calls: false, stream_options: { include_usage: false },
  });
  assert.equal(ok.status, 200, JSON.stringify(ok.json));
  for (const [k, v] of [['verbosity', 'high'], ['modalities', ['text', 'audio']], ['service_tier', 'flex'], ['prompt_cache_retention', '24h']] as const) {
    const r = await post(`${url}/v1/chat/completions`, { model: MODEL, messages: ASK, max_tokens: 2, [k]: v });
    assert.equal(r.status, 400, k);
    assert.equal((r.json['error'] as { param: string }).param, k);
  }
  // the template kwarg wins over reasoning_effort
  const kw = await chatBoth({ max_tokens: 4, reasoning_effort: 'high', chat_template_kwargs: { enable_thinking: false } });
  assert.equal(kw.reasoning, null);
});
