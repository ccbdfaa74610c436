// uniqueItems over finite literal sets (issue 48, "coverage where peers have it"): the grammar
// agrees with a plain validator on every array of a pool (duplicates or not, empty, bounded),
// the cached and uncached masks agree along random walks (the used-literal bitmask is part of
// the mask-cache key), minItems past the distinct values admits nothing, the table a prepare
// worker sends keeps the constraint, and every other uniqueItems stays a 400 that names the
// keyword and its JSON pointer. Numbers are written as JSON.stringify writes them (enum 1.0 is
// the literal 1), so two items never spell the same value two ways.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { acceptsText, type State, step, val } from '../src/constrain/matcher.js';
import { computeMask, MaskCache, stateKey } from '../src/constrain/mask.js';
import { compileSchema, SchemaError } from '../src/constrain/schema.js';
import { fromTable, toTable } from '../src/constrain/table.js';
import { violation } from './json-schema-check.js';
import { compareWalks, syntheticVocab } from './structured-walks.js';
import { registerIdnaHostnames } from '../src/constrain/idna/index.js';

registerIdnaHostnames(); // hostnames as the server compiles them (with the A-label check)

type S = Record<string, unknown>;

/** Schemas with the values their pool draws items from (theirs plus outsiders); `plain`: the
 * same schema for the validator where it has a $ref (the validator resolves none). */
const CASES: { schema: S; pool: unknown[]; maxLen: number; plain?: S }[] = [
  { schema: { type: 'array', items: { enum: ['a', 'b', 'c'] }, uniqueItems: true }, pool: ['a', 'b', 'c', 'd'], maxLen: 4 },
  { schema: { type: 'array', items: { enum: ['x', 1, null, true] }, uniqueItems: true, minItems: 1, maxItems: 3 }, pool: ['x', 1, null, true, false], maxLen: 4 },
  { schema: { type: 'array', items: { type: 'boolean' }, uniqueItems: true }, pool: [true, false, null], maxLen: 3 },
  // 1 is a prefix of 10; 1.0 is the same value as 1
  { schema: { type: 'array', items: { enum: [1, 1.0, 10, 2.5, -3] }, uniqueItems: true, minItems: 2 }, pool: [1, 10, 2.5, -3, 4], maxLen: 4 },
  { schema: { type: 'array', items: { anyOf: [{ const: 'a' }, { type: 'null' }, { type: 'boolean' }] }, uniqueItems: true, maxItems: 2 }, pool: ['a', null, true, false, 'b'], maxLen: 3 },
  // a prefix position that only one literal fits: the first item must leave it free
  { schema: { type: 'array', prefixItems: [{ enum: ['a', 'b'] }, { const: 'a' }], items: { enum: ['a', 'b', 'c'] }, uniqueItems: true, minItems: 2 },
    pool: ['a', 'b', 'c'], maxLen: 4 },
  { schema: { $defs: { c: { enum: ['r', 'g', 'é'] } }, type: 'array', items: { $ref: '#/$defs/c' }, uniqueItems: true }, pool: ['r', 'g', 'é', 'x'], maxLen: 4,
    plain: { type: 'array', items: { enum: ['r', 'g', 'é'] }, uniqueItems: true } },
  { schema: { type: 'object', properties: { tags: { type: 'array', items: { enum: ['p', 'q'] }, uniqueItems: true } }, required: ['tags'],
    additionalProperties: false }, pool: ['p', 'q'], maxLen: 3 },
];

/** Every sequence of pool values up to maxLen items. */
function arraysOf(pool: readonly unknown[], maxLen: number): unknown[][] {
  const out: unknown[][] = [[]];
  let layer: unknown[][] = [[]];
  for (let n = 1; n <= maxLen; n++) {
    layer = layer.flatMap((a) => pool.map((x) => [...a, x]));
    out.push(...layer);
  }
  return out;
}

const instance = (schema: S, arr: unknown[]): unknown => (schema['type'] === 'object' ? { tags: arr } : arr);
const validates = (c: (typeof CASES)[number], v: unknown): boolean => violation(c.plain ?? c.schema, v) === null;

test('uniqueItems: the grammar accepts exactly the arrays the validator accepts, over every array of each pool', () => {
  for (const c of CASES) {
    const { schema, pool, maxLen } = c;
    const compiled = compileSchema(schema);
    let accepted = 0;
    let duplicates = 0;
    for (const arr of arraysOf(pool, maxLen)) {
      const v = instance(schema, arr);
      const text = JSON.stringify(v);
      const valid = validates(c, v);
      assert.equal(acceptsText(compiled, text), valid, `${JSON.stringify(schema)}: ${text} should be ${valid ? 'accepted' : 'rejected'}`);
      if (valid) accepted++;
      if (new Set(arr.map((x) => JSON.stringify(x))).size < arr.length) duplicates++;
    }
    assert.ok(accepted > 0 && duplicates > 0, `${JSON.stringify(schema)}: ${accepted} accepted, ${duplicates} with duplicates`);
  }
});

test('uniqueItems: numbers only as JSON.stringify writes them, so 1 and 1.0 are never both written', () => {
  const s = compileSchema({ type: 'array', items: { enum: [1.0, 2] }, uniqueItems: true });
  assert.ok(acceptsText(s, '[1,2]'));
  assert.ok(!acceptsText(s, '[1.0]'), 'the enum value 1.0 is written 1');
  assert.ok(!acceptsText(s, '[1,1.0]'));
  assert.ok(!acceptsText(s, '[1,1]'));
});

test('uniqueItems: up to 64 distinct values; minItems beyond them admits nothing; 65 values are a 400', () => {
  const values = Array.from({ length: 64 }, (_, i) => `v${i}`);
  const all = compileSchema({ type: 'array', items: { enum: values }, uniqueItems: true, minItems: 64 });
  const reversed = [...values].reverse();
  assert.ok(acceptsText(all, JSON.stringify(reversed)));
  assert.ok(!acceptsText(all, JSON.stringify(['v62', ...reversed.slice(1)])), 'v62 twice');
  assert.ok(!acceptsText(all, JSON.stringify(values.slice(1))), '63 items');
  // three items from two values: no array satisfies it, so not even `[` is allowed
  const none = compileSchema({ type: 'array', items: { type: 'boolean' }, uniqueItems: true, minItems: 3 });
  const { v } = syntheticVocab([], 0, 1);
  assert.ok(computeMask(v, [val(none, null)]).every((w) => w === 0), 'no token may start an array that cannot be completed');
  assert.throws(() => compileSchema({ type: 'array', items: { enum: [...values, 'v64'] }, uniqueItems: true }), /"uniqueItems".*#\/uniqueItems/);
});

test('uniqueItems: other item schemas stay a 400 naming the keyword and its JSON pointer', () => {
  const refused: [S, RegExp][] = [
    [{ type: 'object', properties: { tags: { type: 'array', items: { type: 'string' }, uniqueItems: true } } }, /"uniqueItems".*\(at #\/properties\/tags\/uniqueItems\)/],
    [{ type: 'array', items: { type: 'object' }, uniqueItems: true }, /"uniqueItems".*#\/uniqueItems/],
    [{ type: 'array', items: { type: 'integer', minimum: 0, maximum: 3 }, uniqueItems: true }, /"uniqueItems".*#\/uniqueItems/],
    [{ type: 'array', uniqueItems: true }, /"uniqueItems"/],
    [{ uniqueItems: true }, /"uniqueItems"/],
    [{ type: 'array', items: { enum: ['a', { k: 1 }] }, uniqueItems: true }, /"uniqueItems"/],
    [{ type: 'array', prefixItems: [{ type: 'string' }], items: { enum: ['a'] }, uniqueItems: true }, /"uniqueItems"/],
  ];
  for (const [schema, message] of refused) {
    assert.throws(() => compileSchema(schema), (e: unknown) => e instanceof SchemaError && message.test(e.message), JSON.stringify(schema));
  }
  // lenient mode drops the keyword and enforces the rest
  assert.ok(acceptsText(compileSchema({ type: 'array', items: { type: 'string' }, uniqueItems: true }, 'schema', { lenient: true }), '["a","a"]'));
});

test('uniqueItems: the table a prepare worker sends keeps the constraint', () => {
  for (const c of CASES) {
    const { schema, pool, maxLen } = c;
    const rebuilt = fromTable(toTable(compileSchema(schema)));
    for (const arr of arraysOf(pool, Math.min(maxLen, 3))) {
      const v = instance(schema, arr);
      assert.equal(acceptsText(rebuilt, JSON.stringify(v)), validates(c, v), `${JSON.stringify(schema)}: ${JSON.stringify(v)}`);
    }
  }
});

const after = (start: State, text: string): State => {
  let st = start;
  for (const b of Buffer.from(text, 'utf8')) st = step(st, b);
  return st;
};

test('uniqueItems: the mask-cache key holds the written literals (`["a",` and `["b",` differ)', () => {
  const start: State = [val(compileSchema({ type: 'array', items: { enum: ['a', 'b', 'c'] }, uniqueItems: true }), null)];
  const { v } = syntheticVocab(['["a","b","c"]'], 0, 3);
  const cache = new MaskCache();
  const a = after(start, '["a",');
  const b = after(start, '["b",');
  assert.notEqual(stateKey(a), stateKey(b));
  // the second item's mask: "a after "a" is refused, after "b" allowed
  const quoteA = after(a, '"');
  const quoteB = after(b, '"');
  assert.equal(after(quoteA, 'a').length, 0);
  assert.ok(after(quoteB, 'a').length > 0);
  cache.get(v, quoteA);
  assert.deepEqual(cache.get(v, quoteB), computeMask(v, quoteB), 'a mask cached for `["a","` reused for `["b","`');
});

test('uniqueItems: cached == uncached == reference along random walks; no dead end; every finished walk validates', () => {
  const texts = CASES.flatMap(({ schema, pool, maxLen }) => arraysOf(pool, maxLen).map((a) => JSON.stringify(instance(schema, a))));
  const { v, size } = syntheticVocab(texts, 400, 5);
  const cache = new MaskCache(4096); // shared: states of different walks and schemas meet in it
  let finished = 0;
  CASES.forEach((c, i) => {
    const { schema } = c;
    const label = JSON.stringify(schema);
    const s = compareWalks(v, size, [val(compileSchema(schema), null)], { seed: i, walks: 40, maxTokens: 30, refEvery: 3, label }, cache);
    assert.deepEqual(s.deadEnds, [], label);
    for (const text of s.finished) {
      finished++;
      assert.ok(validates(c, JSON.parse(text)), `${label}: ${text}`);
    }
  });
  assert.ok(finished > 4 * CASES.length, `${finished} walks finished`);
});
