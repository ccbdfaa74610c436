// IncrementalDetokenizer: turns generated ids into text deltas, one id at a time, without ever
// emitting half of a UTF-8 character.
//
// Byte-level BPE tokens can split a multi-byte character; decoding such a prefix ends in U+FFFD.
// UTF-8 decoding with replacement is streaming: decode(bytes) = S(bytes) + (one U+FFFD if the bytes
// end inside an unfinished character), where S only grows as bytes are appended. So every char
// of a decoded text except a trailing U+FFFD is final; trailing U+FFFDs are held back, and
// every delta is a prefix-extension of the text emitted before: emitted ⊑ decode(all ids).
//
// Window invariants (prefix/read offsets):
// - win[0] starts at a sync point: the decoder is not inside a character there (or, for the
//   prompt context, win decodes cleanly at readIdx), so decode(win) equals the suffix of the
//   full decode from that point.
// - win[0:readIdx] is the previous clean chunk, kept as context (readIdx is also a sync point);
//   its text has length readLen and was emitted (or belongs to the prompt).
// - `emitted` code units of decode(win) have been returned by push().
// - Each push decodes only the window, so its cost is O(window), not O(total ids).
import type { TextTokenizer } from './tokenizer.js';

export type DecodeFn = (ids: readonly number[]) => string;

const REPLACEMENT = '\uFFFD';
/** Prompt ids kept as decoding context. */
const MAX_CONTEXT = 8;
/**
 * Ids held without ever reaching a clean end before the window restarts empty. Real text
 * reaches a character boundary within a few ids; only a stream of invalid bytes gets here, and
 * then the trailing U+FFFD is emitted as it stands (the one case where a delta may end in one).
 */
const MAX_HOLD = 64;

/** Length of `text` without its trailing run of U+FFFD. */
function withoutTrailingReplacements(text: string): number {
  let n = text.length;
  while (n > 0 && text.charCodeAt(n - 1) === 0xfffd) n--;
  return n;
}

export class IncrementalDetokenizer {
  private readonly decodeFn: DecodeFn;
  private win: number[];
  private readIdx: number;
  private readLen: number;
  private emitted: number;
  /** decode(win) as of the last push (or the context). */
  private text: string;

  /**
   * @param source the tokenizer (or a decode function that keeps special tokens)
   * @param contextIds the prompt's ids (only the last few are used), so the first generated ids
   *   decode in context. Context ids whose text ends in an unfinished character are dropped.
   */
  constructor(source: TextTokenizer | DecodeFn, contextIds: readonly number[] = []) {
    this.decodeFn = typeof source === 'function' ? source : (ids) => source.decode(ids);
    let ctx = contextIds.slice(-MAX_CONTEXT);
    let text = this.decode(ctx);
    while (ctx.length > 0 && text.endsWith(REPLACEMENT)) {
      ctx = ctx.slice(0, -1);
      text = this.decode(ctx);
    }
    this.win = ctx;
    this.readIdx = ctx.length;
    this.readLen = text.length;
    this.emitted = text.length;
    this.text = text;
  }

  /** Add one generated id; returns the text it completes ('' while a character is unfinished). */
  push(id: number): string {
    this.win.push(id);
    const text = this.decode(this.win);
    this.text = text;
    const forced = this.win.length - this.readIdx > MAX_HOLD;
    const clean = forced || !text.endsWith(REPLACEMENT);
    // Everything but a trailing U+FFFD is final (see the file comment); the whole trailing run
    // of U+FFFD is held so that no delta ever ends in one.
    const stable = clean ? text.length : withoutTrailingReplacements(text);
    let delta = '';
    if (stable > this.emitted) {
      delta = text.slice(this.emitted, stable);
      this.emitted = stable;
    }
    if (forced) this.restart();
    else if (clean) this.advance(text);
    return delta;
  }

  /** The held-back remainder (may contain U+FFFD); the detokenizer is then empty again. */
  flush(): string {
    const rest = this.text.slice(this.emitted);
    this.restart();
    return rest;
  }

  /** Start over with an empty window (everything so far has been emitted). */
  private restart(): void {
    this.win = [];
    this.readIdx = 0;
    this.readLen = 0;
    this.emitted = 0;
    this.text = '';
  }

  /** The end of the window is a sync point: the last chunk becomes the context of the next one. */
  private advance(text: string): void {
    this.win = this.win.slice(this.readIdx);
    this.readLen = text.length - this.readLen;
    this.readIdx = this.win.length;
    this.emitted = this.readLen;
    this.text = text.slice(text.length - this.readLen);
  }

  private decode(ids: readonly number[]): string {
    return ids.length === 0 ? '' : this.decodeFn(ids);
  }
}
