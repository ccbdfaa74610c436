// Shows a streamed answer in a terminal or a pipe: the reasoning (inside <think>…</think>)
// dimmed, or on another stream, or hidden; the answer (content) plain. Used by `generate`
// and `chat`, fed with the engine's delta events (reasoning and content already split).
//
// Invariants: every dimmed piece is closed (SGR 22) in the same write, so an answer cut
// short (Ctrl-C, an error) never leaves the terminal dim; the content starts on a line of
// its own after a blank line when reasoning was shown before it on the same stream.

export const DIM = '\x1b[2m';
export const UNDIM = '\x1b[22m';

/** Where text goes: a writable stream's `write`, and whether it is a terminal. */
export interface Sink {
  readonly write: (text: string) => void;
  readonly isTTY: boolean;
}

export interface AnswerViewOptions {
  readonly content: Sink;
  /** Where reasoning goes; null hides it. */
  readonly reasoning: Sink | null;
  /** Dim the reasoning when its sink is a terminal (false under NO_COLOR). */
  readonly color: boolean;
}

/** Colours are off when NO_COLOR is set to anything non-empty (no-color.org). */
export function colorAllowed(env: NodeJS.ProcessEnv = process.env): boolean {
  return !env['NO_COLOR'];
}

export class AnswerView {
  private reasoningShown = false;
  /** Reasoning written since the last newline ends with this character ('' at the start). */
  private reasoningLast = '';
  private contentStarted = false;
  private contentLast = '';

  constructor(private readonly opts: AnswerViewOptions) {}

  /** Feed one delta's parts. */
  push(reasoning: string, content: string): void {
    if (reasoning) this.writeReasoning(reasoning);
    if (content) this.writeContent(content);
  }

  /** End of the answer: the streams end on a newline. */
  end(): void {
    const { reasoning, content } = this.opts;
    if (this.reasoningShown && this.reasoningLast !== '\n' && !(this.contentStarted && reasoning === content)) {
      reasoning!.write('\n');
      this.reasoningLast = '\n';
    }
    if (this.contentStarted && this.contentLast !== '\n') content.write('\n');
  }

  private writeReasoning(text: string): void {
    const sink = this.opts.reasoning;
    if (!sink || this.contentStarted) return;
    // leading blank lines of the block (`<think>\n`) are not shown
    const shown = this.reasoningShown ? text : text.replace(/^\s+/, '');
    if (!shown) return;
    this.reasoningShown = true;
    this.reasoningLast = shown[shown.length - 1]!;
    sink.write(this.opts.color && sink.isTTY ? `${DIM}${shown}${UNDIM}` : shown);
  }

  private writeContent(text: string): void {
    const sink = this.opts.content;
    if (!this.contentStarted) {
      this.contentStarted = true;
      if (this.reasoningShown && this.opts.reasoning === sink) sink.write(this.reasoningLast === '\n' ? '\n' : '\n\n');
      else if (this.reasoningShown && this.reasoningLast !== '\n') {
        this.opts.reasoning!.write('\n');
        this.reasoningLast = '\n';
      }
    }
    this.contentLast = text[text.length - 1]!;
    sink.write(text);
  }
}
