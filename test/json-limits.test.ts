// The pre-parse depth scan agrees with the depth of the parsed value (brackets inside
// strings and escaped quotes do not count), and the limit checks walk huge client JSON
// without recursion.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { depthExceededAt, parseJsonBody } from '../src/server/http/json-parse.js';
import { checkRequestLimits, DEFAULT_LIMITS, jsonBytes, LIMIT_FLAGS, resolveLimits } from '../src/server/http/limits.js';
import { SERVE_HELP } from '../src/cli/serve.js';
import { ApiError } from '../src/server/http/errors.js';
import { Rng } from '../src/util/rng.js';
import { DeltaserveError } from '../src/util/errors.js';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT } from './paths.js';

/** Nesting depth of a parsed value (the reference the scan must agree with). */
function depthOf(v: unknown): number {
  if (Array.isArray(v)) return 1 + Math.max(0, ...v.map(depthOf));
  if (typeof v === 'object' && v !== null) return 1 + Math.max(0, ...Object.values(v).map(depthOf));
  return 0;
}

const TRICKY = ['[', ']', '{', '}', '"', '\\', '\\"[', '[\\\\', 'a"b', '\u2028'];

function randomJson(rng: Rng, depth: number): unknown {
  const r = rng.next();
  if (depth === 0 || r < 0.3) return r < 0.15 ? TRICKY[Math.floor(rng.next() * TRICKY.length)] : Math.floor(rng.next() * 100);
  const n = Math.floor(rng.next() * 4);
  if (r < 0.65) return Array.from({ length: n }, () => randomJson(rng, depth - 1));
  return Object.fromEntries(Array.from({ length: n }, (_, i) => [`${TRICKY[i % TRICKY.length]}${i}`, randomJson(rng, depth - 1)]));
}

test('the depth scan agrees with the parsed depth, strings and escapes included', () => {
  const rng = new Rng(7);
  for (let i = 0; i < 2000; i++) {
    const text = JSON.stringify(randomJson(rng, 8));
    const d = depthOf(JSON.parse(text));
    for (const limit of [d - 1, d, d + 1]) {
      if (limit < 1) continue;
      assert.equal(depthExceededAt(text, limit) >= 0, d > limit, `${text} depth ${d} limit ${limit}`);
    }
  }
});

test('parseJsonBody: too deep is a 400 json_too_deep naming the flag, before JSON.parse', () => {
  const deep = Buffer.from('['.repeat(100_000) + ']'.repeat(100_000));
  assert.throws(() => parseJsonBody(deep, 64),
    (e: unknown) => e instanceof ApiError && e.status === 400 && e.code === 'json_too_deep' && /--max-json-depth/.test(e.message));
  assert.deepEqual(parseJsonBody(Buffer.from('{"a": "[[[[", "b": [[1]]}'), 3), { a: '[[[[', b: [[1]] });
});

test('limit checks walk a million-element array without recursion or spreading', async () => {
  const body = { messages: [{ role: 'user', content: Array.from({ length: 1_000_000 }, () => 'x') }] };
  await assert.rejects(checkRequestLimits(body, resolveLimits({ promptChars: 999_999 })),
    (e: unknown) => e instanceof ApiError && e.status === 413 && /1000004 characters/.test(e.message));
  await checkRequestLimits(body, DEFAULT_LIMITS);
  const schema = { type: 'json_schema', json_schema: { name: 'x', schema: { enum: Array.from({ length: 1_000_000 }, (_, i) => i) } } };
  await assert.rejects(checkRequestLimits({ response_format: schema }, DEFAULT_LIMITS),
    (e: unknown) => e instanceof ApiError && e.code === 'enum_too_large');
});

test('limit checks hand the event loop back while they walk a huge body', async () => {
  const body = { messages: [{ role: 'user', content: Array.from({ length: 2_000_000 }, () => ({ type: 'text', text: 'x' })) }] };
  let ticks = 0;
  const ticker = setInterval(() => ticks++, 0);
  try {
    await checkRequestLimits(body, resolveLimits({ promptChars: 1 << 30 }));
  } finally {
    clearInterval(ticker);
  }
  // the walk over 4M values takes far longer than one 4 ms slice on any machine
  assert.ok(ticks >= 2, `timers ran ${ticks} times during the walk`);
});

test('jsonBytes counts the UTF-8 bytes of JSON.stringify without stringifying', async () => {
  const rng = new Rng(4);
  for (let i = 0; i < 2000; i++) {
    const v = randomJson(rng, 6);
    assert.equal(await jsonBytes(v), Buffer.byteLength(JSON.stringify(v), 'utf8'), JSON.stringify(v));
  }
  const odd = { '': ['é😀', '\ud800', '\u0001\n"\\', -0, 1e21, 5e-324, true, false, null, [], {}], __x: { 'k"é': 'v' } };
  assert.equal(await jsonBytes(odd), Buffer.byteLength(JSON.stringify(odd), 'utf8'));
});

test('limit values out of range are a configuration error naming the flag', () => {
  assert.throws(() => resolveLimits({ jsonDepth: 5000 }), (e: unknown) => e instanceof DeltaserveError && /--max-json-depth must be an integer in \[1, 1000\]/.test(e.message));
  assert.throws(() => resolveLimits({ tools: 0 }), (e: unknown) => e instanceof DeltaserveError && /--max-tools/.test(e.message));
  assert.equal(resolveLimits({ tools: 7 }).tools, 7);
});

test('docs/operations.md "Limits and hardening" lists every limit flag with the default the code and `serve --help` use', () => {
  const readme = readFileSync(join(REPO_ROOT, 'docs', 'operations.md'), 'utf8');
  const start = readme.indexOf('## Limits and hardening');
  assert.ok(start >= 0, 'docs/operations.md has a "Limits and hardening" section');
  const section = readme.slice(start, readme.indexOf('\n## ', start + 1));
  const rowDefault = (flag: string): number | null => {
    const m = new RegExp(`^\\| \`--${flag} [A-Z]+\` \\| (\\d+)`, 'm').exec(section);
    return m ? Number(m[1]) : null;
  };
  for (const { flag, def } of Object.values(LIMIT_FLAGS)) {
    assert.equal(rowDefault(flag), def, `--${flag}`);
    assert.match(SERVE_HELP, new RegExp(`--${flag} N .*\\(default ${def}\\)`), `--${flag} in serve --help`);
  }
  // the server's own limits: the README row and `serve --help` give the same default
  for (const flag of ['max-body-bytes', 'prepare-workers', 'request-timeout-ms', 'keep-alive-timeout-ms', 'max-queue', 'max-queue-wait', 'shutdown-grace-ms']) {
    const help = new RegExp(`--${flag} [A-Z]+ [\\s\\S]*?\\(default (\\d+)`).exec(SERVE_HELP);
    assert.ok(help, `--${flag} in serve --help`);
    assert.equal(rowDefault(flag), Number(help[1]), `--${flag}`);
  }
});
