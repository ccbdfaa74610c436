// Turns a request's generated ids into streamed text: incremental detokenization, stop
// ids (their text is not emitted) and stop strings (text cut right before the match;
// text that could still become a stop string is held back until it cannot).
import { IncrementalDetokenizer, type DecodeFn } from '../tokenizer/detokenizer.js';

export type FinishReason = 'stop' | 'length' | 'abort' | 'error';

export interface OutputStep {
  /** New text safe to show (never a broken UTF-8 sequence, never part of a stop string). */
  readonly text: string;
  /** Set when this token ends generation by eos id or stop string. */
  readonly stopped: boolean;
}

export class OutputText {
  private readonly detok: IncrementalDetokenizer;
  private pending = ''; // decoded but held back (could start a stop string)
  private full = ''; // everything emitted so far
  private done = false;
  private readonly maxStopLen: number;

  constructor(
    decode: DecodeFn,
    promptIds: readonly number[],
    private readonly stopIds: ReadonlySet<number>,
    private readonly stopStrings: readonly string[],
  ) {
    this.detok = new IncrementalDetokenizer(decode, promptIds);
    this.maxStopLen = stopStrings.reduce((m, s) => Math.max(m, s.length), 0);
  }

  get text(): string {
    return this.full;
  }

  /** Does `id` end generation by itself (an eos / stop id)? */
  isStopId(id: number): boolean {
    return this.stopIds.has(id);
  }

  /** Feed one generated id. */
  push(id: number): OutputStep {
    if (this.done) return { text: '', stopped: true };
    if (this.stopIds.has(id)) return this.finish(this.pending + this.detok.flush(), true);
    this.pending += this.detok.push(id);
    const hit = this.findStop(this.pending);
    if (hit >= 0) return this.finish(this.pending.slice(0, hit), true);
    // keep back the longest tail that is a prefix of some stop string
    const keep = this.heldTail(this.pending);
    const out = this.pending.slice(0, this.pending.length - keep);
    this.pending = this.pending.slice(this.pending.length - keep);
    this.full += out;
    return { text: out, stopped: false };
  }

  /** Generation ended for another reason (length, abort): release what was held. */
  flush(): string {
    if (this.done) return '';
    return this.finish(this.pending + this.detok.flush(), false).text;
  }

  private finish(text: string, stopped: boolean): OutputStep {
    let out = text;
    const hit = this.findStop(out);
    if (hit >= 0) {
      out = out.slice(0, hit);
      stopped = true;
    }
    this.done = true;
    this.pending = '';
    this.full += out;
    return { text: out, stopped };
  }

  /** Index in `s` of the earliest stop-string match, considering matches that span the
   * already-emitted text only through `s` itself (held-back text guarantees that). */
  private findStop(s: string): number {
    let best = -1;
    for (const stop of this.stopStrings) {
      if (stop.length === 0) continue;
      const i = s.indexOf(stop);
      if (i >= 0 && (best < 0 || i < best)) best = i;
    }
    return best;
  }

  private heldTail(s: string): number {
    if (this.maxStopLen === 0) return 0;
    for (let len = Math.min(this.maxStopLen - 1, s.length); len > 0; len--) {
      const tail = s.slice(s.length - len);
      if (this.stopStrings.some((st) => st.startsWith(tail))) return len;
    }
    return 0;
  }
}
