// The scheduler is the only writer of request progress (src/engine/request.ts, update.ts).
// Two guards:
//  - types: every write below is a compile error (`@ts-expect-error`), so making a progress
//    field writable through a Request or a RequestView breaks `tsc` on this file;
//  - source: no module of src/engine but request.ts, scheduler.ts and update.ts assigns or
//    mutates a progress field, and no module of src/ or test/ but those names the
//    scheduler's writable handle (MutableRequest, own()).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { PROGRESS_FIELDS, Request, type RequestView } from '../src/engine/request.js';
import { OutputText } from '../src/engine/output.js';
import { GREEDY, TokenHistory } from '../src/engine/sampler.js';
import { Rng } from '../src/util/rng.js';
import { REPO_ROOT } from './paths.js';

/** Each statement must fail to compile; the test calls it on a throwaway request and on a
 * frozen copy, so that were any to compile, it would also throw or change the request. */
function writeThroughViews(view: RequestView, req: Request): void {
  // @ts-expect-error tokens cannot grow through the view
  view.tokens.push(1);
  // @ts-expect-error nor through the class
  req.tokens.push(1);
  // @ts-expect-error drafts are the scheduler's
  req.drafts = [1];
  // @ts-expect-error hit state is the scheduler's
  req.hitHidden = null;
  // @ts-expect-error pages are the scheduler's
  req.pages.push(1);
  // @ts-expect-error status is the scheduler's
  req.status = 'finished';
  // @ts-expect-error spec counters are the scheduler's
  req.spec.accepted++;
  // @ts-expect-error the event stream is read-only for everyone else
  req.events.push({ type: 'delta', text: '', ids: [], reasoning: '', content: '' });
  // @ts-expect-error the history is read-only for everyone else
  req.history.push(1);
  // @ts-expect-error the output text is read-only for everyone else
  req.output.push(1);
  // @ts-expect-error computed is read-only through the view (the frozen view throws here)
  view.computed = 1;
}

function request(): Request {
  return new Request(1, 1, [5, 6], 4, 6, GREEDY, new Rng(1), new Rng(2), new TokenHistory([5, 6]), new OutputText(() => '', [5, 6], new Set(), []));
}

test('writes of progress through a Request or a RequestView do not compile (and would show at run time)', () => {
  const req = request();
  const before = JSON.stringify({ tokens: req.tokens, drafts: req.drafts, pages: req.pages, status: req.status, spec: req.spec });
  // the frozen view makes every plain field write throw; the rest changes the request
  assert.throws(() => writeThroughViews(Object.freeze(request()), req));
  assert.notEqual(JSON.stringify({ tokens: req.tokens, drafts: req.drafts, pages: req.pages, status: req.status, spec: req.spec }), before,
    'the statements above really write (so their @ts-expect-error marks real violations)');
});

/** Files under `dir` (recursively) whose name ends in .ts. */
function tsFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? tsFiles(path) : name.endsWith('.ts') ? [path] : [];
  });
}

const OWNERS = ['src/engine/request.ts', 'src/engine/scheduler.ts', 'src/engine/update.ts'];
const fields = PROGRESS_FIELDS.join('|');
/** `x.field = …`, `x.field += …`, `x.field++`, `x.spec.rounds++`, `x.tokens.push(…)`, … */
const WRITE = new RegExp(
  `\\.(${fields})(\\.[A-Za-z]+)?\\s*(=(?![=>])|\\+=|-=|\\+\\+|--)|\\.(${fields})\\.(push|pop|shift|unshift|splice|end|fill|sort|reverse|set|delete|clear)\\(`);

/** Lines of src/engine (outside the owners) that write a progress field. */
function progressWrites(): string[] {
  const engine = join(REPO_ROOT, 'src/engine');
  return tsFiles(engine).flatMap((path) => {
    const rel = relative(REPO_ROOT, path);
    if (OWNERS.includes(rel)) return [];
    return readFileSync(path, 'utf8').split('\n').flatMap((line, i) => (WRITE.test(line.replace(/\/\/.*$/, '')) ? [`${rel}:${i + 1}: ${line.trim()}`] : []));
  });
}

test('the pattern finds the writes it is meant to find', () => {
  for (const bad of ['req.computed = 3;', 'row.req!.drafts = [];', 'r.hitHidden = null', 'req.tokens.push(id);', 'req.spec.rounds++;',
    'a.req.pages.push(...got)', 'req.events.end();', 'req.status = "finished"', 'req.preemptions += 1']) {
    assert.ok(WRITE.test(bad), bad);
  }
  for (const ok of ['if (req.computed === 3)', 'const n = req.tokens.length;', 'x => req.drafts', 'req.status !== "running"']) assert.ok(!WRITE.test(ok), ok);
});

test('no module of src/engine but the scheduler writes request progress', () => {
  assert.deepEqual(progressWrites(), []);
});

/** The file names `MutableRequest` or imports `own` from the engine's update module (an `own`
 * of another module, e.g. a kernel's buffer owner, is not the request handle). */
function namesWritableHandle(text: string): boolean {
  return /\bMutableRequest\b/.test(text) || /import\s*(?:type\s*)?\{[^}]*\bown\b[^}]*\}\s*from\s*'[^']*update\.js'/.test(text);
}

test('only the scheduler names its writable handle on a request', () => {
  const users = [...tsFiles(join(REPO_ROOT, 'src')), ...tsFiles(join(REPO_ROOT, 'test'))]
    .map((path) => relative(REPO_ROOT, path))
    .filter((rel) => namesWritableHandle(readFileSync(join(REPO_ROOT, rel), 'utf8')))
    .filter((rel) => !OWNERS.includes(rel) && rel !== 'test/request-ownership.test.ts');
  assert.deepEqual(users, []);
});
