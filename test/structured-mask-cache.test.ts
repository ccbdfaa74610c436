// The mask cache never changes a mask: random walks over the JSON-Schema-Test-Suite schemas
// and over seeded random schemas compare, at every step, the cached mask with the uncached
// one (and regularly with a per-token reference); no walk may reach a dead end; every walk
// that ends validates against its schema (an independent validator). Issue 48's repro: the
// array key was the same after `[` as after `[{},`, so a cached mask allowed `]` after a
// comma and the answer ended as `[{},]`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { type State, step, val } from '../src/constrain/matcher.js';
import { computeMask, MaskCache, stateKey } from '../src/constrain/mask.js';
import { compileSchema, SchemaError } from '../src/constrain/schema.js';
import { Rng } from '../src/util/rng.js';
import { violation } from './json-schema-check.js';
import { REPO_ROOT } from './paths.js';
import { compareWalks, randomSchema, syntheticVocab } from './structured-walks.js';
import { registerIdnaHostnames } from '../src/constrain/idna/index.js';

registerIdnaHostnames(); // hostnames as the server compiles them (with the A-label check)

const SUITE = join(REPO_ROOT, 'test', 'fixtures', 'json-schema-test-suite');

interface Group { description: string; schema: unknown; tests: { data: unknown }[] }

function suiteGroups(): { file: string; draft: 7 | 2020; g: Group }[] {
  if (!existsSync(SUITE)) throw new Error(`missing ${SUITE}: the vendored JSON-Schema-Test-Suite`);
  const out: { file: string; draft: 7 | 2020; g: Group }[] = [];
  for (const [dir, draft] of [['draft2020-12', 2020], ['draft7', 7]] as const) {
    for (const f of readdirSync(join(SUITE, dir)).filter((n) => n.endsWith('.json')).sort()) {
      for (const g of JSON.parse(readFileSync(join(SUITE, dir, f), 'utf8')) as Group[]) out.push({ file: `${dir}/${f}`, draft, g });
    }
  }
  return out;
}

const after = (start: State, text: string): State => {
  let st = start;
  for (const b of Buffer.from(text, 'utf8')) st = step(st, b);
  return st;
};

test('mask cache: the repro schemas key `[` apart from `[{},` (and `["9309",`), and no cached mask allows `]` after a comma', () => {
  const { v } = syntheticVocab([], 0, 1);
  const close = v.bytesOf.findIndex((b) => b !== null && b.length === 1 && b[0] === 0x5d);
  const allows = (m: Uint32Array, id: number): boolean => ((m[id >>> 5]! >>> (id & 31)) & 1) === 1;
  const cases: [unknown, string, string][] = [
    [{ type: 'array', items: { type: 'object' } }, '[', '[{},'],
    [{ type: 'object', properties: { x: { type: 'array', items: { type: 'string', pattern: '^[a-f0-9]{4}$' } } }, required: ['x'], additionalProperties: false },
      '{"x":[', '{"x":["9309",'],
  ];
  for (const [schema, open, comma] of cases) {
    const start: State = [val(compileSchema(schema), null)];
    const cache = new MaskCache();
    const a = after(start, open);
    const b = after(start, comma);
    assert.notEqual(stateKey(a), stateKey(b), `${open} vs ${comma}`);
    assert.ok(allows(cache.get(v, a), close));
    assert.ok(!allows(cache.get(v, b), close), `${comma} then ]`);
    assert.deepEqual(cache.get(v, b), computeMask(v, b));
  }
});

test('mask cache: cached == uncached == reference along random walks over the JSON-Schema-Test-Suite schemas', () => {
  const groups = suiteGroups();
  const texts = groups.flatMap(({ g }) => g.tests.map((t) => JSON.stringify(t.data) ?? ''));
  const { v, size } = syntheticVocab(texts, 1500, 7);
  let compiled = 0;
  let steps = 0;
  let finished = 0;
  const deadEnds: string[] = [];
  groups.forEach(({ file, draft, g }, i) => {
    let start: State;
    try {
      start = [val(compileSchema(g.schema, 'schema', { draft }), null)];
    } catch (e) {
      if (e instanceof SchemaError) return;
      throw e;
    }
    compiled++;
    const s = compareWalks(v, size, start, { seed: i, walks: 3, maxTokens: 24, refEvery: 7, label: `${file}: ${g.description}` });
    steps += s.steps;
    finished += s.finished.length;
    deadEnds.push(...s.deadEnds);
    for (const text of s.finished) assert.doesNotThrow(() => JSON.parse(text), `${file}: ${g.description}: ${text}`);
  });
  assert.ok(compiled > 400, `${compiled} suite schemas compiled`);
  assert.ok(finished > compiled, `${finished} walks finished`);
  console.log(`suite: ${compiled} schemas, ${steps} steps compared, ${finished} walks finished`);
  // the one dead end left (it ends as an error finish, never a stop): a key already written
  // that propertyNames (enum, pattern) lets be written again but not extended
  for (const d of deadEnds) assert.match(d, /propertyNames/, `a dead end: ${d}`);
  assert.ok(deadEnds.length <= 2, deadEnds.join('\n'));
});

test('mask cache: cached == uncached == reference on random schemas; every finished walk validates', () => {
  const { v, size } = syntheticVocab(['{"a":"ab","name":"xy","id":12,"é":[1,2.5,null],"a b":true}', '["9309","ab12",{"x":-3}]'], 600, 11);
  let compiled = 0;
  let finished = 0;
  let steps = 0;
  const deadEnds: string[] = [];
  for (let seed = 0; seed < 400; seed++) {
    const schema = randomSchema(new Rng(seed), 3);
    let start: State;
    try {
      start = [val(compileSchema(schema), null)];
    } catch (e) {
      if (e instanceof SchemaError) continue;
      throw e;
    }
    compiled++;
    const label = `seed ${seed} ${JSON.stringify(schema)}`;
    const s = compareWalks(v, size, start, { seed, walks: 4, maxTokens: 40, refEvery: 5, label });
    steps += s.steps;
    deadEnds.push(...s.deadEnds);
    for (const text of s.finished) {
      finished++;
      let value: unknown;
      assert.doesNotThrow(() => (value = JSON.parse(text)), `${label}: ${text}`);
      assert.equal(violation(schema, value), null, `${label}: ${text}`);
    }
  }
  assert.ok(compiled > 300, `${compiled} random schemas compiled`);
  assert.ok(finished > 2 * compiled, `${finished} walks finished`);
  console.log(`random: ${compiled} schemas, ${steps} steps compared, ${finished} walks finished and validated`);
  // the one dead end left (an error finish, never a stop): a \u escape under a pattern whose
  // every completion overruns maxLength
  for (const d of deadEnds) assert.match(d, /\\\\u[0-9a-f]{0,3}"$/, `a dead end: ${d}`);
  assert.ok(deadEnds.length <= 2, deadEnds.join('\n'));
});
