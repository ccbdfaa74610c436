// Reasoning parser: split generated text into `reasoning` (inside <think>…</think>) and `content`
// (after it), both streaming (ReasoningSplitter) and at once (splitReasoning).
//
// Rules (identical for both forms; the tests check streaming == at-once for every split point):
// - startsInReasoning (the prompt ended with `<think>\n`): the text starts inside the block.
//   Otherwise the block is entered only when the text starts with `<think>` exactly; if it does
//   not, everything is content and there is no reasoning (null).
// - The block ends at the first `</think>`; leading whitespace of the content after it is dropped.
//   Without `</think>` (output cut short) everything after the start is reasoning.
// - Nothing else is changed: reasoning keeps its newlines; later tags in content stay as text.

export const THINK_OPEN = '<think>';
export const THINK_CLOSE = '</think>';
const LEADING_WS = /^\s+/;

export interface ReasoningDelta {
  reasoning: string;
  content: string;
}

type State = 'start' | 'reasoning' | 'afterClose' | 'content';

/** Length of the longest suffix of `s` that is a proper prefix of `tag`. */
function partialTagLength(s: string, tag: string): number {
  for (let n = Math.min(s.length, tag.length - 1); n > 0; n--) {
    if (s.endsWith(tag.slice(0, n))) return n;
  }
  return 0;
}

export class ReasoningSplitter {
  private state: State;
  /** Text not yet classified: a possible partial tag (`<thi`, `</th`). */
  private buf = '';
  private entered: boolean;

  constructor(startsInReasoning: boolean) {
    this.state = startsInReasoning ? 'reasoning' : 'start';
    this.entered = startsInReasoning;
  }

  /** True once the text is known to contain a reasoning block (reasoning is then non-null). */
  get hasReasoning(): boolean {
    return this.entered;
  }

  push(delta: string): ReasoningDelta {
    const out: ReasoningDelta = { reasoning: '', content: '' };
    this.buf += delta;
    this.step(out);
    return out;
  }

  /** Release held-back text (a partial tag is then just text). */
  flush(): ReasoningDelta {
    const out: ReasoningDelta = { reasoning: '', content: '' };
    this.step(out);
    if (this.state === 'reasoning') out.reasoning += this.buf;
    else if (this.state === 'start' || this.state === 'content') out.content += this.buf;
    this.buf = '';
    if (this.state === 'start') this.state = 'content';
    return out;
  }

  /** Consume as much of buf as can be classified now. */
  private step(out: ReasoningDelta): void {
    for (;;) {
      switch (this.state) {
        case 'start':
          if (this.buf.startsWith(THINK_OPEN)) {
            this.buf = this.buf.slice(THINK_OPEN.length);
            this.state = 'reasoning';
            this.entered = true;
            continue;
          }
          if (THINK_OPEN.startsWith(this.buf)) return; // could still become `<think>`
          this.state = 'content';
          continue;
        case 'reasoning': {
          const i = this.buf.indexOf(THINK_CLOSE);
          if (i >= 0) {
            out.reasoning += this.buf.slice(0, i);
            this.buf = this.buf.slice(i + THINK_CLOSE.length);
            this.state = 'afterClose';
            continue;
          }
          const keep = partialTagLength(this.buf, THINK_CLOSE);
          out.reasoning += this.buf.slice(0, this.buf.length - keep);
          this.buf = this.buf.slice(this.buf.length - keep);
          return;
        }
        case 'afterClose':
          this.buf = this.buf.replace(LEADING_WS, '');
          if (this.buf.length === 0) return;
          this.state = 'content';
          continue;
        case 'content':
          out.content += this.buf;
          this.buf = '';
          return;
      }
    }
  }
}

/** The generated text starts inside a reasoning block when the prompt's text ends with
 * `<think>` (and whitespace): a chat template's generation prompt with thinking on.
 * `decodeTail` is the decoded text of the prompt's last few tokens. */
export function promptOpensThinking(decodeTail: string): boolean {
  return decodeTail.trimEnd().endsWith(THINK_OPEN);
}

/** At-once form of ReasoningSplitter; reasoning is null when the text has no reasoning block. */
export function splitReasoning(text: string, startsInReasoning: boolean): { reasoning: string | null; content: string } {
  let body: string;
  if (startsInReasoning) body = text;
  else if (text.startsWith(THINK_OPEN)) body = text.slice(THINK_OPEN.length);
  else return { reasoning: null, content: text };
  const i = body.indexOf(THINK_CLOSE);
  if (i < 0) return { reasoning: body, content: '' };
  return { reasoning: body.slice(0, i), content: body.slice(i + THINK_CLOSE.length).replace(LEADING_WS, '') };
}

/** The final answer of a generated text: after the last `</think>`, stop markers removed, trimmed. */
export function extractFinalAnswer(text: string): string {
  const i = text.lastIndexOf(THINK_CLOSE);
  const tail = i >= 0 ? text.slice(i + THINK_CLOSE.length) : text;
  return tail.split('<|im_end|>').join('').split('<|endoftext|>').join('').trim();
}
