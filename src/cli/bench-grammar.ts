// `deltaserve bench --mode grammar`: the per-token cost of structured-output masks, as one
// JSON object. Documents valid under a schema are tokenized (greedy longest match) and
// followed token by token through a constraint; every mask is timed cold (a fresh cache),
// warm (the cache of an earlier pass) and uncached (the full vocabulary walk every time).
// `--vocab N` grows the model's vocabulary to N tokens by BPE-like merges of its tokens (a
// seeded stand-in for a real 248K Qwen vocabulary when the checkpoint's tokenizer is small).
// As a server does at start (in the background), the vocabulary's token classes and the
// format automata are built first and timed apart; "cold" masks come after them.
import { resolve } from 'node:path';
import { TokenTexts } from '../server/api/logprobs.js';
import { type State, val } from '../constrain/matcher.js';
import { computeMask, MaskCache, type TokenVocab, vocabFromBytes } from '../constrain/mask.js';
import { GrammarConstraint, GrammarMatcher } from '../constrain/grammar-matcher.js';
import { FORMATS } from '../constrain/formats.js';
import { registerIdnaHostnames } from '../constrain/idna/index.js';
import { lazyJsonTextClass } from '../constrain/free-text.js';
import { lazyQuoteSplit } from '../constrain/quote-split.js';
import { compileRegex } from '../constrain/regex.js';
import { compileSchema } from '../constrain/schema.js';
import { TextTokenizer } from '../tokenizer/tokenizer.js';
import { schemaMaskTimes } from './bench-schemas.js';
import { Rng } from '../util/rng.js';

const SCHEMA = {
  type: 'object', additionalProperties: false, required: ['name', 'age', 'tags', 'address'],
  properties: {
    name: { type: 'string' }, age: { type: 'integer' }, score: { type: 'number' }, active: { type: 'boolean' },
    tags: { type: 'array', items: { type: 'string' }, maxItems: 8 },
    address: { type: 'object', properties: { street: { type: 'string' }, city: { type: 'string' }, zip: { type: 'string' } }, required: ['city'] },
  },
};
const DOCS = [
  '{"name":"Ada Lovelace, née Byron","age":36,"score":98.5,"active":true,"tags":["math","poetry","engines"],"address":{"street":"12 St James\'s Square","city":"London","zip":"SW1Y 4JH"}}',
  '{"name":"Zoë Ångström — the second","age":41,"tags":[],"address":{"city":"Uppsala"}}',
  '{"name":"A very long name that keeps going for a while to exercise the string state of the matcher over many tokens","age":7,"active":false,"tags":["a","b"],"address":{"city":"Oslo","zip":"0150"}}',
];

/** A schema of the wider language: formats, patterns, ranges, anyOf with siblings, pattern keys. */
const RICH = {
  type: 'object', additionalProperties: false, required: ['id', 'email', 'created', 'rating', 'kind'],
  properties: {
    id: { type: 'string', pattern: '^[A-Z]{3}-[0-9]{4,6}$' }, email: { type: 'string', format: 'email' },
    created: { type: 'string', format: 'date-time' }, rating: { type: 'integer', minimum: 1, maximum: 5 },
    price: { type: 'number', exclusiveMinimum: 0, maximum: 10000 }, site: { type: 'string', format: 'uri' },
    kind: { anyOf: [{ const: 'person' }, { const: 'org' }], maxLength: 6 },
    meta: { type: 'object', patternProperties: { '^x-[a-z]+$': { type: 'string', maxLength: 32 } }, additionalProperties: false },
  },
};
const RICH_DOCS = [
  '{"kind":"person","id":"ABC-12345","email":"ada.lovelace@example.org","created":"2024-02-29T12:30:00.5+01:00","rating":5,"price":129.99,"site":"https://example.org/ada?x=1","meta":{"x-team":"engines","x-note":"first programmer"}}',
  '{"id":"ZZZ-0001","email":"o@x.io","created":"1999-12-31T23:59:60Z","rating":1,"kind":"org"}',
];
/** Typical schemas for the compile time: the two above, a recursive one, a wide one. */
const COMPILE_SET: Record<string, unknown> = {
  plain: SCHEMA, rich: RICH,
  recursive: { $defs: { node: { type: 'object', properties: { name: { type: 'string' }, children: { type: 'array', items: { $ref: '#/$defs/node' } } }, required: ['name'] } }, $ref: '#/$defs/node' },
  wide: { type: 'object', properties: Object.fromEntries(Array.from({ length: 60 }, (_, i) => [`field_${i}`, i % 3 === 0 ? { type: 'string', format: 'date' } : i % 3 === 1 ? { type: 'integer', minimum: i } : { enum: ['a', 'b', i] }])), required: ['field_0', 'field_1'] },
};

/** Characters beyond ASCII that real vocabularies spell as whole tokens. */
const EXTRA = 'éèàöüäñçøåßœ’“”—–…€中文字日本語한국어русскийالعربية'.split('');

/** The tokenizer's vocabulary grown to `size` ids by merging pairs of text tokens (printable
 * ASCII, whole non-ASCII characters, and a few newline joins), as BPE merges grow a vocabulary
 * from text: the base ids stay as they are (control and lone high bytes included). */
export function grownVocab(base: readonly (Uint8Array | null)[], size: number, seed: number): Uint8Array[] {
  const out: Uint8Array[] = base.map((b) => b ?? new Uint8Array(0));
  const seen = new Set(out.map((b) => Buffer.from(b).toString('latin1')));
  const isText = (b: Uint8Array): boolean => b.length > 0 && b.every((x) => x >= 0x20 && x < 0x7f);
  const parts: Uint8Array[] = out.filter(isText);
  for (const ch of EXTRA) parts.push(Buffer.from(ch, 'utf8'));
  const newline = Uint8Array.of(0x0a);
  const rng = new Rng(seed);
  const pick = (): Uint8Array => (rng.next() < 0.02 ? newline : parts[Math.floor(parts.length * rng.next() ** 2)]!);
  while (out.length < size) {
    const a = pick();
    const b = pick();
    if (a.length + b.length > 16) continue;
    const m = new Uint8Array(a.length + b.length);
    m.set(a);
    m.set(b, a.length);
    const k = Buffer.from(m).toString('latin1');
    if (seen.has(k)) continue;
    seen.add(k);
    out.push(m);
    parts.push(m);
  }
  return out;
}

/** Greedy longest-match tokenization of `text` over the vocabulary. */
function tokenize(text: string, index: Map<string, number>, maxLen: number): number[] {
  const s = Buffer.from(text, 'utf8').toString('latin1');
  const ids: number[] = [];
  for (let i = 0; i < s.length;) {
    let len = Math.min(maxLen, s.length - i);
    while (len > 0 && !index.has(s.slice(i, i + len))) len--;
    if (len === 0) throw new Error(`byte ${s.charCodeAt(i)} has no token`);
    ids.push(index.get(s.slice(i, i + len))!);
    i += len;
  }
  return ids;
}

const stats = (xs: number[]): Record<string, number> => {
  const s = [...xs].sort((a, b) => a - b);
  const q = (p: number): number => +(s[Math.min(s.length - 1, Math.floor(p * s.length))]!).toFixed(3);
  return { mean: +(xs.reduce((a, b) => a + b, 0) / xs.length).toFixed(3), median: q(0.5), p90: q(0.9), max: q(1) };
};

function timeMasks(v: TokenVocab, start: State, docs: number[][], cache: MaskCache): number[] {
  const ms: number[] = [];
  for (const ids of docs) {
    // as the engine does: one matcher per sequence, advanced by each token, then its mask
    const m = GrammarMatcher.start(v, start, cache);
    for (let k = 0; k <= ids.length; k++) {
      const t0 = performance.now();
      if (k > 0) m.advance(ids[k - 1]!);
      m.mask();
      ms.push(performance.now() - t0);
    }
  }
  return ms;
}

export function runGrammarBench(modelDir: string | undefined, vocabSize: number | undefined, defaultModel: string,
  schemas: { files: readonly string[]; decodeMs: number | null } = { files: [], decodeMs: null }): Record<string, unknown> {
  registerIdnaHostnames(); // `--schema` files compile as the server compiles them
  const tok = TextTokenizer.load(resolve(modelDir ?? defaultModel));
  const texts = new TokenTexts(tok);
  const base = Array.from({ length: tok.size }, (_, id) => (tok.specialIds.has(id) ? null : Uint8Array.from(texts.get(id).bytes)));
  const all = vocabSize && vocabSize > base.length ? grownVocab(base, vocabSize, 7) : base.map((b) => b ?? new Uint8Array(0));
  const t0 = performance.now();
  const v = vocabFromBytes(all.map((b) => (b.length > 0 ? b : null)), tok.stopIds());
  const buildMs = performance.now() - t0;
  const index = new Map<string, number>();
  let maxLen = 1;
  all.forEach((b, id) => {
    if (b.length === 0) return;
    const k = Buffer.from(b).toString('latin1');
    if (!index.has(k)) index.set(k, id);
    maxLen = Math.max(maxLen, b.length);
  });
  // what the server builds in the background at start: the free-text token classes and the
  // format automata (timed here; the compile and mask times below come after them)
  const t1 = performance.now();
  lazyJsonTextClass(v).get();
  lazyJsonTextClass(lazyQuoteSplit(v).get().suffixes).get();
  const classesMs = performance.now() - t1;
  const t2 = performance.now();
  for (const rule of Object.values(FORMATS)) rule.patterns.forEach(compileRegex);
  const formatsMs = performance.now() - t2;
  const compileMs: Record<string, number> = {};
  for (const [name, schema] of Object.entries(COMPILE_SET)) {
    const t = performance.now();
    compileSchema(schema);
    compileMs[name] = +(performance.now() - t).toFixed(2);
  }
  return {
    mode: 'grammar', vocab: all.length, walkable_tokens: v.sorted.length, vocab_build_ms: +buildMs.toFixed(1),
    text_classes_build_ms: +classesMs.toFixed(1), format_automata_build_ms: +formatsMs.toFixed(1), compile_ms_first: compileMs,
    plain: maskTimes(v, SCHEMA, DOCS.map((d) => tokenize(d, index, maxLen))),
    rich: maskTimes(v, RICH, RICH_DOCS.map((d) => tokenize(d, index, maxLen))),
    ...(schemas.files.length > 0 ? { schemas: schemaMaskTimes(v, schemas.files, 3, 120, schemas.decodeMs) } : {}),
  };
}

/** Per-token mask times of a schema's documents: cold, warm and uncached (see the top). */
function maskTimes(v: TokenVocab, schema: unknown, docs: number[][]): Record<string, unknown> {
  const start: State = [val(compileSchema(schema), null)];
  const cache = new MaskCache();
  const cold = timeMasks(v, start, docs, cache);
  const warm = timeMasks(v, start, docs, cache);
  const uncached: number[] = [];
  const probe = new GrammarConstraint(v, start, new MaskCache());
  for (const ids of docs) for (let k = 0; k <= ids.length; k += 4) {
    const s = probe.stateAfter(ids.slice(0, k));
    const t = performance.now();
    computeMask(v, s);
    uncached.push(performance.now() - t);
  }
  return { tokens: docs.reduce((n, d) => n + d.length, 0), mask_ms_cold: stats(cold), mask_ms_warm: stats(warm), mask_ms_uncached: stats(uncached) };
}
