// Log-probabilities for `logprobs` / `top_logprobs`: the engine computes them on the
// kernels from the same pass as sampling (log-softmax of the raw logits over the sampleable
// vocabulary: the model's raw distribution, before temperature, penalties and truncation,
// as in vLLM) and hands one entry per emitted token, in order, to `push`; `take` pairs them
// with the ids of each delta.
import type { TextTokenizer } from '../../tokenizer/tokenizer.js';
import type { TokenLogprob as EngineTokenLogprob } from '../../engine/sample-batch.js';

export interface TopEntry {
  readonly id: number;
  readonly logprob: number;
}

export interface TokenLogprob {
  readonly id: number;
  readonly logprob: number;
  readonly top: readonly TopEntry[];
}

/** Collects one request's logprobs: `push` is the engine hook, `take` pairs them with
 * the ids of each delta (ids in `skip`, i.e. stop tokens, are consumed but not reported). */
export class LogprobCollector {
  private readonly pending: EngineTokenLogprob[] = [];

  constructor(
    /** top_logprobs count asked of the engine. */
    readonly top: number,
    private readonly skip: ReadonlySet<number>,
  ) {}

  readonly push = (e: EngineTokenLogprob): void => {
    this.pending.push(e);
  };

  take(ids: readonly number[]): TokenLogprob[] {
    const out: TokenLogprob[] = [];
    for (const id of ids) {
      const c = this.pending.shift();
      if (!c || this.skip.has(id)) continue;
      out.push({ id, logprob: c.logprob, top: c.top });
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
