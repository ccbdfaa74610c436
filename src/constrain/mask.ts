// Token masks from a byte-level matcher state: the vocabulary's token bytes sorted, so tokens
// sharing a prefix share the matcher steps over it (a trie walk without building the trie),
// and a dead prefix skips every token below it. Masks are cached by state key: inside a long
// string or number the same key repeats, so most steps cost one map lookup.
// A grammar's per-sequence matcher over these masks is grammar-matcher.ts.
import { freeTextMask } from './free-text.js';
import { splitWalk } from './quote-split.js';
import { canEnd, expand, KEY_CAP, type Stack, stackKey, type State, stateKey } from './matcher.js';
import { finish, Lazy, sortSteps, type Steps } from './steps.js';
import { type TokenList, tokenListSteps, type TokenVocab, walk } from './walk.js';

export { stateKey, type TokenList, type TokenVocab, walk };

/** What the vocabulary build reads of a tokenizer: which ids are special (never text). */
export interface VocabTokenizer {
  readonly specialIds: ReadonlySet<number>;
}

/** Each id's bytes as the model spells it (the server's TokenTexts is one). */
export interface TokenBytes {
  get(id: number): { readonly bytes: readonly number[] };
}

const vocabs = new WeakMap<VocabTokenizer, Map<string, Lazy<TokenVocab>>>();

function compareBytes(a: Uint8Array, b: Uint8Array): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return a[i]! - b[i]!;
  return a.length - b.length;
}

/** The walkable vocabulary of ids [0, vocab): special and stop ids are never part of the text. */
export function tokenVocab(tok: VocabTokenizer, texts: TokenBytes, vocab: number, stopIds: readonly number[]): TokenVocab {
  return lazyTokenVocab(tok, texts, vocab, stopIds).get();
}

/** The same, as a build that may still be in progress (the warm-up advances it). */
export function lazyTokenVocab(tok: VocabTokenizer, texts: TokenBytes, vocab: number, stopIds: readonly number[]): Lazy<TokenVocab> {
  let byVocab = vocabs.get(tok);
  if (!byVocab) vocabs.set(tok, (byVocab = new Map()));
  const key = `${vocab}:${stopIds.join(',')}`;
  let lazy = byVocab.get(key);
  if (!lazy) byVocab.set(key, (lazy = new Lazy(() => tokenVocabSteps(tok, texts, vocab, stopIds))));
  return lazy;
}

function* tokenVocabSteps(tok: VocabTokenizer, texts: TokenBytes, vocab: number, stopIds: readonly number[]): Steps<TokenVocab> {
  const stops = new Set(stopIds);
  const bytesOf: (Uint8Array | null)[] = Array.from({ length: vocab }, () => null);
  for (let id = 0; id < vocab; id++) {
    if (id % 1024 === 0) yield;
    if (stops.has(id) || tok.specialIds.has(id)) continue;
    bytesOf[id] = Uint8Array.from(texts.get(id).bytes);
  }
  return yield* vocabSteps(bytesOf, stopIds);
}

/** A TokenVocab from each id's bytes (null = never generated as text, e.g. special ids). */
export function vocabFromBytes(bytes: readonly (Uint8Array | null)[], stopIds: readonly number[]): TokenVocab {
  return finish(vocabSteps(bytes, stopIds));
}

/** The same, as a build in steps. */
export function lazyVocabFromBytes(bytes: readonly (Uint8Array | null)[], stopIds: readonly number[]): Lazy<TokenVocab> {
  return new Lazy(() => vocabSteps(bytes, stopIds));
}

function* vocabSteps(bytes: readonly (Uint8Array | null)[], stopIds: readonly number[]): Steps<TokenVocab> {
  const vocab = bytes.length;
  const bytesOf = bytes.map((b) => (b && b.length > 0 && b.length <= KEY_CAP ? b : null));
  const order: number[] = [];
  for (let id = 0; id < vocab; id++) if (bytesOf[id]) order.push(id);
  yield* sortSteps(order, (a, b) => compareBytes(bytesOf[a]!, bytesOf[b]!) || a - b);
  const list = yield* tokenListSteps(order.map((id) => bytesOf[id]!), Int32Array.from(order));
  const words = Math.ceil(vocab / 32);
  const allButStop = new Uint32Array(words);
  for (const id of order) allButStop[id >>> 5]! |= 1 << (id & 31);
  return { ...list, words, stopIds: stopIds.filter((s) => s < vocab), allButStop, bytesOf };
}

/** Ids allowed after `state`: every token whose bytes the matcher accepts, plus the stop ids
 * when it can end. Inside free text (a JSON string, an XML parameter) the tokens that cannot
 * leave it come from a precomputed set and only the others are walked (see free-text.ts). */
export function computeMask(v: TokenVocab, state: State): Uint32Array {
  const mask = new Uint32Array(v.words);
  if (state.some((s) => canEnd(s))) for (const id of v.stopIds) mask[id >>> 5]! |= 1 << (id & 31);
  if (!freeTextMask(v, state, mask)) splitWalk(v, state, mask);
  return mask;
}

/** The stacks of a state, each alternative of a value about to start on its own (the stacks a
 * first byte would expand it into), without duplicates. The matcher steps every stack on its
 * own, so a state's mask is the union of its stacks' masks. */
export function alternatives(state: State): State {
  if (state.length === 1 && state[0]?.f.t !== 'val') return state;
  const out: (Stack | null)[] = [];
  const seen = new Set<string>();
  for (const st of state) {
    for (const alt of st !== null && st.f.t === 'val' ? expand(st.f.s, st.next) : [st]) {
      const k = stackKey(alt, Infinity);
      if (seen.has(k)) continue;
      seen.add(k);
      out.push(alt);
    }
  }
  return out;
}

/** Masks by vocabulary and stack key (per compiled grammar: keys name its schema nodes), least
 * recently used out. A key names everything the next mask depends on (state-key.ts), up to
 * the vocabulary's longest token. A state of several stacks (a union whose alternatives are
 * all still open) takes the union of its stacks' masks: each stack's is cached on its own, so
 * the alternatives' fast paths apply and a stack met in another combination hits. */
export class MaskCache {
  private readonly map = new Map<string, Uint32Array>();
  private readonly vocabIds = new WeakMap<TokenVocab, number>();
  private lastVocabId = 0;
  /** At most `cap` masks and `maxBytes` of them (a 248K vocabulary's mask is 31 KB: 1K masks,
   * room for a union's alternatives over a few hundred states). */
  constructor(private readonly cap = 4096, private readonly maxBytes = 32 << 20) {}

  get(v: TokenVocab, state: State): Uint32Array {
    const stacks = alternatives(state);
    if (stacks.length === 1) return this.stack(v, stacks[0]!);
    const out = new Uint32Array(v.words);
    for (const st of stacks) {
      const m = this.stack(v, st);
      for (let i = 0; i < out.length; i++) out[i] = out[i]! | m[i]!;
    }
    return out;
  }

  private stack(v: TokenVocab, st: Stack | null): Uint32Array {
    let vid = this.vocabIds.get(v);
    if (vid === undefined) this.vocabIds.set(v, (vid = ++this.lastVocabId));
    const key = `${vid}@${stackKey(st, v.maxLen)}`;
    let m = this.map.get(key);
    if (m) {
      this.map.delete(key);
      this.map.set(key, m);
      return m;
    }
    m = computeMask(v, [st]);
    if (this.map.size >= Math.min(this.cap, Math.max(16, Math.floor(this.maxBytes / m.byteLength)))) this.map.delete(this.map.keys().next().value!);
    this.map.set(key, m);
    return m;
  }
}
