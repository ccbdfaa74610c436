// not, if/then/else, schema dependencies, exact oneOf and decimal multipleOf, each checked
// against a second path that must agree, on a pool of JSON values:
//   - {not: S} accepts exactly what S rejects (S compiled on its own);
//   - {if, then, else} accepts what (if ? then : else) says, each compiled on its own;
//   - a chain of conditionals on one property (compiled as one union) equals the same
//     conditionals compiled one by one;
//   - {dependencies: {k: S}} accepts an object without k, or one S accepts;
//   - oneOf accepts when exactly one branch (compiled on its own) accepts;
//   - multipleOf 0.01 / 1.5 / 0.25 agrees with exact decimal arithmetic on the text;
//   - unevaluatedProperties over known properties equals additionalProperties over their union;
// plus JSONSchemaBench schemas (test/fixtures/jsonschemabench) whose labelled instances must be
// decided as labelled, and the clear 400 for what stays unexpressible.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { acceptsText } from '../src/constrain/matcher.js';
import { compileSchema, SchemaError } from '../src/constrain/schema.js';
import { REPO_ROOT } from './paths.js';
import { registerIdnaHostnames } from '../src/constrain/idna/index.js';

registerIdnaHostnames(); // hostnames as the server compiles them (with the A-label check)

const VALUES: readonly unknown[] = [
  null, true, false, 0, 1, -1, 2, 2.5, 3, 10, 0.07, -0.5, 100, '', 'a', 'ab', 'b', 'x', 'abc', 'aa', '1',
  [], [1], ['a', 'b'], [null, 1, 'a'], {}, { a: 1 }, { b: 2 }, { a: 1, b: 2 }, { a: 'x', c: true }, { k: 'a' }, { k: 'b', y: 1 },
  { k: 'a', x: 1 }, { k: 'c', z: 1 }, { k: 1 }, { x: 1, y: 2, z: 3 }, { a: [], b: {} }, { k: 'b' }, { a: null },
];
const texts = VALUES.map((v) => JSON.stringify(v));

const accepts = (schema: unknown): ((text: string) => boolean) => {
  const s = compileSchema(schema);
  return (t) => acceptsText(s, t);
};

/** Operands whose negation is expressible. */
const OPERANDS: readonly unknown[] = [
  {}, false, { type: 'null' }, { type: ['string', 'number'] }, { type: 'object' }, { const: 'a' }, { const: 2 }, { const: null }, { const: true },
  { enum: ['a', 'ab', ''] }, { enum: [1, 2.5, 'x', false] }, { required: ['a'] }, { required: ['a', 'b'] },
  { properties: { a: { type: 'number', maximum: 5 } } }, { properties: { k: { const: 'a' } }, required: ['k'] }, { minLength: 2 }, { maxLength: 1 },
  { minimum: 2 }, { exclusiveMaximum: 2 }, { maximum: 2, minimum: 0 }, { minItems: 1 }, { maxItems: 1 }, { minProperties: 2 }, { maxProperties: 1 },
  { anyOf: [{ type: 'string' }, { required: ['a'] }] }, { allOf: [{ type: 'object' }, { required: ['b'] }] }, { not: { type: 'string' } },
  { dependentRequired: { a: ['b'] } }, { dependencies: { a: { required: ['c'] } } }, { type: 'string', enum: ['a', 'b'] },
  { if: { required: ['k'] }, then: { required: ['x'] }, else: { type: 'array' } },
];

test('not: {not: S} accepts exactly the values S rejects', () => {
  for (const s of OPERANDS) {
    const pos = accepts(s);
    const neg = accepts({ not: s });
    for (const t of texts) assert.equal(neg(t), !pos(t), `not ${JSON.stringify(s)} on ${t}`);
  }
});

test('if/then/else: accepts what (if ? then : else) says, each part compiled on its own', () => {
  const ifs = [{ properties: { k: { const: 'a' } } }, { required: ['a'] }, { type: 'string' }, { minimum: 2 }];
  const thens = [undefined, { required: ['x'] }, { maxLength: 1 }, { type: 'object' }];
  const elses = [undefined, { required: ['z'] }, { const: 'x' }];
  for (const i of ifs) for (const th of thens) for (const el of elses) {
    if (th === undefined && el === undefined) continue;
    const whole = accepts({ if: i, ...(th ? { then: th } : {}), ...(el ? { else: el } : {}) });
    const [cond, yes, no] = [accepts(i), accepts(th ?? {}), accepts(el ?? {})];
    for (const t of texts) assert.equal(whole(t), cond(t) ? yes(t) : no(t), `if ${JSON.stringify(i)} then ${JSON.stringify(th)} else ${JSON.stringify(el)} on ${t}`);
  }
});

test('a chain of conditionals on one property: one union == the conditionals one by one', () => {
  const links = [
    { if: { properties: { k: { const: 'a' } } }, then: { required: ['x'] } },
    { if: { properties: { k: { const: 'b' } }, required: ['k'] }, then: { required: ['y'] }, else: { required: ['z'] } },
    { if: { type: 'object', properties: { k: { enum: ['a'] } } }, then: { properties: { x: { type: 'integer' } } } },
    { if: { properties: { k: { const: 1 } } }, then: { maxProperties: 1 } },
  ];
  for (const host of [{}, { type: 'object' }, { type: 'object', required: ['k'] }]) {
    const chain = accepts({ ...host, allOf: links });
    const oneByOne = accepts({ ...host, allOf: links.map((l) => ({ allOf: [l] })) }); // not a chain link: compiled alone
    for (const t of texts) assert.equal(chain(t), oneByOne(t), `${JSON.stringify(host)} on ${t}`);
  }
});

test('schema dependencies: an object without the key, or one the schema accepts', () => {
  for (const dep of [{ required: ['b'] }, { properties: { a: { type: 'string' } } }, false, { not: { required: ['c'] } }]) {
    for (const key of ['dependencies', 'dependentSchemas']) {
      const whole = accepts({ [key]: { a: dep } });
      const s = accepts(dep);
      for (const [i, t] of texts.entries()) {
        const v = VALUES[i];
        const isObj = typeof v === 'object' && v !== null && !Array.isArray(v);
        assert.equal(whole(t), !isObj || !('a' in v) || s(t), `${key} a: ${JSON.stringify(dep)} on ${t}`);
      }
    }
  }
});

test('oneOf: accepted when exactly one branch accepts (overlapping branches whose negations are expressible)', () => {
  const cases = [
    [{ required: ['a'] }, { required: ['b'] }],
    [{ type: ['number', 'string'] }, { minimum: 2 }],
    [{ required: ['k'] }, { properties: { k: { const: 'a' } } }, { maxProperties: 1 }],
  ];
  for (const branches of cases) {
    const whole = accepts({ oneOf: branches });
    const each = branches.map(accepts);
    for (const t of texts) assert.equal(whole(t), each.filter((b) => b(t)).length === 1, `oneOf ${JSON.stringify(branches)} on ${t}`);
  }
});

/** Is the decimal text a multiple of the decimal `step` (exact arithmetic)? */
function multipleOf(text: string, step: string): boolean {
  const scale = (s: string): number => (s.split('.')[1] ?? '').length;
  const sc = Math.max(scale(text), scale(step));
  const units = (s: string): bigint => BigInt(s.replace('-', '').replace('.', '')) * 10n ** BigInt(sc - scale(s));
  return units(text) % units(step) === 0n;
}

test('multipleOf with a decimal agrees with exact decimal arithmetic', () => {
  const numbers: string[] = [];
  for (let i = -40; i <= 40; i++) numbers.push(String(i / 4), String(i / 100), (i / 8).toFixed(3), String(i * 1.5));
  for (const step of ['0.01', '1.5', '0.25', '0.1']) {
    const a = accepts({ type: 'number', multipleOf: Number(step) });
    for (const n of numbers) assert.equal(a(n), multipleOf(n, step), `multipleOf ${step} on ${n}`);
  }
  const both = accepts({ allOf: [{ multipleOf: 0.5 }, { multipleOf: 0.2 }] }); // meet at the integers
  for (const n of numbers) assert.equal(both(n), multipleOf(n, '1'), `multipleOf 0.5 and 0.2 on ${n}`);
});

test('unevaluatedProperties over statically known properties == additionalProperties over their union', () => {
  const base = { properties: { a: {} }, allOf: [{ properties: { b: { type: 'integer' } } }, { patternProperties: { '^x': {} } }] };
  const flat = { properties: { a: {}, b: { type: 'integer' } }, patternProperties: { '^x': {} } };
  for (const extra of [false, { type: 'string' }]) {
    const u = accepts({ ...base, unevaluatedProperties: extra });
    const ap = accepts({ ...flat, additionalProperties: extra });
    for (const t of [...texts, '{"xa":1,"a":2}', '{"b":"s"}', '{"c":"s"}', '{"c":1}']) assert.equal(u(t), ap(t), `unevaluatedProperties ${JSON.stringify(extra)} on ${t}`);
  }
  assert.throws(() => compileSchema({ anyOf: [{ properties: { a: {} } }], unevaluatedProperties: false }), /"unevaluatedProperties" \(evaluation tracking through anyOf\)/);
});

test('JSONSchemaBench schemas using these keywords decide their labelled instances as labelled', () => {
  const dir = join(REPO_ROOT, 'test', 'fixtures', 'jsonschemabench');
  assert.ok(existsSync(dir), `missing ${dir}`);
  const files = readdirSync(dir).filter((f) => f.endsWith('.json'));
  assert.ok(files.length >= 10, 'the JSONSchemaBench fixtures are there');
  let checked = 0;
  for (const f of files) {
    const d = JSON.parse(readFileSync(join(dir, f), 'utf8')) as { schema: unknown; tests: { valid: boolean; data: unknown; description: string }[] };
    const a = accepts(d.schema);
    for (const t of d.tests) {
      assert.equal(a(JSON.stringify(t.data)), t.valid, `${f}: ${t.description}: ${JSON.stringify(t.data)}`);
      checked++;
    }
  }
  assert.ok(checked >= 50);
});

test('what stays unexpressible is a 400 naming the keyword and its JSON pointer', () => {
  const refused = (schema: unknown, re: RegExp): void => {
    assert.throws(() => compileSchema(schema), (e: unknown) => e instanceof SchemaError && re.test(e.message));
  };
  refused({ properties: { x: { not: { pattern: '^a' } } } }, /schema\.properties\.x: the keyword "not" \(the negation of "pattern".*\(at #\/properties\/x\/not\)/);
  refused({ if: { items: { type: 'string' } }, then: { minItems: 1 } }, /the keyword "if" \(the negation of "items".*\(at #\/if\)/);
  refused({ not: { type: 'integer' } }, /"not".*numbers with a fraction/);
  refused({ not: { const: { a: 1 } } }, /"not".*object or array value/);
  refused({ allOf: [{ not: { multipleOf: 2 } }] }, /\(at #\/allOf\/0\/not\)/);
  // lenient drops what it cannot express and enforces the rest
  const lenient = compileSchema({ type: 'string', maxLength: 2, not: { pattern: '^a' } }, 'schema', { lenient: true });
  assert.ok(acceptsText(lenient, '"ab"') && !acceptsText(lenient, '"abc"'));
});
