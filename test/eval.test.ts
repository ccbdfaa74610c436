// `deltaserve eval`: item loading (task from each line, --limit per task), exact-match
// scoring after </think>, and the output JSON contract in-process (--compare-spec) and
// through the CLI.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { evaluate, loadEvalItems, summarize, type EvalResult } from '../src/cli/eval.js';
import { REPO_ROOT, sharedPath, TINY_THINK } from './paths.js';
import { KERNELS } from './server-helpers.js';

const SETS = (): string[] => ['add', 'mcq', 'recall'].map((t) => sharedPath('eval', `${t}.public.jsonl`));

function checkContract(r: EvalResult, tasks: Record<string, number>, compare: boolean, timed = true): void {
  assert.deepEqual(Object.keys(r).sort(), timed ? ['spec', 'tasks', 'timing'] : ['spec', 'tasks']);
  const runs = !timed ? [] : compare ? ['off', 'on'] : [r.spec.tokens > 0 ? 'on' : 'off'];
  for (const run of runs) {
    const t = r.timing![run as 'off' | 'on']!;
    assert.ok(t.seconds > 0 && t.tokens > 0 && Math.abs(t.tok_s - t.tokens / t.seconds) < 1e-6 * t.tok_s, `timing.${run}`);
  }
  if (timed && compare) assert.ok(Math.abs(r.timing!.spec_speedup! - r.timing!.off!.seconds / r.timing!.on!.seconds) < 1e-9);
  assert.deepEqual(Object.keys(r.tasks).sort(), Object.keys(tasks).sort());
  for (const [task, n] of Object.entries(tasks)) {
    const t = r.tasks[task]!;
    assert.deepEqual(Object.keys(t).sort(), ['accuracy', 'accuracy_spec', 'identical_fraction', 'n']);
    assert.equal(t.n, n);
    assert.ok(t.accuracy >= 0 && t.accuracy <= 1);
    if (compare) {
      assert.ok(t.accuracy_spec! >= 0 && t.accuracy_spec! <= 1);
      assert.ok(t.identical_fraction! >= 0 && t.identical_fraction! <= 1);
    } else {
      assert.equal(t.accuracy_spec, null);
      assert.equal(t.identical_fraction, null);
    }
  }
  assert.deepEqual(Object.keys(r.spec).sort(), ['accept_len_mean', 'tokens']);
}

test('loadEvalItems: task from each line, --limit per task, errors name file:line', (t) => {
  const items = loadEvalItems(SETS(), 3);
  assert.equal(items.length, 9);
  assert.deepEqual(items.map((i) => i.task), ['add', 'add', 'add', 'mcq', 'mcq', 'mcq', 'recall', 'recall', 'recall']);
  assert.equal(items[0]!.answer, '1336');
  const dir = mkdtempSync(join(tmpdir(), 'ds-eval-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const bad = join(dir, 'bad.jsonl');
  writeFileSync(bad, '{"task": "x", "messages": [{"role": "user", "content": "hi"}], "answer": "1"}\n{"task": "x", "messages": "oops", "answer": "1"}\n');
  assert.throws(() => loadEvalItems([bad]), /bad\.jsonl:2: messages must be an array/);
  assert.throws(() => loadEvalItems([join(dir, 'missing.jsonl')]), /missing\.jsonl: ENOENT/);
});

test('summarize: exact match after the last </think>, identical outputs, accept length', () => {
  const items = loadEvalItems(SETS(), 1).slice(0, 2); // add (1336), mcq
  const base = [
    { text: 'reasoning</think>\n\n1336', outputIds: [1, 2], acceptLen: null },
    { text: 'x</think>\n\nZ', outputIds: [3], acceptLen: null },
  ];
  const spec = [
    { text: 'reasoning</think>\n\n1336', outputIds: [1, 2], acceptLen: 2 },
    { text: `x</think>\n\n${items[1]!.answer}`, outputIds: [4], acceptLen: 3 },
  ];
  const r = summarize(items, base, spec, 2);
  checkContract(r, { add: 1, mcq: 1 }, true, false); // summarize alone: no timing
  assert.deepEqual(r.tasks['add'], { n: 1, accuracy: 1, accuracy_spec: 1, identical_fraction: 1 });
  assert.deepEqual(r.tasks['mcq'], { n: 1, accuracy: 0, accuracy_spec: 1, identical_fraction: 0 });
  assert.deepEqual(r.spec, { tokens: 2, accept_len_mean: 2.5 });
  assert.deepEqual(summarize(items, base, null, 0).spec, { tokens: 0, accept_len_mean: null });
});

test('evaluate --compare-spec on 2 items per task: contract, identical outputs MTP off/on', async () => {
  const items = loadEvalItems(SETS(), 2);
  const { result, base, spec } = await evaluate({
    engine: { model: TINY_THINK(), kernels: KERNELS, maxRunning: 8 }, items, maxTokens: 48, specTokens: 2, compareSpec: true,
  });
  checkContract(result, { add: 2, mcq: 2, recall: 2 }, true);
  for (const t of Object.values(result.tasks)) {
    assert.equal(t.identical_fraction, 1);
    assert.equal(t.accuracy_spec, t.accuracy);
  }
  assert.equal(result.spec.tokens, 2);
  assert.ok(result.spec.accept_len_mean! >= 1 && result.spec.accept_len_mean! <= 3);
  assert.ok(base.every((o) => o.acceptLen === null));
  assert.ok(spec!.some((o) => o.acceptLen !== null));
});

test('CLI: deltaserve eval prints the JSON contract; --data is required', () => {
  const cli = (args: string[]): ReturnType<typeof spawnSync> => spawnSync(process.execPath, [join(REPO_ROOT, 'dist', 'src', 'cli', 'main.js'), ...args], {
    encoding: 'utf8', env: { ...process.env, DELTASERVE_KERNELS: KERNELS },
  });
  const r = cli(['eval', '--data', ...SETS(), '--limit', '1', '--max-tokens', '32', '--model', TINY_THINK()]);
  assert.equal(r.status, 0, String(r.stderr));
  const out = JSON.parse(String(r.stdout)) as EvalResult;
  checkContract(out, { add: 1, mcq: 1, recall: 1 }, false);
  assert.equal(out.spec.tokens, 0);
  assert.equal(out.spec.accept_len_mean, null);
  const none = cli(['eval']);
  assert.equal(none.status, 2, 'a user error exits 2');
  assert.match(String(none.stderr), /eval needs --data/);
});
