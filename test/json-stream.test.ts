// The incremental body parser against JSON.parse: the same value for random documents cut
// into random chunks (cuts inside strings, escapes, numbers, literals and multi-byte UTF-8
// characters included), the same accept/reject verdict on random corruptions, and the
// depth limit agreeing with the parsed depth.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ApiError } from '../src/server/http/errors.js';
import { JsonBodyParser } from '../src/server/http/json-stream.js';
import { Rng } from '../src/util/rng.js';

const TRICKY = ['', '[', ']', '{', '}', '"', '\\', '\\"[', 'a"b', '\u2028', 'é', '日本', '😀', '\n\t\r\b\f', '\u0000\u001f', '/', '\ud800',
  '__proto__', 'constructor', 'toString', '<|im_start|>system'];
const NUMBERS = [0, -0, 1, -1, 12.5, -3.25e-7, 1e21, 1.7976931348623157e308, 5e-324, 123456789012345680000];

function pick<T>(rng: Rng, xs: readonly T[]): T {
  return xs[Math.floor(rng.next() * xs.length)]!;
}

function randomJson(rng: Rng, depth: number): unknown {
  const r = rng.next();
  if (depth === 0 || r < 0.35) {
    if (r < 0.12) return pick(rng, TRICKY) + pick(rng, TRICKY);
    if (r < 0.24) return pick(rng, NUMBERS);
    if (r < 0.3) return pick(rng, [true, false, null]);
    return Math.floor(rng.next() * 1e6) / 100;
  }
  const n = Math.floor(rng.next() * 5);
  if (r < 0.65) return Array.from({ length: n }, () => randomJson(rng, depth - 1));
  return Object.fromEntries(Array.from({ length: n }, (_, i) => [`${pick(rng, TRICKY)}${i % 3 === 0 ? '' : i}`, randomJson(rng, depth - 1)]));
}

/** JSON text of `v` with random whitespace between tokens and escapes spelled in several ways. */
function spell(rng: Rng, v: unknown): string {
  const ws = (): string => (rng.next() < 0.3 ? pick(rng, [' ', '\n', '\t', '\r\n', '  ']) : '');
  const str = (s: string): string => {
    const plain = JSON.stringify(s);
    // \u-escape some characters, and write '/' as '\/' sometimes
    return rng.next() < 0.3 ? plain.replace(/[a-z/]/g, (c) => (c === '/' ? '\\/' : `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)) : plain;
  };
  if (typeof v === 'string') return str(v);
  if (Array.isArray(v)) return `[${ws()}${v.map((x) => spell(rng, x)).join(`${ws()},${ws()}`)}${ws()}]`;
  if (v !== null && typeof v === 'object') {
    return `{${ws()}${Object.entries(v).map(([k, x]) => `${str(k)}${ws()}:${ws()}${spell(rng, x)}`).join(`,${ws()}`)}${ws()}}`;
  }
  return JSON.stringify(v);
}

/** Parse `bytes` in chunks cut at random byte offsets (so inside UTF-8 sequences too). */
function parseChunked(rng: Rng, bytes: Buffer, maxDepth = 1000, maxChunk = 16): unknown {
  const p = new JsonBodyParser(maxDepth);
  for (let i = 0; i < bytes.length;) {
    const n = 1 + Math.floor(rng.next() * maxChunk);
    p.push(bytes.subarray(i, i + n));
    i += n;
  }
  return p.end();
}

function verdict(f: () => unknown): { ok: true; value: unknown } | { ok: false } {
  try {
    return { ok: true, value: f() };
  } catch {
    return { ok: false };
  }
}

test('random documents cut into random chunks parse to what JSON.parse returns', () => {
  const rng = new Rng(11);
  for (let i = 0; i < 3000; i++) {
    const text = `${rng.next() < 0.2 ? ' ' : ''}${spell(rng, randomJson(rng, 6))}${rng.next() < 0.2 ? '\n' : ''}`;
    const bytes = Buffer.from(text);
    // the reference is the old path: the body's bytes decoded whole, then JSON.parse
    const expected: unknown = JSON.parse(bytes.toString('utf8'));
    assert.deepStrictEqual(parseChunked(rng, bytes, 1000, rng.next() < 0.5 ? 4 : 200), expected, text);
  }
});

test('a __proto__ key becomes an own property, as in JSON.parse; the last duplicate key wins', () => {
  const rng = new Rng(1);
  const v = parseChunked(rng, Buffer.from('{"__proto__": {"polluted": 1}, "a": 1, "a": 2}')) as Record<string, unknown>;
  assert.equal(Object.getPrototypeOf(v), Object.prototype);
  assert.deepEqual(Object.keys(v), ['__proto__', 'a']);
  assert.equal(v['a'], 2);
  assert.equal(({} as Record<string, unknown>)['polluted'], undefined);
  assert.deepStrictEqual(v, JSON.parse('{"__proto__": {"polluted": 1}, "a": 1, "a": 2}'));
});

test('corrupted documents: rejected exactly when JSON.parse rejects them, else the same value', () => {
  const rng = new Rng(5);
  const junk = ['', ' ', '"', '\\', '{', '}', '[', ']', ',', ':', '-', '0', '1', 'e', '.', 'tru', 'nul', 'x', '\u0001', '\\u12', '\\x'];
  let rejected = 0;
  for (let i = 0; i < 4000; i++) {
    const text = spell(rng, randomJson(rng, 4));
    const at = Math.floor(rng.next() * (text.length + 1));
    const cut = Math.floor(rng.next() * 3);
    const bad = text.slice(0, at) + pick(rng, junk) + text.slice(Math.min(text.length, at + cut));
    const ref = verdict(() => JSON.parse(Buffer.from(bad).toString('utf8')) as unknown);
    const got = verdict(() => parseChunked(rng, Buffer.from(bad)));
    assert.equal(got.ok, ref.ok, `${JSON.stringify(bad)}: JSON.parse ${ref.ok ? 'accepts' : 'rejects'} it`);
    if (ref.ok && got.ok) assert.deepStrictEqual(got.value, ref.value, bad);
    else rejected++;
  }
  assert.ok(rejected > 1000, `only ${rejected} corruptions were invalid JSON`);
});

test('errors: a 400 invalid_json with the position, an empty body, an incomplete body', () => {
  const rng = new Rng(2);
  const fails = (text: string, re: RegExp, code = 'invalid_json'): void => {
    assert.throws(() => parseChunked(rng, Buffer.from(text)), (e: unknown) =>
      e instanceof ApiError && e.status === 400 && e.code === code && re.test(e.message), text);
  };
  fails('', /the request body is empty/, null as unknown as string);
  fails('{bad json', /not valid JSON: expected a property name in double quotes, found "b" \(at character 1\)/);
  fails('{"a": [1, 2', /not valid JSON: unexpected end of the body/);
  fails('{"a": "unterminated', /not valid JSON: unexpected end of the body/);
  fails('{"a": "cut escape \\u00', /not valid JSON: unexpected end of the body inside a string/);
  fails('{"a": 1} {}', /unexpected "\{" after the JSON value \(at character 9\)/);
  fails('{"a": 01}', /bad number "01"/);
  fails('[truefalse]', /unexpected word/);
  fails('["a\tb"]', /control character inside a string/);
});

/** Nesting depth of a parsed value. */
function depthOf(v: unknown): number {
  if (Array.isArray(v)) return 1 + Math.max(0, ...v.map(depthOf));
  if (typeof v === 'object' && v !== null) return 1 + Math.max(0, ...Object.values(v).map(depthOf));
  return 0;
}

test('the depth limit: json_too_deep exactly when the document nests deeper than the limit', () => {
  const rng = new Rng(9);
  for (let i = 0; i < 1500; i++) {
    const text = spell(rng, randomJson(rng, 8));
    const d = depthOf(JSON.parse(text));
    for (const limit of [d - 1, d, d + 1]) {
      if (limit < 1) continue;
      const r = verdict(() => parseChunked(rng, Buffer.from(text), limit));
      assert.equal(r.ok, d <= limit, `${text} depth ${d} limit ${limit}`);
    }
  }
  // 100k levels: refused at the 65th opening, without building anything deeper
  const deep = Buffer.from('['.repeat(100_000) + ']'.repeat(100_000));
  assert.throws(() => parseChunked(rng, deep, 64, 65536), (e: unknown) => e instanceof ApiError && e.code === 'json_too_deep' &&
    /deeper than the limit of 64 levels \(--max-json-depth; exceeded at character 64\)/.test(e.message));
});

test('multi-megabyte strings and arrays in 64 KiB chunks equal JSON.parse', () => {
  const rng = new Rng(3);
  const docs = [
    { messages: [{ role: 'user', content: 'hello world '.repeat(300_000) + 'é😀\\"'.repeat(1000) }] },
    { tokens: Array.from({ length: 300_000 }, (_, i) => (i * 7919) % 151_000) },
    { tools: Array.from({ length: 500 }, (_, i) => ({ type: 'function', function: { name: `t${i}`, description: 'd\n'.repeat(1500) } })) },
  ];
  for (const d of docs) {
    const text = JSON.stringify(d);
    assert.deepStrictEqual(parseChunked(rng, Buffer.from(text), 64, 65536), JSON.parse(text));
  }
});
