// The wider JSON Schema language of structured output: the matcher on documents
// per keyword, the fast token mask against a per-token reference where regexes and object keys
// are walked, and the two bugs of the issue through the engine on tiny-think — the anyOf with
// sibling keywords and the typeless range — with 100 sampled answers each, every one checked
// by an independent validator; 100 sampled hostnames and 40 forced A-labels, each valid; plus
// MTP on == off bit-exact under a regex-heavy schema.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Engine } from '../src/engine/engine.js';
import type { Constraint } from '../src/constrain/constraint.js';
import type { ServerContext } from '../src/server/context.js';
import { TokenTexts } from '../src/server/api/logprobs.js';
import { canEnd, type State, step, val } from '../src/constrain/matcher.js';
import { computeMask, vocabFromBytes } from '../src/constrain/mask.js';
import { forcedCallState, structuredConstraint } from '../src/server/api/structured.js';
import { compileSchema, type CompileOptions } from '../src/constrain/schema.js';
import { grownVocab } from '../src/cli/bench-grammar.js';
import { aLabelValid, hasAcePrefix } from '../src/constrain/idna/idna.js';
import { extractFinalAnswer } from '../src/tokenizer/reasoning.js';
import { evalPrompts, sameBits, withEngine } from './engine-helpers.js';
import { violation } from './json-schema-check.js';
import { TINY_THINK } from './paths.js';
import { KERNELS } from './server-helpers.js';
import { referenceMask } from './structured-walks.js';
import { registerIdnaHostnames } from '../src/constrain/idna/index.js';

registerIdnaHostnames(); // hostnames as the server compiles them (with the A-label check)

function matches(schema: unknown, text: string, opts: CompileOptions = {}): boolean {
  let st: State = [val(compileSchema(schema, 'schema', opts), null)];
  for (const b of Buffer.from(text, 'utf8')) {
    st = step(st, b);
    if (st.length === 0) return false;
  }
  return st.some(canEnd);
}

function check(schema: unknown, good: readonly string[], bad: readonly string[], opts: CompileOptions = {}): void {
  for (const g of good) assert.ok(matches(schema, g, opts), `${JSON.stringify(schema)} should accept ${g}`);
  for (const b of bad) assert.ok(!matches(schema, b, opts), `${JSON.stringify(schema)} should reject ${b}`);
}

/** The two bugs: siblings of anyOf were dropped; a typeless range was ignored. */
const ANYOF_SIBLINGS = { type: 'object', properties: { a: { type: 'integer' } }, required: ['a'], additionalProperties: false, anyOf: [{ required: ['a'] }] };
const TYPELESS_RANGE = { minimum: 0, maximum: 9 };

test('matcher: the issue\'s bugs — anyOf siblings and a typeless range hold', () => {
  check(ANYOF_SIBLINGS, ['{"a":1}', '{"a":-20}'], ['1', '{}', '{"a":1,"b":2}', '{"a":"x"}']);
  check(TYPELESS_RANGE, ['0', '9', '4.5', '"24"', 'null', '[24]', '{"x":24}'], ['24', '-1', '9.01', '10']);
});

test('matcher: pattern, format, numeric ranges, lengths', () => {
  check({ type: 'string', pattern: '^[a-z]+-[0-9]{2}$' }, ['"ab-12"', '"z-00"'], ['"ab-1"', '"Ab-12"', '"ab-123"', '""']);
  check({ type: 'string', pattern: 'é+' }, ['"xéé"', '"\\u00e9"'], ['"e"', '"x"']); // unanchored, escapes decoded
  check({ type: 'string', format: 'date' }, ['"2024-02-29"', '"1999-12-31"'], ['"2023-02-29"', '"2024-13-01"', '"2024-4-01"']);
  check({ type: 'string', format: 'date-time' }, ['"2024-01-02T03:04:05Z"', '"2024-01-02t03:04:05.5+05:30"', '"1998-12-31T23:59:60Z"'],
    ['"2024-01-02 03:04:05Z"', '"2024-01-02T03:04:60Z"']);
  check({ type: 'string', format: 'email' }, ['"a.b@example.com"'], ['"a..b@example.com"', '"@x.com"']);
  check({ type: 'string', format: 'uuid' }, ['"123e4567-e89b-12d3-a456-426614174000"'], ['"123e4567e89b12d3a456426614174000"']);
  check({ type: 'string', format: 'ipv4' }, ['"192.168.0.1"'], ['"256.1.1.1"', '"01.1.1.1"']);
  check({ type: 'string', format: 'ipv6' }, ['"::1"', '"2001:db8::8a2e:370:7334"'], ['"1:::2"']);
  check({ type: 'string', format: 'hostname' }, ['"example.com"', '"a--b.com"'], ['"-a.com"', '"a_b.com"']);
  check({ type: 'string', format: 'uri' }, ['"https://example.com/a?b=c#d"', '"urn:isbn:0451450523"'], ['"//example.com"', '"a b:c"']);
  check({ type: 'string', format: 'duration' }, ['"P1Y2M3DT4H5M6S"', '"PT36H"', '"P4W"'], ['"P"', '"PT"', '"P1S"']);
  check({ type: 'string', format: 'time' }, ['"12:30:00Z"', '"15:59:60-08:00"'], ['"12:30:00"', '"15:58:60-08:00"']);
  check({ type: 'string', minLength: 2, maxLength: 3 }, ['"ab"', '"日本語"'], ['"a"', '"abcd"']);
  // a regex must still fit in the room maxLength leaves: no prefix that cannot be finished
  const prefixAlive = (schema: unknown, text: string): boolean => {
    let st: State = [val(compileSchema(schema), null)];
    for (const b of Buffer.from(text, 'utf8')) st = step(st, b);
    return st.length > 0;
  };
  assert.ok(prefixAlive({ type: 'string', format: 'email', maxLength: 8 }, '"abcdef'));
  assert.ok(!prefixAlive({ type: 'string', format: 'email', maxLength: 8 }, '"abcdefg'), 'no room left for "@" and a host');
  assert.ok(!prefixAlive({ type: 'string', pattern: '^a{5}$', maxLength: 4 }, '"'), 'an unsatisfiable regex dies at once');
  // zod .int().min(1).max(5), .positive(), and decimals
  check({ type: 'integer', minimum: 1, maximum: 5 }, ['1', '5'], ['0', '6', '1.5', '-1']);
  check({ type: 'number', exclusiveMinimum: 0 }, ['0.5', '7'], ['0', '-1', '0.0', '1e3']); // ranged numbers are written without exponents
  check({ type: 'number', minimum: -2.5, maximum: 3.75 }, ['-2.5', '3.75', '0', '-0.1'], ['3.76', '-2.51', '4']);
  check({ type: 'integer', multipleOf: 5, minimum: 3 }, ['5', '10', '1000'], ['3', '7', '0']);
  check({ type: 'integer', minimum: 100, maximum: 100 }, ['100'], ['10', '1000']);
});

test('matcher: combinators with siblings, objects in any order, refs', () => {
  check({ allOf: [{ type: 'object', properties: { a: { type: 'string' } }, required: ['a'] }, { properties: { b: { type: 'integer' } }, required: ['b'] }],
    additionalProperties: false, properties: { a: true, b: true } }, ['{"a":"x","b":1}', '{"b":1,"a":"x"}'], ['{"a":"x"}', '{"a":"x","b":1,"c":2}', '{"a":1,"b":1}']);
  check({ oneOf: [{ type: 'string', maxLength: 2 }, { type: 'integer' }], maxLength: 1 }, ['"a"', '7'], ['"ab"', '1.5']);
  check({ properties: { a: { type: 'string' } }, additionalProperties: { type: 'integer' } }, ['{"a":"x","z":3}', '{"z":3,"a":"x"}'], ['{"z":"x"}', '{"a":1}']);
  check({ type: 'object', patternProperties: { '^x-': { type: 'integer' } }, additionalProperties: false }, ['{"x-a":1}', '{}'], ['{"y":1}', '{"x-a":"s"}']);
  check({ type: 'object', propertyNames: { maxLength: 2 } }, ['{"ab":1}'], ['{"abc":1}']);
  check({ type: 'object', dependentRequired: { a: ['b'] } }, ['{"b":1}', '{"a":1,"b":2}'], ['{"a":1}']);
  check({ type: 'object', minProperties: 1, maxProperties: 2 }, ['{"a":1}', '{"a":1,"b":2}'], ['{}', '{"a":1,"b":2,"c":3}']);
  check({ type: 'object', minProperties: 2 }, ['{"a":1,"b":2}'], ['{"a":1,"a":2}']); // distinct keys counted
  const tree = {
    $defs: { node: { type: 'object', properties: { v: { type: 'integer' }, kids: { type: 'array', items: { $ref: '#/$defs/node' } } }, required: ['v'], additionalProperties: false } },
    $ref: '#/$defs/node',
  };
  check(tree, ['{"v":1,"kids":[{"v":2,"kids":[{"v":3}]}]}'], ['{"v":1,"kids":[{"kids":[]}]}', '{"v":1,"kids":[{"v":2,"x":1}]}']);
  check({ definitions: { s: { type: 'string' } }, type: 'array', items: { $ref: '#/definitions/s' } }, ['["a","b"]'], ['[1]']);
  check({ type: 'array', prefixItems: [{ type: 'string' }, { type: 'integer' }], items: false }, ['["a",1]', '["a"]'], ['["a",1,2]', '[1]']);
  check({ type: ['string', 'null'] }, ['"x"', 'null'], ['1']);
  check({ enum: [{ a: 1, b: [true, null] }, 'x', 2.5] }, ['{"b":[true,null],"a":1}', '"x"', '2.5'], ['{"a":1}', '2']);
  check({ const: { k: 'é' } }, ['{"k":"é"}'], ['{"k":"e"}']);
  // draft-04 id, vendor keys and annotations are ignored; unenforceable assertions dropped only when lenient
  check({ id: 'http://x/y#', 'x-foo': 1, title: 't', type: 'integer', examples: [1] }, ['1'], ['"1"']);
  check({ type: 'array', uniqueItems: true, maxItems: 2, items: { type: 'integer' } }, ['[1,1]', '[]'], ['[1,2,3]', '["a"]'], { lenient: true });
  assert.throws(() => compileSchema({ type: 'array', uniqueItems: true }), /uniqueItems/);
});

test('matcher: an XML tool call enforces a parameter\'s pattern on the raw text', () => {
  const tool = { name: 'f', parameters: { type: 'object', properties: { code: { type: 'string', pattern: '^[A-Z]{3}$' }, n: { type: 'integer', minimum: 1 } }, required: ['code'] } };
  const run = (text: string): boolean => {
    let st: State = forcedCallState([tool], 'xml');
    for (const b of Buffer.from(text, 'utf8')) st = step(st, b);
    return st.some(canEnd);
  };
  const call = (code: string, n = ''): string => `<tool_call>\n<function=f>\n<parameter=code>\n${code}\n</parameter>\n${n}</function>\n</tool_call>`;
  assert.ok(run(call('ABC')));
  assert.ok(run(call('ABC', '<parameter=n>\n3\n</parameter>\n')));
  for (const bad of [call('ABCD'), call('AB'), call('abc'), call('ABC', '<parameter=n>\n0\n</parameter>\n')]) assert.ok(!run(bad), bad);
  // no dead end: a marker byte is held only if the value may end there or hold that byte
  let st: State = forcedCallState([tool], 'xml');
  for (const b of Buffer.from('<tool_call>\n<function=f>\n<parameter=code>\nAB', 'utf8')) st = step(st, b);
  assert.equal(step(st, 0x0a).length, 0, 'the value "AB" cannot end, and a newline cannot join it');
});


test('token masks: fast == reference through regex strings, pattern keys and any-order objects (grown vocabulary)', async () => {
  await withEngine({ model: TINY_THINK(), kernels: 'ref', specTokens: 0 }, async (engine) => {
    const texts = new TokenTexts(engine.tokenizer);
    const base = Array.from({ length: engine.tokenizer.size }, (_, id) => (engine.tokenizer.specialIds.has(id) ? null : Uint8Array.from(texts.get(id).bytes)));
    const grown0 = grownVocab(base, 4000, 5);
    // tokens cut inside a character, as byte-level vocabularies have
    const grown = [...grown0, ...grown0.slice(1000, 1100).map((b) => Uint8Array.from([...b, 0xe6, 0x97]))];
    const v = vocabFromBytes(grown.map((b) => (b.length > 0 ? b : null)), engine.tokenizer.stopIds());
    const schema = {
      type: 'object', additionalProperties: false, required: ['id', 'when'],
      properties: { id: { type: 'string', pattern: '^[a-z]{2}-[0-9]+$' }, when: { type: 'string', format: 'date' }, n: { type: 'number', minimum: 1.5, maximum: 20 },
        nm: { type: 'string', pattern: '^[a-zé日本 ]{1,8}$' } },
      patternProperties: { '^x-': { type: 'string', maxLength: 4 } },
    };
    const open = { type: 'object', properties: { a: { type: 'integer' }, ab: { type: 'string', maxLength: 3 } }, required: ['a'], propertyNames: { maxLength: 6 } };
    const named = { type: 'object', properties: { alpha: { type: 'integer' }, beta: { type: 'string', maxLength: 3 } }, additionalProperties: false };
    // hostnames: inside an A-label the IDNA label check joins the walk (and a tight maxLength)
    const hosts = { type: 'object', properties: { h: { type: 'string', format: 'hostname' }, m: { type: 'string', format: 'hostname', maxLength: 15 } } };
    const keyPattern = { type: 'object', properties: { ab: { type: 'integer' } }, propertyNames: { pattern: '^[a-zé]+$', maxLength: 5 }, additionalProperties: { type: 'string' } };
    const docs: [unknown, string][] = [[schema, '{"when":"2024-02-29","x-é":"ok","id":"ab-12","n":19.25}'], [schema, '{"id":"zz-0","nm":"日本 é","when":"2000-01-01"}'],
      [open, '{"zé":"x","ab":"日本","a":1,"b\\"c":[1],"\\u0041":2}'], [named, '{"beta":"qé","alpha":2}'], [keyPattern, '{"zé":"x","ab":1,"abc":"y"}'],
      [hosts, '{"h":"a.xn--bcher-kva","m":"xn--9n2bp8q.b\\u0065"}']];
    const hostTool = { name: 'f', parameters: { type: 'object', properties: { host: { type: 'string', format: 'hostname', maxLength: 20 } }, required: ['host'] } };
    const xmlHost = `<tool_call>\n<function=f>\n<parameter=host>\nb.xn--bcher-kva\n</parameter>\n</function>\n</tool_call>`;
    const starts: [State, string][] = [...docs.map(([s0, doc]): [State, string] => [[val(compileSchema(s0), null)], doc]), [forcedCallState([hostTool], 'xml'), xmlHost]];
    for (const [start, doc] of starts) {
      let st: State = start;
      const bytes = Buffer.from(doc, 'utf8');
      for (let i = 0; i <= bytes.length; i++) {
        assert.deepEqual(computeMask(v, st), referenceMask(v, st, grown.length), `${doc} after ${i} bytes`);
        if (i < bytes.length) st = step(st, bytes[i]!);
      }
      assert.ok(st.some(canEnd), doc);
    }
  });
});

function constraintFor(engine: Engine, schema: unknown, thinking: boolean): Constraint {
  const ctx = { engine, texts: new TokenTexts(engine.tokenizer) } as unknown as ServerContext;
  return structuredConstraint(ctx, { kind: 'json_schema', name: 't', schema }, null, thinking)!;
}

for (const [name, schema] of [['anyOf with siblings', ANYOF_SIBLINGS], ['typeless range', TYPELESS_RANGE]] as const) {
  test(`constrained decoding: 100 sampled answers under the issue's ${name} schema all validate (MTP on)`, async () => {
    await withEngine({ model: TINY_THINK(), kernels: KERNELS, specTokens: 3, maxRunning: 25 }, async (engine) => {
      const make = constraintFor(engine, schema, false);
      const prompts = evalPrompts(10);
      const outs = await Promise.all(Array.from({ length: 100 }, (_, i) => engine.complete({
        messages: prompts[i % prompts.length]!, think: false, maxTokens: 48, temperature: 1, seed: 2000 + i,
        logitsAdjust: { bias: null, constraint: make },
      })));
      let finished = 0;
      for (const d of outs) {
        if (d.finishReason !== 'stop') continue; // cut by maxTokens: not an answer
        finished++;
        const text = extractFinalAnswer(d.text);
        let v: unknown;
        assert.doesNotThrow(() => (v = JSON.parse(text)), text);
        assert.equal(violation(schema as Record<string, unknown>, v), null, text);
      }
      assert.ok(finished >= 60, `${finished} of 100 finished`);
    });
  });
}

/** An independent hostname check: LDH labels by RFC 1123 (no "--" in positions 3–4), A-labels by
 * the IDNA validator (unit-tested on known cases in test/idna.test.ts). */
function hostnameValid(h: string): boolean {
  if (h.length === 0 || h.length > 253) return false;
  return h.split('.').every((l) => (hasAcePrefix(l) ? aLabelValid(l) : /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/i.test(l) && l.slice(2, 4) !== '--'));
}

test('constrained decoding: 100 sampled hostnames, and 40 forced A-labels in a tight maxLength, are all valid and end (MTP on)', async () => {
  await withEngine({ model: TINY_THINK(), kernels: KERNELS, specTokens: 3, maxRunning: 25 }, async (engine) => {
    const prompts = evalPrompts(10);
    // a nudge towards the closing quote and label dots keeps the samples short (the grammar
    // still decides where they may go)
    const texts = new TokenTexts(engine.tokenizer);
    const bias = new Map<number, number>();
    for (let id = 0; id < engine.sampleVocab; id++) {
      const b = texts.get(id).bytes;
      if (b.includes(0x22)) bias.set(id, 12);
      else if (b.includes(0x2e)) bias.set(id, 4);
    }
    for (const [schema, aLabels] of [[{ type: 'string', format: 'hostname' }, false], [{ type: 'string', format: 'hostname', pattern: '^xn--', maxLength: 12 }, true]] as const) {
      const make = constraintFor(engine, schema, false);
      const n = aLabels ? 40 : 100;
      const outs = await Promise.all(Array.from({ length: n }, (_, i) => engine.complete({
        messages: prompts[i % prompts.length]!, think: false, maxTokens: 20, temperature: 1, seed: 3000 + i,
        logitsAdjust: { bias, constraint: make },
      })));
      let finished = 0;
      for (const d of outs) {
        assert.ok(d.finishReason === 'stop' || d.finishReason === 'length', `${d.finishReason}: ${d.text}`);
        if (d.finishReason !== 'stop') continue; // cut by maxTokens: not an answer
        finished++;
        const host = JSON.parse(extractFinalAnswer(d.text)) as string;
        assert.ok(hostnameValid(host), host);
        if (aLabels) assert.ok(host.startsWith('xn--'), host);
      }
      assert.ok(finished >= n / 2, `${JSON.stringify(schema)}: ${finished} of ${n} finished`);
    }
  });
});

test('constrained decoding: MTP on == MTP off bit-exact under formats, patterns, ranges and any-order keys (greedy)', async () => {
  const schema = {
    type: 'object', required: ['code', 'day', 'score'], additionalProperties: false,
    properties: { code: { type: 'string', pattern: '^[A-Z]{2}[0-9]{1,3}$' }, day: { type: 'string', format: 'date' }, score: { type: 'integer', minimum: 1, maximum: 5 },
      tags: { type: 'array', items: { type: 'string', maxLength: 6 }, maxItems: 2 } },
  };
  const prompts = evalPrompts(4);
  const run = (k: number) => withEngine({ model: TINY_THINK(), kernels: KERNELS, specTokens: k, specAdaptive: false, maxRunning: 4 }, async (engine) => {
    const make = constraintFor(engine, schema, false);
    return Promise.all(prompts.map(async (messages) => {
      const logits: Float32Array[] = [];
      const d = await engine.complete({ messages, think: false, maxTokens: 60, temperature: 0, logitsAdjust: { bias: null, constraint: make }, captureLogits: (l) => logits.push(l.slice()) });
      return { ids: [...d.outputIds], text: d.text, finish: d.finishReason, logits };
    }));
  });
  const off = await run(0);
  const on = await run(3);
  on.forEach((r, i) => {
    assert.deepEqual(r.ids, off[i]!.ids, `request ${i}`);
    r.logits.forEach((l, s) => assert.ok(sameBits(l, off[i]!.logits[s]!), `request ${i} step ${s}`));
    if (r.finish === 'stop') {
      const v = JSON.parse(extractFinalAnswer(r.text)) as Record<string, unknown>;
      assert.match(String(v['code']), /^[A-Z]{2}[0-9]{1,3}$/);
      assert.match(String(v['day']), /^\d{4}-\d{2}-\d{2}$/);
      assert.ok(Number.isInteger(v['score']) && (v['score'] as number) >= 1 && (v['score'] as number) <= 5);
    }
  });
});
