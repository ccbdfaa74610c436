#!/usr/bin/env node
// Structured-output costs on a 248K vocabulary, as one JSON object (no assertions):
//   - per-token mask time along valid documents of a plain and a rich schema: cold (first
//     time the grammar meets each state, vocabulary tables already built as the server's
//     warm-up builds them) and warm (a second pass), in CPU ms (process.cpuUsage: robust to
//     other jobs on a shared machine) and wall ms;
//   - the warm-up: building the vocabulary and its JSON text classes in background steps, and
//     the longest the event loop waited meanwhile;
//   - first compile of typical schemas (format automata built first, as the warm-up does);
//   - hostile schemas within the default request limits: time until the compile budget stops them.
// The vocabulary is tiny-think's grown to --vocab N (default 248320) by BPE-like merges (see
// src/cli/bench-grammar.ts grownVocab), or --model DIR for a real tokenizer.
// Usage: npm run build && node scripts/bench-grammar.mjs [--vocab N] [--model DIR] [--no-hostile]
// (DELTASERVE_DIST=other/dist measures another build of the same API, e.g. main's.)
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import { resolve } from 'node:path';

const repo = resolve(fileURLToPath(new URL('.', import.meta.url)), '..');
const root = resolve(repo, process.env.DELTASERVE_DIST ?? 'dist');
const { values } = parseArgs({ options: { vocab: { type: 'string', default: '248320' }, model: { type: 'string' }, hostile: { type: 'boolean', default: true } }, allowNegative: true });
const imp = (p) => import(resolve(root, 'src', p));
// the constraint library: src/constrain (builds before it: src/server/structured)
const lib = (p) => imp(`constrain/${p}`).catch(() => imp(`server/structured/${p}`));
const { TokenTexts } = await imp('server/logprobs.js');
const { step, val } = await lib('matcher.js');
const mask = await lib('mask.js');
const { GrammarConstraint } = await imp('constrain/grammar-matcher.js').catch(() => mask);
const { compileSchema } = await lib('schema.js');
const { compileOrThrow } = await imp('server/structured/request.js');
const { FORMATS } = await lib('formats.js');
const { compileRegex } = await lib('regex.js');
const freeText = await lib('free-text.js');
const steps = await lib('steps.js').catch(() => null);
// hostnames with the IDNA A-label check, as the server compiles them (built in before the module)
(await imp('constrain/idna/index.js').catch(() => null))?.registerIdnaHostnames();
const { TextTokenizer } = await imp('tokenizer/tokenizer.js');
const { grownVocab } = await imp('cli/bench-grammar.js');

const cpuMs = (t0) => { const u = process.cpuUsage(t0); return (u.user + u.system) / 1000; };
const round = (x) => +x.toFixed(3);
const stats = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const q = (p) => round(s[Math.min(s.length - 1, Math.floor(p * s.length))]);
  return { mean: round(xs.reduce((a, b) => a + b, 0) / xs.length), median: q(0.5), p90: q(0.9), max: q(1) };
};

const tok = TextTokenizer.load(values.model ?? resolve(repo, '..', 'shared', 'models', 'tiny-think'));
const texts = new TokenTexts(tok);
const base = Array.from({ length: tok.size }, (_, id) => (tok.specialIds.has(id) ? null : Uint8Array.from(texts.get(id).bytes)));
const size = Number(values.vocab);
const all = !values.model && size > base.length ? grownVocab(base, size, 7) : base.map((b) => b ?? new Uint8Array(0));
const bytes = all.map((b) => (b.length > 0 ? b : null));

// the warm-up: in background steps when this build has them, measuring the event loop's longest wait
const out = { vocab: all.length, source: values.model ? `tokenizer of ${values.model}` : `tiny-think grown to ${all.length} (grownVocab seed 7)` };
let v;
{
  let last = performance.now();
  let maxGap = 0;
  const tick = setInterval(() => { const now = performance.now(); maxGap = Math.max(maxGap, now - last); last = now; }, 1);
  const t0 = performance.now();
  const c0 = process.cpuUsage();
  if (steps && mask.lazyVocabFromBytes) {
    const lazy = mask.lazyVocabFromBytes(bytes, tok.stopIds());
    await steps.advanceInBackground(lazy, 5, () => false);
    v = lazy.get();
    await steps.advanceInBackground(freeText.lazyJsonTextClass(v), 5, () => false);
    const split = await lib('quote-split.js').catch(() => null);
    if (split) {
      const q = split.lazyQuoteSplit(v);
      await steps.advanceInBackground(q, 5, () => false);
      await steps.advanceInBackground(freeText.lazyJsonTextClass(q.get().suffixes), 5, () => false);
    }
  } else {
    v = mask.vocabFromBytes(bytes, tok.stopIds());
    // the text classes are built by the first mask inside a string
    mask.computeMask(v, step([val(compileSchema({ type: 'string' }), null)], 0x22));
    await new Promise((r) => setTimeout(r, 5));
  }
  clearInterval(tick);
  out.warmup = { background: !!steps, wall_ms: round(performance.now() - t0), cpu_ms: round(cpuMs(c0)), event_loop_max_wait_ms: round(maxGap) };
}
{
  const t0 = performance.now();
  for (const rule of Object.values(FORMATS)) rule.patterns.forEach(compileRegex);
  out.format_automata_ms = round(performance.now() - t0);
}

const SCHEMAS = {
  plain: { type: 'object', additionalProperties: false, required: ['name', 'age', 'tags', 'address'], properties: {
    name: { type: 'string' }, age: { type: 'integer' }, score: { type: 'number' }, active: { type: 'boolean' }, tags: { type: 'array', items: { type: 'string' }, maxItems: 8 },
    address: { type: 'object', properties: { street: { type: 'string' }, city: { type: 'string' }, zip: { type: 'string' } }, required: ['city'] } } },
  rich: { type: 'object', additionalProperties: false, required: ['id', 'email', 'created', 'rating', 'kind'], properties: {
    id: { type: 'string', pattern: '^[A-Z]{3}-[0-9]{4,6}$' }, email: { type: 'string', format: 'email' }, created: { type: 'string', format: 'date-time' },
    rating: { type: 'integer', minimum: 1, maximum: 5 }, price: { type: 'number', exclusiveMinimum: 0, maximum: 10000 }, site: { type: 'string', format: 'uri' },
    kind: { anyOf: [{ const: 'person' }, { const: 'org' }], maxLength: 6 },
    meta: { type: 'object', patternProperties: { '^x-[a-z]+$': { type: 'string', maxLength: 32 } }, additionalProperties: false } } },
  // hostnames with A-labels: every mask inside an xn-- label runs the IDNA label check
  hostname: { type: 'object', required: ['host'], properties: { host: { type: 'string', format: 'hostname' }, mirrors: { type: 'array', items: { type: 'string', format: 'hostname' } } } },
};
const DOCS = {
  plain: ['{"name":"Ada Lovelace, née Byron","age":36,"score":98.5,"active":true,"tags":["math","poetry","engines"],"address":{"street":"12 St James\'s Square","city":"London","zip":"SW1Y 4JH"}}',
    '{"name":"Zoë Ångström — the second","age":41,"tags":[],"address":{"city":"Uppsala"}}',
    '{"name":"A very long name that keeps going for a while to exercise the string state of the matcher over many tokens","age":7,"active":false,"tags":["a","b"],"address":{"city":"Oslo","zip":"0150"}}'],
  rich: ['{"kind":"person","id":"ABC-12345","email":"ada.lovelace@example.org","created":"2024-02-29T12:30:00.5+01:00","rating":5,"price":129.99,"site":"https://example.org/ada?x=1","meta":{"x-team":"engines","x-note":"first programmer"}}',
    '{"id":"ZZZ-0001","email":"o@x.io","created":"1999-12-31T23:59:60Z","rating":1,"kind":"org"}'],
  hostname: ['{"host":"xn--9n2bp8q.xn--9t4b11yi5a","mirrors":["www.example.com","xn--ihqwcrb4cv8a8dqg056pqjye.cn","xn--bcher-kva.example"]}'],
};
const EXTRA = {
  wide: { type: 'object', properties: Object.fromEntries(Array.from({ length: 60 }, (_, i) => [`field_${i}`, i % 3 === 0 ? { type: 'string', format: 'date' } : i % 3 === 1 ? { type: 'integer', minimum: i } : { enum: ['a', 'b', i] }])), required: ['field_0', 'field_1'] },
  recursive: { $defs: { node: { type: 'object', properties: { name: { type: 'string' }, children: { type: 'array', items: { $ref: '#/$defs/node' } } }, required: ['name'] } }, $ref: '#/$defs/node' },
};
out.compile_ms_first = {};
for (const [name, s] of Object.entries({ ...SCHEMAS, ...EXTRA })) {
  const t0 = performance.now();
  compileSchema(s);
  out.compile_ms_first[name] = round(performance.now() - t0);
}

const index = new Map();
let maxLen = 1;
all.forEach((b, id) => { if (b.length === 0) return; const k = Buffer.from(b).toString('latin1'); if (!index.has(k)) index.set(k, id); maxLen = Math.max(maxLen, b.length); });
const tokenize = (text) => {
  const s = Buffer.from(text, 'utf8').toString('latin1');
  const ids = [];
  for (let i = 0; i < s.length;) {
    let len = Math.min(maxLen, s.length - i);
    while (len > 0 && !index.has(s.slice(i, i + len))) len--;
    ids.push(index.get(s.slice(i, i + len)));
    i += len;
  }
  return ids;
};
function pass(start, docs, cache) {
  const cpu = [];
  const wall = [];
  for (const ids of docs) {
    const c = new GrammarConstraint(v, start, cache);
    for (let k = 0; k <= ids.length; k++) {
      const prefix = ids.slice(0, k);
      c.stateAfter(prefix);
      const t0 = performance.now();
      const c0 = process.cpuUsage();
      c.allowed(prefix);
      cpu.push(cpuMs(c0));
      wall.push(performance.now() - t0);
    }
  }
  return { cpu, wall };
}
for (const [name, schema] of Object.entries(SCHEMAS)) {
  const start = [val(compileSchema(schema), null)];
  const docs = DOCS[name].map(tokenize);
  const cache = new mask.MaskCache();
  const cold = pass(start, docs, cache);
  const warm = pass(start, docs, cache);
  out[name] = { tokens: docs.reduce((n, d) => n + d.length, 0), mask_cpu_ms_cold: stats(cold.cpu), mask_wall_ms_cold: stats(cold.wall), mask_cpu_ms_warm: stats(warm.cpu) };
}

// hostile schemas within the default limits (bytes < 128 KiB, enums ≤ 1024, depth ≤ 64)
const HOSTILE = {
  repetitions: { type: 'object', properties: Object.fromEntries(Array.from({ length: 1500 }, (_, i) => [`p${i}`, { type: 'string', pattern: `^(a|b${i}){500}$` }])) },
  cross_product: { allOf: Array.from({ length: 16 }, (_, k) => ({ anyOf: [{ type: 'object', properties: { [`a${k}`]: { type: 'string' } } }, { type: 'object', properties: { [`b${k}`]: { type: 'integer' } } }] })) },
  enum_1024: { enum: Array.from({ length: 1024 }, (_, i) => `${'v'.repeat(100)}${i}`) },
};
out.hostile_compile = {};
for (const [name, s] of Object.entries(values.hostile ? HOSTILE : {})) {
  const t0 = performance.now();
  let result = 'compiled';
  try {
    compileOrThrow(s, name);
  } catch (e) {
    result = String(e.message).slice(0, 90);
  }
  out.hostile_compile[name] = { bytes: Buffer.byteLength(JSON.stringify(s)), ms: round(performance.now() - t0), result };
}
console.log(JSON.stringify(out));
