// Grammar work and the event loop: compilation stops at its work budget (--max-grammar-units)
// with a 400 naming the flag, so a huge-but-allowed schema never holds /health; the
// vocabulary tables are built in background steps equal to the one-go build; a stepped
// merge sort equals Array.prototype.sort.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Engine } from '../src/engine/engine.js';
import { startServer } from '../src/server/index.js';
import { TokenTexts } from '../src/server/api/logprobs.js';
import { withCompileBudget } from '../src/constrain/compile-budget.js';
import { lazyJsonTextClass } from '../src/constrain/free-text.js';
import { canEnd, type State, step, val } from '../src/constrain/matcher.js';
import { computeMask, lazyVocabFromBytes, vocabFromBytes } from '../src/constrain/mask.js';
import { compileOrThrow } from '../src/server/api/structured.js';
import { compileSchema } from '../src/constrain/schema.js';
import { advanceInBackground, finish, sortSteps } from '../src/constrain/steps.js';
import { grownVocab } from '../src/cli/bench-grammar.js';
import { TextTokenizer } from '../src/tokenizer/tokenizer.js';
import { Rng } from '../src/util/rng.js';
import { TINY_THINK } from './paths.js';
import { KERNELS, post } from './server-helpers.js';
import { registerIdnaHostnames } from '../src/constrain/idna/index.js';

registerIdnaHostnames(); // hostnames as the server compiles them (with the A-label check)

/** Schemas within the default limits (< 128 KiB, enums ≤ 1024, depth ≤ 64) that used to
 * compile for seconds on the event loop (45 s and 2.5 s). */
const HOSTILE = {
  repetitions: { type: 'object', properties: Object.fromEntries(Array.from({ length: 1500 }, (_, i) => [`p${i}`, { type: 'string', pattern: `^(a|b${i}){500}$` }])) },
  crossProduct: { allOf: Array.from({ length: 16 }, (_, k) => ({ anyOf: [{ type: 'object', properties: { [`a${k}`]: { type: 'string' } } }, { type: 'object', properties: { [`b${k}`]: { type: 'integer' } } }] })) },
};

test('grammar compile budget: hostile schemas stop with an error naming --max-grammar-units; ordinary ones compile', () => {
  for (const [name, schema] of Object.entries(HOSTILE)) {
    assert.ok(Buffer.byteLength(JSON.stringify(schema)) < 131_072, name);
    const t0 = performance.now();
    assert.throws(() => compileOrThrow(schema, `x.${name}`), (e: Error) => /--max-grammar-units/.test(e.message) && /x\./.test(JSON.stringify(e)), name);
    // generous: the budget is ~50 ms of work on an idle machine; a loaded one stretches it
    assert.ok(performance.now() - t0 < 2000, `${name}: ${performance.now() - t0} ms`);
  }
  // the same kind of schema, smaller, compiles; with no time left, the budget alone stops it
  const smaller = { allOf: HOSTILE.crossProduct.allOf.slice(0, 6) };
  assert.doesNotThrow(() => compileSchema(smaller));
  assert.throws(() => withCompileBudget(0, () => compileSchema(smaller)), /--max-grammar-units/);
  const rich = { type: 'object', properties: { when: { type: 'string', format: 'date-time' }, mail: { type: 'string', format: 'email' }, site: { type: 'string', format: 'uri' }, n: { type: 'integer', minimum: 1, maximum: 5 } } };
  assert.doesNotThrow(() => compileOrThrow(rich, 'rich'));
});

test('a huge-but-allowed schema in flight does not hold /health (default limits); it gets a 400 naming the budget', async () => {
  const engine = await Engine.load({ model: TINY_THINK(), kernels: KERNELS, maxRunning: 4, prefixCache: false });
  const server = await startServer(engine, { port: 0 });
  try {
    for (let i = 0; i < 5; i++) await (await fetch(`${server.url}/health`)).text(); // the client's own first-use costs
    for (const [name, schema] of Object.entries(HOSTILE)) {
      const body = { messages: [{ role: 'user', content: 'hi' }], max_tokens: 4, response_format: { type: 'json_schema', json_schema: { name: 'h', schema } } };
      let done = false;
      const hostile = post(`${server.url}/v1/chat/completions`, body).finally(() => (done = true));
      const lat: number[] = [];
      while (!done || lat.length < 3) {
        const t0 = performance.now();
        const r = await fetch(`${server.url}/health`);
        await r.text();
        lat.push(performance.now() - t0);
        await new Promise((r) => setTimeout(r, 5));
      }
      const r = await hostile;
      assert.equal(r.status, 400, name);
      assert.match(JSON.stringify(r.json), /--max-grammar-units/, name);
      // generous for a loaded 2-core machine: main held the loop for 2.5-45 s
      assert.ok(Math.max(...lat) < 1000, `${name}: /health max ${Math.max(...lat).toFixed(1)} ms (${lat.map((x) => x.toFixed(0)).join(' ')})`);
    }
  } finally {
    await server.close();
    await engine.close();
  }
});

test('stepped merge sort == Array.prototype.sort (stable, any input order)', () => {
  const rng = new Rng(3);
  for (const n of [0, 1, 2, 5, 4096, 10_001]) {
    const xs = Array.from({ length: n }, (_, i) => ({ k: Math.floor(rng.next() * 50), i }));
    const cmp = (a: { k: number }, b: { k: number }): number => a.k - b.k;
    assert.deepEqual(finish(sortSteps([...xs], cmp)), [...xs].sort(cmp));
    const sorted = [...xs].sort(cmp);
    assert.deepEqual(finish(sortSteps([...sorted], cmp)), sorted);
  }
});

test('vocabulary tables built in background steps equal the one-go build, and the event loop keeps turning', async () => {
  const tok = TextTokenizer.load(TINY_THINK());
  const texts = new TokenTexts(tok);
  const base = Array.from({ length: tok.size }, (_, id) => (tok.specialIds.has(id) ? null : Uint8Array.from(texts.get(id).bytes)));
  const bytes = grownVocab(base, 60_000, 11).map((b) => (b.length > 0 ? b : null));
  let last = performance.now();
  let maxGap = 0;
  const tick = setInterval(() => {
    const now = performance.now();
    maxGap = Math.max(maxGap, now - last);
    last = now;
  }, 2);
  const lazy = lazyVocabFromBytes(bytes, tok.stopIds());
  try {
    await advanceInBackground(lazy, 5, () => false);
    await advanceInBackground(lazyJsonTextClass(lazy.get()), 5, () => false);
  } finally {
    clearInterval(tick);
  }
  // generous: slices are 5 ms; a loaded machine stretches them
  assert.ok(maxGap < 250, `event loop gap ${maxGap.toFixed(1)} ms`);
  const stepped = lazy.get();
  const once = vocabFromBytes(bytes, tok.stopIds());
  assert.deepEqual(stepped.ids, once.ids);
  assert.deepEqual(stepped.lcp, once.lcp);
  assert.deepEqual(stepped.buf, once.buf);
  // masks agree along a document (the stepped vocabulary's free-text class was built in the background)
  const schema = compileSchema({ type: 'object', properties: { id: { type: 'string', pattern: '^[a-z]+$' }, note: { type: 'string' } }, patternProperties: { '^x-': { type: 'integer' } }, additionalProperties: false });
  let st: State = [val(schema, null)];
  for (const b of Buffer.from('{"note":"hé \\"x\\"","x-y":12,"id":"abc"}', 'utf8')) {
    assert.deepEqual(computeMask(stepped, st), computeMask(once, st));
    st = step(st, b);
  }
  assert.ok(st.some(canEnd));
});
