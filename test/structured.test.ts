// Structured output: the schema compiler's errors, the byte matcher on valid / invalid
// documents, the fast token mask (sorted-vocabulary walk + cache) against a plain per-token
// reference, and constrained decoding on tiny-think: MTP on == off bit-exact (greedy, thinking
// on: the constraint starts after </think>), and 100 sampled answers that all validate.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Engine } from '../src/engine/engine.js';
import type { Constraint } from '../src/constrain/constraint.js';
import type { ServerContext } from '../src/server/context.js';
import { TokenTexts } from '../src/server/api/logprobs.js';
import { canEnd, type State, step, val } from '../src/constrain/matcher.js';
import { computeMask, MaskCache, tokenVocab } from '../src/constrain/mask.js';
import { GrammarConstraint } from '../src/constrain/grammar-matcher.js';
import { forcedCallState, structuredConstraint } from '../src/server/api/structured.js';
import { compileSchema, SchemaError } from '../src/constrain/schema.js';
import { grownVocab } from '../src/cli/bench-grammar.js';
import { vocabFromBytes } from '../src/constrain/mask.js';
import { parseAnswer } from '../src/server/api/answer.js';
import { extractFinalAnswer } from '../src/tokenizer/reasoning.js';
import { evalPrompts, sameBits, withEngine } from './engine-helpers.js';
import { violation } from './json-schema-check.js';
import { TINY_THINK } from './paths.js';
import { KERNELS } from './server-helpers.js';
import { referenceMask } from './structured-walks.js';
import { registerIdnaHostnames } from '../src/constrain/idna/index.js';

registerIdnaHostnames(); // hostnames as the server compiles them (with the A-label check)

const SCHEMA = {
  type: 'object',
  properties: {
    answer: { type: 'integer' },
    unit: { enum: ['cm', 'kg', null] },
    note: { type: 'string', maxLength: 12 },
    tags: { type: 'array', items: { type: 'string', minLength: 1, maxLength: 4 }, maxItems: 3 },
    ok: { type: 'boolean' },
    ratio: { anyOf: [{ type: 'number' }, { type: 'null' }] },
  },
  required: ['answer', 'unit', 'ok'],
  additionalProperties: false,
};

function matches(schema: unknown, text: string): boolean {
  let st: State = [val(compileSchema(schema), null)];
  for (const b of Buffer.from(text, 'utf8')) {
    st = step(st, b);
    if (st.length === 0) return false;
  }
  return st.some(canEnd);
}

test('schema compiler: unsupported keywords and bad schemas are errors naming the place', () => {
  const err = (s: unknown): string => {
    try {
      compileSchema(s, 'schema');
    } catch (e) {
      assert.ok(e instanceof SchemaError);
      return e.message;
    }
    return 'no error';
  };
  assert.match(err({ type: 'array', uniqueItems: true }), /schema: the keyword "uniqueItems" \(item uniqueness, enforced only where the items are enums, consts, booleans or null \(at most 64 values\)\) cannot be enforced/);
  assert.match(err({ type: 'string', pattern: '(?=a)b' }), /schema\.pattern: pattern "\(\?=a\)b": lookahead and lookbehind/);
  assert.match(err({ type: 'string', pattern: '(a)\\1' }), /backreferences are not supported/);
  assert.match(err({ $ref: 'https://example.com/s.json' }), /\$ref "https:\/\/example.com\/s.json" is not supported/);
  assert.equal(err({ type: 'string', pattern: '^[a-z]+$', format: 'date', id: 'x', 'x-vendor': 1, title: 't', examples: [1], nullable: true }), 'no error');
  assert.match(err({ type: 'object', properties: { a: { type: 'strin' } } }), /schema\.properties\.a\.type "strin"/);
  assert.match(err({ type: 'object', properties: {}, required: 'x' }), /required must be a list of names/);
  assert.match(err({ $ref: '#/$defs/a', $defs: { a: { $ref: '#/$defs/a' } } }), /recursive/);
  assert.match(err({ type: 'string', minLength: 5, maxLength: 2 }), /minLength 5 is above maxLength 2/);
  assert.match(err([]), /must be a JSON Schema object/);
  assert.equal(err({ $defs: { p: { type: 'integer' } }, type: 'object', properties: { a: { $ref: '#/$defs/p' } }, title: 'x' }), 'no error');
});

test('matcher: accepts documents that validate, rejects the rest (compact JSON)', () => {
  const good = ['{"answer":12,"unit":"cm","ok":true}', '{"answer":-3,"unit":null,"note":"héllo wörld","ok":false}',
    '{"answer":0,"unit":"kg","tags":["a","bcd"],"ok":true,"ratio":1.5e-3}', '{"answer":7,"unit":"kg","tags":[],"ok":true,"ratio":null}'];
  for (const g of good) {
    assert.ok(matches(SCHEMA, g), g);
    assert.equal(violation(SCHEMA, JSON.parse(g)), null, g);
  }
  // any key order
  assert.ok(matches(SCHEMA, '{"unit":"cm","ok":true,"answer":1}'));
  const bad = ['{"answer":1.5,"unit":"cm","ok":true}', '{"answer":1,"answer":1,"unit":"cm","ok":true}', '{"answer":1,"unit":"m","ok":true}',
    '{"answer":1,"unit":"cm"}', '{"answer":1,"unit":"cm","ok":true,"x":1}', '{"answer":1,"unit":"cm","note":"thirteen chars","ok":true}',
    '{"answer":1,"unit":"cm","tags":["abcde"],"ok":true}', '{"answer":1,"unit":"cm","tags":[""],"ok":true}', '{"answer":01,"unit":"cm","ok":true}',
    '{"answer":1,"unit":"cm","ok":true} ', '{ "answer":1,"unit":"cm","ok":true}'];
  for (const b of bad) assert.ok(!matches(SCHEMA, b), b);
  // bounds the grammar enforces by shape: minimum 0, maximum 10^d - 1 (integers), safe-integer bounds
  assert.ok(matches({ type: 'integer', minimum: 0, maximum: 99 }, '99') && !matches({ type: 'integer', minimum: 0, maximum: 99 }, '100'));
  assert.ok(!matches({ type: 'integer', minimum: 0 }, '-1') && !matches({ type: 'number', minimum: 0 }, '-0.5'));
  assert.ok(matches({ type: 'integer', minimum: -9007199254740991, maximum: 9007199254740991 }, '-123456789012345'));
  assert.ok(!matches({ type: 'integer' }, '1234567890123456'), 'at most 15 digits: every integer is safe');
  assert.ok(matches({ type: 'integer', minimum: 1 }, '1') && !matches({ type: 'integer', minimum: 1 }, '0'));
  assert.ok(matches({ type: 'number', maximum: 5 }, '4.99') && !matches({ type: 'number', maximum: 5 }, '5.01'));
  assert.ok(matches({}, '[1,{"a":"b"},null]'));
  assert.ok(matches({ type: 'object' }, '{"a":{"b":[true,{"c":-0.5}]}}'));
  assert.ok(!matches({ type: 'object' }, '[]'));
});


test('token masks: the fast walk equals the per-token reference along documents (tiny-think vocabulary)', async () => {
  await withEngine({ model: TINY_THINK(), kernels: 'ref', specTokens: 0 }, async (engine) => {
    const texts = new TokenTexts(engine.tokenizer);
    const stops = [...new Set([...engine.model.config.eosTokenIds, ...engine.tokenizer.stopIds()])];
    const v = tokenVocab(engine.tokenizer, texts, engine.sampleVocab, stops);
    const docs: [unknown, string][] = [
      [SCHEMA, '{"answer":12,"unit":"cm","note":"a\\"b\\u00e9","tags":["x"],"ok":true,"ratio":0.25}'],
      [{ type: 'object' }, '{"k":[1,{"z":null}],"s":"v"}'],
      [{ type: 'array', items: { type: 'number' }, minItems: 2 }, '[1e5,-0.0,3]'],
    ];
    const tool = { name: 'f', parameters: { type: 'object', properties: { q: { type: 'string', maxLength: 9 }, n: { type: 'integer' } }, required: ['q'] } };
    const calls: [State, string][] = [
      [forcedCallState([tool], 'xml'), '<tool_call>\n<function=f>\n<parameter=q>\nab\n<c d\n</parameter>\n<parameter=n>\n12\n</parameter>\n</function>\n</tool_call>'],
      [forcedCallState([tool], 'json'), '<tool_call>\n{"name":"f","arguments":{"q":"x y"}}\n</tool_call>'],
    ];
    let checked = 0;
    for (const [schemaOrState, doc] of [...docs, ...calls]) {
      let st: State = Array.isArray(schemaOrState) ? schemaOrState as State : [val(compileSchema(schemaOrState), null)];
      const bytes = Buffer.from(doc, 'utf8');
      for (let i = 0; i <= bytes.length; i++) {
        assert.deepEqual(computeMask(v, st), referenceMask(v, st, engine.sampleVocab), `${doc} after ${i} bytes`);
        checked++;
        if (i < bytes.length) st = step(st, bytes[i]!);
      }
      assert.ok(st.some(canEnd), doc);
    }
    assert.ok(checked > 60);
    // the cache returns what computeMask gives
    const cache = new MaskCache(4);
    const st: State = [val(compileSchema(SCHEMA), null)];
    assert.deepEqual(cache.get(v, st), computeMask(v, st));
    assert.equal(cache.get(v, st), cache.get(v, st));
    // a constraint follows generated ids (and rewinds for drafts)
    const c = new GrammarConstraint(v, st, new MaskCache());
    const ids = engine.tokenizer.encode('{"answer":1');
    const a = c.allowed(ids).slice();
    c.allowed(engine.tokenizer.encode('{"answer":2,'));
    assert.deepEqual(c.allowed(ids), a);
  });
});

test('token masks: fast == reference on a grown vocabulary (multi-byte and partial UTF-8 tokens, escapes, bounded strings, XML text)', async () => {
  await withEngine({ model: TINY_THINK(), kernels: 'ref', specTokens: 0 }, async (engine) => {
    const texts = new TokenTexts(engine.tokenizer);
    const base = Array.from({ length: engine.tokenizer.size }, (_, id) => (engine.tokenizer.specialIds.has(id) ? null : Uint8Array.from(texts.get(id).bytes)));
    const grown = grownVocab(base, 5000, 3);
    // a few tokens cut inside a character, as byte-level vocabularies have
    const cut = grown.slice(1000, 1100).map((b) => Uint8Array.from([...b, 0xe4, 0xb8]));
    const v = vocabFromBytes([...grown, ...cut].map((b) => (b.length > 0 ? b : null)), engine.tokenizer.stopIds());
    const schema = { type: 'object', properties: { s: { type: 'string', minLength: 2, maxLength: 6 }, t: { type: 'string' }, k: { type: 'object' } }, required: ['s'] };
    const tool = { name: 'f', parameters: { type: 'object', properties: { q: { type: 'string', maxLength: 5 } }, required: ['q'] } };
    const docs: [State, string][] = [
      [[val(compileSchema(schema), null)], '{"s":"日本語x","t":"a\\\"b\\n — ok","k":{"中文":"字"}}'],
      [forcedCallState([tool], 'xml'), '<tool_call>\n<function=f>\n<parameter=q>\nañ\n\n</parameter>\n</function>\n</tool_call>'],
    ];
    for (const [start, doc] of docs) {
      let st = start;
      const bytes = Buffer.from(doc, 'utf8');
      for (let i = 0; i <= bytes.length; i++) {
        if (i % 2 === 0) assert.deepEqual(computeMask(v, st), referenceMask(v, st, grown.length + cut.length), `${doc} after ${i} bytes`);
        if (i < bytes.length) st = step(st, bytes[i]!);
      }
      assert.ok(st.some(canEnd), doc);
    }
  });
});

/** Server-side constraint factory over an engine (what the chat route builds). */
function constraintFor(engine: Engine, schema: unknown, thinking: boolean): Constraint {
  const ctx = { engine, texts: new TokenTexts(engine.tokenizer) } as unknown as ServerContext;
  return structuredConstraint(ctx, { kind: 'json_schema', name: 't', schema }, null, thinking)!;
}

test('constrained decoding: MTP on == MTP off bit-exact (greedy, thinking on); every answer validates', async () => {
  const prompts = evalPrompts(6);
  const run = (k: number, draftVocab?: number) => withEngine({
    model: TINY_THINK(), kernels: KERNELS, specTokens: k, specAdaptive: false, maxRunning: 6, ...(draftVocab ? { draftVocab } : {}),
  }, async (engine) => {
    const make = constraintFor(engine, SCHEMA, true);
    return Promise.all(prompts.map(async (messages) => {
      const logits: Float32Array[] = [];
      const d = await engine.complete({
        messages, maxTokens: 160, temperature: 0, logitsAdjust: { bias: null, constraint: make },
        captureLogits: (l) => logits.push(l.slice()),
      });
      return { ids: [...d.outputIds], text: d.text, finish: d.finishReason, logits, spec: d.spec };
    }));
  });
  const off = await run(0);
  const on = await run(3);
  // a draft head of 40 ids: where the constraint allows none of them the drafter proposes
  // a sure-to-be-rejected draft; the output is still the same
  const narrow = await run(2, 40);
  narrow.forEach((r, i) => assert.deepEqual(r.ids, off[i]!.ids, `draft vocab 40: request ${i}`));
  let validated = 0;
  on.forEach((r, i) => {
    assert.deepEqual(r.ids, off[i]!.ids, `request ${i}`);
    assert.equal(r.text, off[i]!.text);
    r.logits.forEach((l, s) => assert.ok(sameBits(l, off[i]!.logits[s]!), `request ${i} step ${s}`));
    if (r.finish === 'stop') {
      const answer = parseAnswer(r.text, true, null);
      assert.ok(answer.reasoning !== null);
      assert.equal(violation(SCHEMA, JSON.parse(answer.content)), null, answer.content);
      validated++;
    }
  });
  assert.ok(validated >= 4, `${validated} of ${on.length} finished within the budget`);
  assert.ok(on.some((r) => (r.spec?.accepted ?? 0) > 0), 'drafts were accepted under the constraint');
});

test('constrained decoding: 100 sampled answers (temperature 1, MTP on) all parse and validate', async () => {
  // a small schema keeps the answers short (the suite's time budget); SCHEMA's keywords are
  // covered by the greedy test above and the matcher / mask tests
  const schema = {
    type: 'object', additionalProperties: false, required: ['answer', 'unit', 'ok'],
    properties: { answer: { type: 'integer' }, unit: { enum: ['cm', null] }, ok: { type: 'boolean' }, w: { type: 'string', maxLength: 3 } },
  };
  await withEngine({ model: TINY_THINK(), kernels: KERNELS, specTokens: 3, maxRunning: 25 }, async (engine) => {
    const make = constraintFor(engine, schema, false);
    const prompts = evalPrompts(10);
    const outs = await Promise.all(Array.from({ length: 100 }, (_, i) => engine.complete({
      messages: prompts[i % prompts.length]!, think: false, maxTokens: 80, temperature: 1, seed: 1000 + i,
      logitsAdjust: { bias: null, constraint: make },
    })));
    for (const d of outs) {
      assert.equal(d.finishReason, 'stop', d.text);
      const text = extractFinalAnswer(d.text);
      let v: unknown;
      assert.doesNotThrow(() => (v = JSON.parse(text)), text);
      assert.equal(violation(schema, v), null, text);
    }
    assert.ok(new Set(outs.map((d) => d.text)).size > 20, 'samples differ');
  });
});
