// The incremental constraint interface (src/constrain/constraint.ts) against the whole-history
// path it replaced: along the JSON-Schema-Test-Suite's instances, tokenized by tiny-think, a
// matcher advanced one token at a time (and its forks, advanced past it as MTP drafts are)
// gives exactly the masks and end errors that rebuilding the state from the whole history
// gives; the engine's per-request bookkeeping (committed matcher, draft/verify forks) does too
// over simulated speculative rounds; and the reasoning wrappers equal their history rules.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Matcher } from '../src/constrain/constraint.js';
import { GrammarConstraint, grammarConstraint } from '../src/constrain/grammar-matcher.js';
import { registerIdnaHostnames } from '../src/constrain/idna/index.js';
import { MaskCache, tokenVocab, type TokenVocab } from '../src/constrain/mask.js';
import { acceptsText, type State, val } from '../src/constrain/matcher.js';
import { compileSchema, type Schema, SchemaError } from '../src/constrain/schema.js';
import { reasoningClosed, type ThinkStart, withClosedThinkMask, withReasoningBudget } from '../src/constrain/think.js';
import { type AdjustedRequest, committedMatcher, constraintEndError, matcherAfterDrafts } from '../src/engine/logits-adjust.js';
import { TokenTexts } from '../src/server/api/logprobs.js';
import { TextTokenizer } from '../src/tokenizer/tokenizer.js';
import { Rng } from '../src/util/rng.js';
import { REPO_ROOT, TINY_THINK } from './paths.js';

registerIdnaHostnames(); // hostnames as the server compiles them

const SUITE = join(REPO_ROOT, 'test', 'fixtures', 'json-schema-test-suite');

function files(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? files(join(dir, e.name)) : e.name.endsWith('.json') ? [join(dir, e.name)] : []));
}

/** Every suite schema that compiles, with the compact texts of its instances. */
function suiteSchemas(): { name: string; schema: Schema; texts: string[] }[] {
  if (!existsSync(SUITE)) throw new Error(`missing ${SUITE}: the vendored JSON-Schema-Test-Suite`);
  const out: { name: string; schema: Schema; texts: string[] }[] = [];
  for (const [dir, draft] of [['draft7', 7], ['draft2020-12', 2020]] as const) {
    for (const file of files(join(SUITE, dir))) {
      for (const g of JSON.parse(readFileSync(file, 'utf8')) as { description: string; schema: unknown; tests: { data: unknown }[] }[]) {
        let schema: Schema;
        try {
          schema = compileSchema(g.schema, 'schema', { draft });
        } catch (e) {
          if (e instanceof SchemaError) continue;
          throw e;
        }
        out.push({ name: `${file.slice(SUITE.length + 1)}: ${g.description}`, schema, texts: g.tests.map((c) => JSON.stringify(c.data)) });
      }
    }
  }
  return out;
}

const bit = (m: Uint32Array | null, id: number): boolean => m === null || ((m[id >>> 5]! >>> (id & 31)) & 1) === 1;
const same = (a: Uint32Array | null, b: Uint32Array | null): boolean => (a === null || b === null ? a === b : a.length === b.length && a.every((w, i) => w === b[i]));

let vocabMemo: { v: TokenVocab; tok: TextTokenizer } | null = null;
function tinyVocab(): { v: TokenVocab; tok: TextTokenizer } {
  if (vocabMemo) return vocabMemo;
  const tok = TextTokenizer.load(TINY_THINK());
  return (vocabMemo = { v: tokenVocab(tok, new TokenTexts(tok), tok.size, tok.stopIds()), tok });
}

test('suite schemas: advancing a matcher (and forks of it) gives the masks and end errors of rebuilding from the whole history', () => {
  const { v, tok } = tinyVocab();
  const schemas = suiteSchemas();
  assert.ok(schemas.length > 500, `${schemas.length} suite schemas compile`);
  let positions = 0;
  let forks = 0;
  let accepted = 0;
  for (const { name, schema, texts } of schemas) {
    const start: State = [val(schema, null)];
    const incremental = grammarConstraint(v, start, new MaskCache());
    const referenceCache = new MaskCache();
    // the whole history every time: a fresh state walk per position
    const rebuild = (ids: readonly number[]): { mask: Uint32Array; end: string | null } => {
      const c = new GrammarConstraint(v, start, referenceCache);
      return { mask: c.allowed(ids), end: c.endError(ids) };
    };
    for (const text of texts.slice(0, 3)) {
      if (acceptsText(schema, text)) accepted++;
      const ids = tok.encode(text).slice(0, 48);
      const m = incremental.start();
      for (let k = 0; k <= ids.length; k++) {
        const want = rebuild(ids.slice(0, k));
        assert.ok(same(m.mask(), want.mask), `${name}: ${text}: mask after ${k} tokens`);
        assert.equal(m.endError(), want.end, `${name}: ${text}: endError after ${k} tokens`);
        assert.equal(m.length, k);
        positions++;
        // a fork advanced two tokens ahead (draft positions) leaves `m` where it was
        if (k + 2 <= ids.length) {
          const f = m.fork();
          f.advance(ids[k]!);
          f.advance(ids[k + 1]!);
          assert.ok(same(f.mask(), rebuild(ids.slice(0, k + 2)).mask), `${name}: ${text}: fork mask after ${k}+2 tokens`);
          forks++;
        }
        if (k < ids.length) m.advance(ids[k]!);
      }
    }
  }
  assert.ok(positions > 5000 && forks > 3000 && accepted > 300, `${positions} positions, ${forks} forks, ${accepted} accepted instances`);
});

/** A request as logits-adjust.ts reads it. */
interface FakeRequest extends AdjustedRequest {
  tokens: number[];
  drafts: number[];
}

test('engine bookkeeping: committed matcher + draft/verify forks over speculative rounds equal the whole-history masks', () => {
  const { v, tok } = tinyVocab();
  const schema = compileSchema({ type: 'object', properties: { name: { type: 'string', maxLength: 12 }, n: { type: 'integer' }, tags: { type: 'array', items: { enum: ['a', 'bb', 'ccc'] } } }, required: ['name'] });
  const start: State = [val(schema, null)];
  const reference = new GrammarConstraint(v, start, new MaskCache());
  const stops = new Set(v.stopIds);
  const allowedIds = (m: Uint32Array): number[] => {
    const out: number[] = [];
    for (let id = 0; id < v.words * 32; id++) if (bit(m, id) && !stops.has(id)) out.push(id);
    return out;
  };
  let checked = 0;
  for (let seed = 0; seed < 12; seed++) {
    const rng = new Rng(seed);
    const prompt = tok.encode('prompt');
    const req: FakeRequest = { adjust: { bias: null, constraint: grammarConstraint(v, start, new MaskCache()) }, tokens: [...prompt], promptIds: prompt, drafts: [] };
    const out = (): number[] => req.tokens.slice(prompt.length);
    for (let round = 0; round < 40; round++) {
      // drafting: each draft is proposed under the mask after the committed ids and drafts before it
      req.drafts = [];
      const k = 1 + Math.floor(rng.next() * 3);
      for (let d = 0; d < k; d++) {
        const mask = matcherAfterDrafts(req, req.drafts.length)!.mask()!;
        assert.ok(same(mask, reference.allowed([...out(), ...req.drafts])), `seed ${seed} round ${round}: draft ${d}`);
        checked++;
        const pool = allowedIds(mask);
        if (pool.length === 0) break;
        // sometimes a draft the grammar refuses (the drafter's argmax under a loose head)
        req.drafts.push(rng.next() < 0.15 ? Math.floor(rng.next() * tok.size) : pool[Math.floor(rng.next() * pool.length)]!);
      }
      // verify: every position given the drafts before it
      for (let s = 0; s <= req.drafts.length; s++) {
        assert.ok(same(matcherAfterDrafts(req, s)!.mask(), reference.allowed([...out(), ...req.drafts.slice(0, s)])), `seed ${seed} round ${round}: verify ${s}`);
        checked++;
      }
      // accept a prefix of the drafts, then a bonus token from the mask after it
      const accepted = req.drafts.slice(0, Math.floor(rng.next() * (req.drafts.length + 1)));
      const after = reference.allowed([...out(), ...accepted]);
      const pool = allowedIds(after);
      if (pool.length === 0) break;
      req.tokens.push(...accepted, pool[Math.floor(rng.next() * pool.length)]!);
      assert.ok(same(committedMatcher(req)!.mask(), reference.allowed(out())), `seed ${seed} round ${round}: committed`);
      assert.equal(constraintEndError(req), reference.endError(out()));
      checked++;
    }
  }
  assert.ok(checked > 1000, `${checked} masks checked`);
  // committed ids are never taken back: a matcher past them is an error, not a silent rebuild
  const prompt = [1, 2];
  const req: FakeRequest = { adjust: { bias: null, constraint: grammarConstraint(v, start, new MaskCache()) }, tokens: [...prompt, ...tok.encode('{"')], promptIds: prompt, drafts: [] };
  committedMatcher(req);
  req.tokens.pop();
  assert.throws(() => committedMatcher(req), /past the \d+ the request has committed/);
});

/** The reasoning wrappers' rules as functions of the whole history (what they were before). */
function historyThinkMask(start: ThinkStart, ids: { open: number; close: number }, budget: number | null, vocab: number): (g: readonly number[]) => Uint32Array | null {
  const words = Math.ceil(vocab / 32);
  const all = (): Uint32Array => new Uint32Array(words).fill(0xffffffff);
  return (g) => {
    let base: Uint32Array | null = null;
    if (budget !== null && !g.includes(ids.close) && g.length >= budget) {
      base = new Uint32Array(words);
      base[ids.close >>> 5]! |= 1 << (ids.close & 31);
    }
    let cut: Uint32Array | null = null;
    if (reasoningClosed(g, start, ids)) {
      cut = all();
      for (const id of [ids.open, ids.close]) cut[id >>> 5]! &= ~(1 << (id & 31));
    } else if (start === 'none' && g.length === 0) {
      cut = all();
      cut[ids.close >>> 5]! &= ~(1 << (ids.close & 31));
    }
    if (!cut) return base;
    if (!base) return cut;
    return base.map((w, i) => w & cut[i]!);
  };
}

test('reasoning wrappers: advanced and forked matchers equal the whole-history rules (budget, closed-reasoning mask, every start)', () => {
  const vocab = 70;
  const ids = { open: 40, close: 64 };
  for (const start of ['open', 'closed', 'none'] as const) {
    for (const budget of [null, 0, 3]) {
      const c = withClosedThinkMask(budget === null ? null : withReasoningBudget(null, ids.close, budget, vocab), start, ids, vocab)!;
      const want = historyThinkMask(start, ids, budget, vocab);
      for (let seed = 0; seed < 30; seed++) {
        const rng = new Rng(seed);
        const g: number[] = [];
        const m: Matcher = c.start();
        for (let k = 0; k < 12; k++) {
          assert.ok(same(m.mask(), want(g)), `${start} budget ${budget} seed ${seed}: after [${g.join(',')}]`);
          const f = m.fork();
          const ahead = [...g, 64, 3];
          f.advance(64);
          f.advance(3);
          assert.ok(same(f.mask(), want(ahead)), `${start} budget ${budget} seed ${seed}: fork after [${ahead.join(',')}]`);
          // tags come up often: the first id, the close, the open
          const r = rng.next();
          const id = r < 0.2 ? ids.open : r < 0.35 ? ids.close : Math.floor(rng.next() * vocab);
          m.advance(id);
          g.push(id);
        }
      }
    }
  }
});
