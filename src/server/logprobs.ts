// Log-probabilities for `logprobs` / `top_logprobs`: the engine's captureLogits hook hands
// over the raw logits of every sampled position, in order; each is reduced to a log-softmax
// over the sampleable vocabulary when its token arrives in a delta. Logprobs are those of
// the model's raw distribution (before temperature, penalties and truncation), as in vLLM.
import type { TextTokenizer } from '../tokenizer/tokenizer.js';

export interface TopEntry {
  readonly id: number;
  readonly logprob: number;
}

export interface TokenLogprob {
  readonly id: number;
  readonly logprob: number;
  readonly top: readonly TopEntry[];
}

interface Captured {
  readonly logits: Float32Array;
  readonly lse: number;
}

/** log Σ exp(logits[0..vocab)), in float64. */
export function logSumExp(logits: Float32Array, vocab: number): number {
  let max = -Infinity;
  for (let i = 0; i < vocab; i++) if (logits[i]! > max) max = logits[i]!;
  if (max === -Infinity) return -Infinity;
  let sum = 0;
  for (let i = 0; i < vocab; i++) sum += Math.exp(logits[i]! - max);
  return max + Math.log(sum);
}

/** The k largest logits (ids, descending value; ties by lower id). */
export function topK(logits: Float32Array, vocab: number, k: number): number[] {
  if (k <= 0) return [];
  const ids: number[] = [];
  for (let i = 0; i < vocab; i++) {
    const v = logits[i]!;
    if (ids.length === k && !(v > logits[ids[k - 1]!]!)) continue;
    if (ids.length < k) ids.push(i);
    else ids[k - 1] = i;
    for (let j = ids.length - 1; j > 0 && logits[ids[j - 1]!]! < v; j--) {
      ids[j] = ids[j - 1]!;
      ids[j - 1] = i;
    }
  }
  return ids;
}

/** Collects one request's logprobs: `capture` is the engine hook, `take` pairs them with
 * the ids of each delta (ids in `skip`, i.e. stop tokens, are consumed but not reported). */
export class LogprobCollector {
  private readonly pending: Captured[] = [];

  constructor(
    private readonly vocab: number,
    private readonly k: number,
    private readonly skip: ReadonlySet<number>,
  ) {}

  readonly capture = (logits: Float32Array): void => {
    const copy = logits.slice(0, this.vocab);
    this.pending.push({ logits: copy, lse: logSumExp(copy, this.vocab) });
  };

  take(ids: readonly number[]): TokenLogprob[] {
    const out: TokenLogprob[] = [];
    for (const id of ids) {
      const c = this.pending.shift();
      if (!c || this.skip.has(id)) continue;
      const lp = (x: number): number => Math.max(c.logits[x]! - c.lse, -9999);
      out.push({ id, logprob: lp(id), top: topK(c.logits, this.vocab, this.k).map((t) => ({ id: t, logprob: lp(t) })) });
    }
    return out;
  }
}

/** GPT-2 byte-level alphabet, reversed: vocabulary character → byte. */
const BYTE_OF_CHAR: ReadonlyMap<number, number> = (() => {
  const m = new Map<number, number>();
  let extra = 0;
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    m.set(printable ? b : 256 + extra++, b);
  }
  return m;
})();

/** Text and UTF-8 bytes of single tokens (cached). A token holding part of a multi-byte
 * character has text with U+FFFD but exact bytes (from the byte-level vocabulary). */
export class TokenTexts {
  private readonly cache = new Map<number, { text: string; bytes: number[] }>();
  constructor(private readonly tok: TextTokenizer) {}

  get(id: number): { text: string; bytes: number[] } {
    let e = this.cache.get(id);
    if (e) return e;
    const text = this.tok.decode([id]);
    const piece = this.tok.idToToken(id);
    let bytes: number[] | null = null;
    if (piece !== undefined && !this.tok.specialIds.has(id)) {
      bytes = [];
      for (const ch of piece) {
        const b = BYTE_OF_CHAR.get(ch.codePointAt(0)!);
        if (b === undefined) {
          bytes = null;
          break;
        }
        bytes.push(b);
      }
    }
    e = { text, bytes: bytes ?? [...Buffer.from(text, 'utf8')] };
    if (this.cache.size > 65536) this.cache.clear();
    this.cache.set(id, e);
    return e;
  }
}

/** Chat format: `choices[].logprobs.content`. */
export function chatLogprobs(entries: readonly TokenLogprob[], texts: TokenTexts): unknown[] {
  return entries.map((e) => {
    const t = texts.get(e.id);
    return {
      token: t.text, logprob: e.logprob, bytes: t.bytes,
      top_logprobs: e.top.map((x) => {
        const u = texts.get(x.id);
        return { token: u.text, logprob: x.logprob, bytes: u.bytes };
      }),
    };
  });
}

export interface CompletionLogprobs {
  tokens: string[];
  token_logprobs: (number | null)[];
  top_logprobs: (Record<string, number> | null)[];
  text_offset: number[];
}

/** Legacy completions format; `offset` is where the tokens' text starts in the choice text.
 * Prompt tokens (echo) are given with null logprobs. */
export function completionLogprobs(entries: readonly TokenLogprob[], texts: TokenTexts, offset: number,
  promptIds: readonly number[] = []): CompletionLogprobs {
  const out: CompletionLogprobs = { tokens: [], token_logprobs: [], top_logprobs: [], text_offset: [] };
  let pos = offset;
  for (const id of promptIds) {
    const t = texts.get(id).text;
    out.tokens.push(t);
    out.token_logprobs.push(null);
    out.top_logprobs.push(null);
    out.text_offset.push(pos);
    pos += t.length;
  }
  for (const e of entries) {
    const t = texts.get(e.id).text;
    out.tokens.push(t);
    out.token_logprobs.push(e.logprob);
    const top: Record<string, number> = {};
    for (const x of e.top) {
      const k = texts.get(x.id).text;
      if (!(k in top)) top[k] = x.logprob;
    }
    out.top_logprobs.push(top);
    out.text_offset.push(pos);
    pos += t.length;
  }
  return out;
}
