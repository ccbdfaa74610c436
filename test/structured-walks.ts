// Helpers for the mask property tests: a small synthetic vocabulary (every single byte, so
// any text can be spelled and a dead end is the grammar's fault, plus multi-byte tokens cut
// from JSON texts), seeded random schemas over the keywords json-schema-check.ts validates,
// and random walks that compare the cached mask, the uncached one and a per-token reference
// at every step.
import assert from 'node:assert/strict';
import { canEnd, type State, step } from '../src/constrain/matcher.js';
import { computeMask, MaskCache, type TokenVocab, vocabFromBytes } from '../src/constrain/mask.js';
import { Rng } from '../src/util/rng.js';

export const pick = <T>(rng: Rng, xs: readonly T[]): T => xs[Math.floor(rng.next() * xs.length)]!;
const int = (rng: Rng, lo: number, hi: number): number => lo + Math.floor(rng.next() * (hi - lo + 1));

const PUNCT = ['[', ']', '{', '}', ',', ':', '"', '[]', '{}', '[{', '{"', '":', '","', '",', '},', '},{', '"]', '"}', '}]', ']}', '],', '":"',
  '":[', '":{', '":"', 'true', 'false', 'null', '0', '1', '12', '-1', '.5', 'e5', '\\"', '\\n', '\\u00e9', '\\\\', 'é', '日本', ' ', 'xn--'];

/** Every byte alone (partial UTF-8 included), JSON punctuation, and `extra` random cuts of
 * `texts`; the last id is the stop id. */
export function syntheticVocab(texts: readonly string[], extra: number, seed: number): { v: TokenVocab; size: number } {
  const rng = new Rng(seed);
  const seen = new Set<string>();
  const toks: Uint8Array[] = [];
  const add = (b: Uint8Array): void => {
    const k = Buffer.from(b).toString('latin1');
    if (b.length === 0 || seen.has(k)) return;
    seen.add(k);
    toks.push(b);
  };
  for (let b = 0; b < 256; b++) add(Uint8Array.of(b));
  for (const p of PUNCT) add(Buffer.from(p, 'utf8'));
  const bytes = texts.filter((t) => t.length > 1).map((t) => Buffer.from(t, 'utf8'));
  for (let i = 0; i < extra && bytes.length > 0; i++) {
    const t = pick(rng, bytes);
    const at = int(rng, 0, t.length - 1);
    add(t.subarray(at, Math.min(t.length, at + int(rng, 2, 8))));
  }
  const stop = toks.length;
  return { v: vocabFromBytes([...toks, null], [stop]), size: stop + 1 };
}

/** Reference: each token stepped on its own from the state, no sharing, no cache. */
export function referenceMask(v: TokenVocab, state: State, size: number): Uint32Array {
  const mask = new Uint32Array(v.words);
  const set = (id: number): void => void (mask[id >>> 5]! |= 1 << (id & 31));
  if (state.some(canEnd)) v.stopIds.forEach(set);
  for (let id = 0; id < size; id++) {
    const bytes = v.bytesOf[id];
    if (!bytes) continue;
    let s = state;
    for (const b of bytes) {
      s = step(s, b);
      if (s.length === 0) break;
    }
    if (s.length > 0) set(id);
  }
  return mask;
}

const idsOf = (mask: Uint32Array): number[] => {
  const out: number[] = [];
  mask.forEach((w, i) => {
    for (let b = 0; b < 32; b++) if ((w >>> b) & 1) out.push(i * 32 + b);
  });
  return out;
};

export interface WalkStats {
  steps: number;
  references: number;
  finished: string[];
  unsatisfiable: boolean;
  /** Walks that reached a state with no allowed token that cannot end (where and after what). */
  deadEnds: string[];
}

/** Random walks from `start`, following allowed tokens: at every step the cached mask (one
 * cache across the walks, so states that share a key meet) must equal the uncached one, and
 * every `refEvery`th step the per-token reference. Returns the texts of walks that ended with
 * the stop id, and the dead ends met (a state with no allowed id that cannot end). */
export function compareWalks(v: TokenVocab, size: number, start: State, o: { seed: number; walks: number; maxTokens: number; refEvery: number; label: string },
  cache = new MaskCache(4096)): WalkStats {
  const rng = new Rng(o.seed);
  const stop = v.stopIds[0]!;
  const stats: WalkStats = { steps: 0, references: 0, finished: [], unsatisfiable: false, deadEnds: [] };
  for (let w = 0; w < o.walks; w++) {
    let st = start;
    const text: number[] = [];
    for (let t = 0; t < o.maxTokens; t++) {
      const plain = computeMask(v, st);
      const where = `${o.label}: walk ${w} after ${JSON.stringify(Buffer.from(text).toString('utf8'))}`;
      assert.deepEqual(cache.get(v, st), plain, `${where}: cached mask differs from the uncached one`);
      if (stats.steps++ % o.refEvery === 0) {
        stats.references++;
        assert.deepEqual(plain, referenceMask(v, st, size), `${where}: the mask differs from the per-token reference`);
      }
      const ids = idsOf(plain);
      // a schema no value satisfies (e.g. allOf with false) has no way in: not a walk
      if (t === 0 && ids.length === 0) {
        stats.unsatisfiable = true;
        return stats;
      }
      if (ids.length === 0) {
        stats.deadEnds.push(where);
        break;
      }
      const ending = ids.includes(stop);
      const others = ids.filter((id) => id !== stop);
      // end more often as the walk grows, so that many walks complete
      if (ending && (others.length === 0 || rng.next() < 0.1 + t / o.maxTokens)) {
        stats.finished.push(Buffer.from(text).toString('utf8'));
        break;
      }
      const id = pick(rng, others);
      for (const b of v.bytesOf[id]!) st = step(st, b);
      text.push(...v.bytesOf[id]!);
    }
  }
  return stats;
}

// --- random schemas ----------------------------------------------------------------------

const NAMES = ['a', 'b', 'ab', 'x', 'name', 'id', 'é', 'a b'];
const PATTERNS = ['^[a-f0-9]{4}$', '^x', '^[a-z]+$', 'b$', '^\\d{1,3}(\\.\\d)?$', '^(ab|cd)*$'];

/** A random schema over the keywords the test validator checks (nesting ≤ depth). */
export function randomSchema(rng: Rng, depth: number): Record<string, unknown> {
  const kinds = depth > 0 ? ['object', 'array', 'array', 'string', 'number', 'enum', 'anyOf', 'const', 'bool'] : ['string', 'number', 'enum', 'const', 'bool'];
  switch (pick(rng, kinds)) {
    case 'object': return randomObject(rng, depth);
    case 'array': return randomArray(rng, depth);
    case 'string': return randomString(rng);
    case 'number': return randomNumber(rng);
    case 'enum': return { enum: [1, 'a', null, 'xy', 2.5].filter(() => rng.next() < 0.6).concat(['z']) };
    case 'const': return { const: pick(rng, ['k', 7, true, null, 'é"']) };
    case 'anyOf': return { anyOf: Array.from({ length: int(rng, 2, 3) }, () => randomSchema(rng, depth - 1)) };
    default: return { type: pick(rng, ['boolean', 'null']) };
  }
}

function randomObject(rng: Rng, depth: number): Record<string, unknown> {
  const names = NAMES.filter(() => rng.next() < 0.4);
  const s: Record<string, unknown> = { type: 'object', properties: Object.fromEntries(names.map((n) => [n, randomSchema(rng, depth - 1)])) };
  const required = names.filter(() => rng.next() < 0.5);
  if (required.length > 0) s['required'] = required;
  const extra = rng.next();
  if (extra < 0.4) s['additionalProperties'] = false;
  else if (extra < 0.6) s['additionalProperties'] = randomSchema(rng, 0);
  if (rng.next() < 0.15) s['patternProperties'] = { [pick(rng, ['^x', '^[0-9]+$'])]: randomSchema(rng, 0) };
  if (rng.next() < 0.15) s['propertyNames'] = { maxLength: int(rng, 1, 4), ...(rng.next() < 0.5 ? { minLength: 1 } : {}) };
  if (rng.next() < 0.15) s['maxProperties'] = int(rng, 1, 3);
  if (rng.next() < 0.1) s['minProperties'] = 1;
  return s;
}

function randomArray(rng: Rng, depth: number): Record<string, unknown> {
  const s: Record<string, unknown> = { type: 'array' };
  if (rng.next() < 0.25) s['prefixItems'] = Array.from({ length: int(rng, 1, 2) }, () => randomSchema(rng, depth - 1));
  const items = rng.next();
  if (items < 0.3) s['items'] = { type: 'object' };
  else if (items < 0.9) s['items'] = randomSchema(rng, depth - 1);
  else if (s['prefixItems']) s['items'] = false;
  const min = rng.next() < 0.3 ? int(rng, 0, 2) : null;
  if (min !== null) s['minItems'] = min;
  if (rng.next() < 0.3) s['maxItems'] = int(rng, min ?? 0, 4);
  return s;
}

function randomString(rng: Rng): Record<string, unknown> {
  const s: Record<string, unknown> = { type: 'string' };
  const min = rng.next() < 0.3 ? int(rng, 0, 3) : null;
  if (min !== null) s['minLength'] = min;
  if (rng.next() < 0.4) s['maxLength'] = int(rng, Math.max(min ?? 0, 1), 6);
  if (rng.next() < 0.35) s['pattern'] = pick(rng, PATTERNS);
  return s;
}

function randomNumber(rng: Rng): Record<string, unknown> {
  const s: Record<string, unknown> = { type: pick(rng, ['integer', 'number']) };
  if (rng.next() < 0.4) s['minimum'] = int(rng, -5, 5);
  if (rng.next() < 0.4) s['maximum'] = int(rng, 5, 200);
  if (rng.next() < 0.15) s['exclusiveMinimum'] = -1;
  if (s['type'] === 'integer' && rng.next() < 0.15) s['multipleOf'] = int(rng, 2, 5);
  return s;
}
