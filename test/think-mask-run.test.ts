// The reasoning wrappers' mask runs (constrain/think.ts Matcher.maskRun) tell the truth: at every
// position a run says it covers (logits-adjust.ts runCut: before its positions' end, up to and
// including its first `until` id), a fork of the matcher advanced by the ids before that position
// answers mask() with exactly the run's mask. Random id sequences over a small vocabulary heavy
// with the think tags, for the closed-think mask alone (open, closed and `none` prompts) and with
// a reasoning budget in front; and the runs' shapes: the open block's "any id until </think>",
// the closed block's "no tags" for good, the budget's positions and then "only </think>". A
// JSON-schema grammar behind a reasoning block (the server's structured output with thinking on)
// over tiny-think's vocabulary: its free reasoning's run (every id but the stop ids, until an id
// whose bytes leave it) holds at every position it covers too.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Constraint, Matcher } from '../src/constrain/constraint.js';
import { grammarConstraint } from '../src/constrain/grammar-matcher.js';
import { valueGrammar, withThinkPrefix } from '../src/constrain/grammars.js';
import { MaskCache, tokenVocab } from '../src/constrain/mask.js';
import { compileSchema } from '../src/constrain/schema.js';
import { type ThinkStart, withClosedThinkMask, withReasoningBudget } from '../src/constrain/think.js';
import { runCut } from '../src/engine/logits-adjust.js';
import { TokenTexts } from '../src/server/api/logprobs.js';
import { THINK_CLOSE, THINK_OPEN } from '../src/tokenizer/reasoning.js';
import { TextTokenizer } from '../src/tokenizer/tokenizer.js';
import { TINY_THINK } from './paths.js';

const VOCAB = 40;
const IDS = { open: 7, close: 9 };

function constraintOf(start: ThinkStart, budget: number | null): Constraint {
  const inner = budget === null ? null : withReasoningBudget(null, IDS.close, budget, VOCAB);
  return withClosedThinkMask(inner, start, IDS, VOCAB)!;
}

/** A sequence of n ids, a third of them think tags. */
function randomIds(n: number, rand: () => number): number[] {
  return Array.from({ length: n }, () => (rand() < 0.33 ? (rand() < 0.5 ? IDS.open : IDS.close) : Math.floor(rand() * VOCAB)));
}

function lcg(seed: number): () => number {
  let x = seed >>> 0;
  return () => ((x = (Math.imul(x, 1664525) + 1013904223) >>> 0) / 2 ** 32);
}

const same = (a: Uint32Array | null, b: Uint32Array | null): boolean =>
  a === b || (a !== null && b !== null && a.length === b.length && a.every((w, i) => w === b[i]));

/** Advance a fork of `m` through ids[0..i). */
function after(m: Matcher, ids: readonly number[], i: number): Matcher {
  const f = m.fork();
  for (let j = 0; j < i; j++) f.advance(ids[j]!);
  return f;
}

test('every position a think mask run covers has exactly the run\'s mask (closed-think alone and with a budget)', () => {
  const rand = lcg(12345);
  let covered = 0;
  let ended = 0;
  for (const start of ['open', 'closed', 'none'] as const) {
    for (const budget of [null, 1, 3, 6]) {
      if (budget !== null && start !== 'open') continue; // the server adds a budget to open blocks only
      for (let trial = 0; trial < 60; trial++) {
        const m = constraintOf(start, budget).start();
        const history = randomIds(Math.floor(rand() * 8), rand);
        for (const id of history) m.advance(id);
        const run = m.maskRun!();
        if (!run) {
          assert.ok(start === 'none' && history.length === 0, `only a none prompt's first position has no run (${start}, ${history.length} in)`);
          continue;
        }
        const chain = randomIds(1 + Math.floor(rand() * 6), rand);
        const cut = runCut(run, chain);
        const inside = cut.ended ? cut.keep : chain.length + 1; // positions 0..inside − 1
        for (let i = 0; i < inside; i++) {
          assert.ok(same(after(m, chain, i).mask(), run.mask), `${start}, budget ${budget}, ${history.length} in: position ${i} of [${chain}] is inside the run, its mask differs`);
          covered++;
        }
        if (cut.ended) ended++;
      }
    }
  }
  assert.ok(covered > 500 && ended > 50, `${covered} positions covered, ${ended} chains cut`);
});

test('the runs: open any id until </think>; closed no tags for good; a budget\'s positions, then only </think>', () => {
  const open = constraintOf('open', null).start();
  assert.deepEqual({ ...open.maskRun!() }, { mask: null, until: [IDS.close] });
  open.advance(3);
  open.advance(IDS.close);
  const closed = open.maskRun!()!;
  assert.deepEqual(closed.until, []);
  assert.equal(closed.positions, undefined);
  assert.ok(same(closed.mask, open.mask()) && closed.mask !== null);
  const none = constraintOf('none', null).start();
  assert.equal(none.maskRun!(), undefined, 'a none prompt\'s first position: only </think> masked, then it changes');
  none.advance(IDS.open);
  assert.deepEqual(none.maskRun!()!.until, [IDS.close]);
  const budget = constraintOf('open', 3).start();
  assert.equal(budget.maskRun!()!.positions, 3);
  budget.advance(1);
  budget.advance(2);
  assert.equal(budget.maskRun!()!.positions, 1);
  budget.advance(4);
  const only = budget.maskRun!()!;
  assert.deepEqual(only.until, [IDS.close]);
  assert.equal(only.positions, undefined);
  assert.deepEqual([...Array(VOCAB).keys()].filter((id) => ((only.mask![id >>> 5]! >>> (id & 31)) & 1) === 1), [IDS.close]);
  // the cut: a chain through </think> keeps it, as its last, with no bonus; one past the budget's positions stops there
  assert.deepEqual(runCut({ mask: null, until: [IDS.close] }, [1, IDS.close, 2]), { keep: 2, ended: true });
  assert.deepEqual(runCut({ mask: null, until: [IDS.close] }, [1, 2, IDS.close]), { keep: 3, ended: true });
  assert.deepEqual(runCut({ mask: null, until: [IDS.close] }, [1, 2, 3]), { keep: 3, ended: false });
  assert.deepEqual(runCut({ mask: null, until: [IDS.close], positions: 2 }, [1, 2, 3]), { keep: 2, ended: true });
  assert.deepEqual(runCut({ mask: null, until: [], positions: 4 }, [1, 2, 3]), { keep: 3, ended: false });
  assert.deepEqual(runCut({ mask: null, until: [], positions: 3 }, [1, 2, 3]), { keep: 3, ended: true });
});

test('a JSON-schema grammar behind a reasoning block: free reasoning\'s run holds at every position it covers', () => {
  const tok = TextTokenizer.load(TINY_THINK());
  const v = tokenVocab(tok, new TokenTexts(tok), tok.size, tok.stopIds());
  const ids = { open: tok.tokenToId(THINK_OPEN), close: tok.tokenToId(THINK_CLOSE) };
  const schema = compileSchema({ type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] });
  const grammar = grammarConstraint(v, withThinkPrefix(valueGrammar(schema), true), new MaskCache());
  const answer = withClosedThinkMask(grammar, 'open', ids, tok.size)!;
  const run0 = answer.start().maskRun!()!;
  assert.ok(run0 !== undefined && run0.until.includes(ids.close!), 'reasoning open: a run that </think> ends');
  // ids that leave free reasoning: </think> and those ending inside a partial one ("<", "</")
  const leaving = run0.until.filter((id) => id !== ids.close);
  assert.ok(leaving.length > 0 && leaving.every((id) => /<\/?t?h?i?n?k?$|<\/think>/.test(tok.decode([id]))), `leaving ids: ${leaving.map((id) => JSON.stringify(tok.decode([id]))).join(' ')}`);
  const rand = lcg(99);
  const allowed = [...Array(tok.size).keys()].filter((id) => ((run0.mask![id >>> 5]! >>> (id & 31)) & 1) === 1);
  const pick = (): number => (rand() < 0.15 ? run0.until[Math.floor(rand() * run0.until.length)]! : allowed[Math.floor(rand() * allowed.length)]!);
  let covered = 0;
  let ended = 0;
  for (let trial = 0; trial < 150; trial++) {
    const m = answer.start();
    for (let i = Math.floor(rand() * 4); i > 0; i--) m.advance(allowed[Math.floor(rand() * allowed.length)]!);
    const run = m.maskRun!();
    if (!run) continue; // out of free reasoning: the grammar's masks vary
    const chain = Array.from({ length: 1 + Math.floor(rand() * 5) }, pick);
    const cut = runCut(run, chain);
    const inside = cut.ended ? cut.keep : chain.length + 1;
    for (let i = 0; i < inside; i++) {
      assert.ok(same(after(m, chain, i).mask(), run.mask), `position ${i} of [${chain}] is inside the run, its mask differs`);
      covered++;
    }
    if (cut.ended) {
      ended++;
      assert.equal(after(m, chain, cut.keep).maskRun?.() === run, false, 'past the cut, not the same run');
    }
  }
  assert.ok(covered > 200 && ended > 30, `${covered} positions covered, ${ended} chains cut`);
});
