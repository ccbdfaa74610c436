// Constraints never lie (issue 48), through the real engine on tiny-think: the two repro
// schemas (once `[{},]` and `{"x":["9309",]` with finish_reason stop) sampled for seeds 0-99,
// MTP on and off, end valid or cut by length, never with an error; and a dead end — a
// deliberately broken grammar, or a stop forced into a constrained answer — ends as an
// error finish with its reason in every dialect that takes a constraint, and in the log.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Engine } from '../src/engine/engine.js';
import type { LogitsAdjust } from '../src/engine/logits-adjust.js';
import { modelStopIds } from '../src/engine/request-rules.js';
import type { ServerContext } from '../src/server/context.js';
import { startServer } from '../src/server/index.js';
import { TokenTexts } from '../src/server/api/logprobs.js';
import { push } from '../src/constrain/frames.js';
import { MaskCache, tokenVocab } from '../src/constrain/mask.js';
import { GrammarConstraint, grammarConstraint } from '../src/constrain/grammar-matcher.js';
import { maskFrom } from './constraint-helpers.js';
import { type State, step } from '../src/constrain/matcher.js';
import { structuredConstraint } from '../src/server/api/structured.js';
import { answerConstraint } from '../src/server/api/thinking.js';
import { createLogger } from '../src/util/log.js';
import { evalPrompts, withEngine } from './engine-helpers.js';
import { violation } from './json-schema-check.js';
import { TINY_THINK } from './paths.js';
import { KERNELS, post, postStream } from './server-helpers.js';

const REPROS = [
  { type: 'array', items: { type: 'object' } },
  { type: 'object', properties: { x: { type: 'array', items: { type: 'string', pattern: '^[a-f0-9]{4}$' } } }, required: ['x'], additionalProperties: false },
];

for (const spec of [0, 3]) {
  test(`repro schemas: seeds 0-99 at temperature 0.7, thinking off, MTP ${spec > 0 ? 'on' : 'off'}: every stop validates, none ends in error`, async () => {
    await withEngine({ model: TINY_THINK(), kernels: KERNELS, specTokens: spec, maxRunning: 25 }, async (engine) => {
      const ctx = { engine, texts: new TokenTexts(engine.tokenizer) } as unknown as ServerContext;
      const prompts = evalPrompts(10);
      for (const schema of REPROS) {
        // what the chat route builds: the schema's grammar, then the closed-reasoning mask
        const make = answerConstraint(ctx, structuredConstraint(ctx, { kind: 'json_schema', name: 't', schema }, null, false), 'closed', null)!;
        const outs = await Promise.all(Array.from({ length: 100 }, (_, seed) => engine.complete({
          messages: prompts[seed % prompts.length]!, think: false, maxTokens: 64, temperature: 0.7, seed, logitsAdjust: { bias: null, constraint: make },
        })));
        let stops = 0;
        outs.forEach((d, seed) => {
          const at = `${JSON.stringify(schema)} seed ${seed}: ${d.finishReason} ${JSON.stringify(d.text)} ${d.error ?? ''}`;
          assert.ok(d.finishReason === 'stop' || d.finishReason === 'length', at);
          if (d.finishReason !== 'stop') return;
          stops++;
          let v: unknown;
          assert.doesNotThrow(() => (v = JSON.parse(d.text)), at);
          assert.equal(violation(schema, v), null, at);
        });
        assert.ok(stops >= 40, `${stops} of 100 ended with stop (the rest by length)`);
        console.log(`MTP ${spec}: ${JSON.stringify(schema)}: ${stops}/100 stop and valid, ${100 - stops} length`);
      }
    });
  });
}

test('a broken grammar (a string of at least 5 and at most 2 characters) ends with an error finish naming the dead end', async () => {
  await withEngine({ model: TINY_THINK(), kernels: KERNELS, specTokens: 2 }, async (engine) => {
    const texts = new TokenTexts(engine.tokenizer);
    const v = tokenVocab(engine.tokenizer, texts, engine.sampleVocab, modelStopIds(engine));
    const broken: State = [push({ t: 'str', ph: 0, n: 0, min: 5, max: 2, u: 0, cp: 0, res: [], rs: [] }, null)];
    const cache = new MaskCache();
    const d = await engine.complete({ messages: evalPrompts(1)[0]!, think: false, maxTokens: 40, temperature: 0, logitsAdjust: { bias: null, constraint: grammarConstraint(v, broken, cache) } });
    const c = new GrammarConstraint(v, broken, cache);
    assert.equal(d.finishReason, 'error', d.text);
    assert.match(d.error ?? '', /structured-output constraint reached a dead end after \d+ generated tokens: no token of the vocabulary can continue/);
    let st = broken;
    for (const b of Buffer.from(d.text, 'utf8')) st = step(st, b);
    assert.ok(st.length > 0, `the output ${JSON.stringify(d.text)} followed the grammar up to its dead end`);
    // the same grammar's messages for the other two ways a constrained output can end early
    assert.match(c.endError([]) ?? '', /was ended after 0 generated tokens before its output was complete/);
    const off = engine.tokenizer.encode('x');
    assert.match(c.endError(off) ?? '', /left its grammar/);
  });
});

/** A stop forced into every constrained answer after 3 tokens (its grammar incomplete). */
function forceEarlyStop(stopIds: readonly number[], words: number): (a: LogitsAdjust | null) => LogitsAdjust | null {
  const only = new Uint32Array(words);
  for (const id of stopIds) only[id >>> 5]! |= 1 << (id & 31);
  // only grammar constraints (incomplete at the start), not a bare closed-reasoning mask
  return (a) => (a?.constraint && a.constraint.start().endError() !== null ? { ...a, constraint: maskFrom(a.constraint, 3, only) } : a);
}

test('a dead end is an error in every dialect that takes a constraint (chat, Responses, Messages; streamed and not) and in the log', async () => {
  const probe = await Engine.load({ model: TINY_THINK(), kernels: KERNELS, maxRunning: 4 });
  const stops = modelStopIds(probe);
  const words = Math.ceil(probe.sampleVocab / 32);
  await probe.close();
  const engine = await Engine.load({ model: TINY_THINK(), kernels: KERNELS, maxRunning: 4 }, { adjustOverride: forceEarlyStop(stops, words) });
  const lines: string[] = [];
  const server = await startServer(engine, { port: 0, logger: createLogger({ level: 'info', format: 'json', stream: { write: (s: string) => lines.push(s) } }) });
  const url = server.url;
  const DEAD = /structured-output constraint was ended after 3 generated tokens before its output was complete/;
  const schema = { type: 'object', properties: { note: { type: 'string' } }, required: ['note'], additionalProperties: false };
  try {
    const chat = { messages: [{ role: 'user', content: 'hi' }], max_tokens: 30, reasoning_effort: 'none', response_format: { type: 'json_schema', json_schema: { name: 'n', schema } } };
    const a = await post(`${url}/v1/chat/completions`, chat);
    assert.equal(a.status, 500);
    assert.match((a.json['error'] as { message: string }).message, DEAD);
    const as = await postStream(`${url}/v1/chat/completions`, { ...chat, stream: true });
    const finish = as.events.flatMap((e) => (e['choices'] as { finish_reason: string | null }[] | undefined) ?? []).map((c) => c.finish_reason).filter((f) => f !== null);
    assert.deepEqual(finish, ['error']);
    assert.match(JSON.stringify(as.events.at(-1)), DEAD);

    const resp = { input: 'hi', max_output_tokens: 30, reasoning: { effort: 'none' }, text: { format: { type: 'json_schema', name: 'n', schema } } };
    const r = await post(`${url}/v1/responses`, resp);
    assert.equal(r.status, 500);
    assert.match((r.json['error'] as { message: string }).message, DEAD);
    const rs = await postStream(`${url}/v1/responses`, { ...resp, stream: true });
    assert.ok(rs.events.some((e) => e['type'] === 'response.failed' && DEAD.test(JSON.stringify(e))), JSON.stringify(rs.events.at(-1)));

    const tool = { name: 'f', description: 'take a note', input_schema: schema };
    const msg = { model: server.modelName, max_tokens: 40, messages: [{ role: 'user', content: 'hi' }], tools: [tool], tool_choice: { type: 'tool', name: 'f' } };
    const m = await post(`${url}/v1/messages`, msg);
    assert.equal(m.status, 500);
    assert.equal(m.json['type'], 'error');
    assert.match((m.json['error'] as { message: string }).message, DEAD);
    const ms = await postStream(`${url}/v1/messages`, { ...msg, stream: true });
    assert.ok(ms.events.some((e) => e['type'] === 'error' && DEAD.test(JSON.stringify(e))), JSON.stringify(ms.events.at(-1)));

    // the server logs each one, at error level, with the reason
    const logged = lines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l['level'] === 'error' && DEAD.test(String(l['error'])));
    assert.equal(logged.length, 6, lines.join(''));
  } finally {
    await server.close();
    await engine.close();
  }
});
