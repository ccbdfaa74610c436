// An answer's parts as a sequence of output blocks — the shape the Responses API (output
// items) and the Messages API (content blocks) stream: a reasoning block, a text block, one
// block per tool call, each opened, filled by deltas and closed, in order. Consecutive parts
// of the same kind extend the open block; a different kind closes it first. A call streamed
// incrementally opens at its start, grows by its argument fragments and closes at its end.
import type { GenerateEvent } from '../../engine/request.js';
import { type AnswerPart, AnswerStream } from './answer.js';
import type { Choice } from './choices.js';
import type { Turn } from './turn.js';

export type BlockKind = 'reasoning' | 'text' | 'tool_call';

export interface Block {
  readonly index: number;
  readonly kind: BlockKind;
  text: string;
  /** tool_call blocks: the call; its arguments grow as they stream (AnswerStream's
   * incremental mode) or arrive in full. */
  readonly call?: { readonly id: string; readonly name: string; arguments: string };
  /** A streamed call that turned out malformed, or any block the generation ended inside
   * (max tokens, abort): its content is what was sent, not a whole item. */
  failed?: boolean;
}

export type BlockEvent =
  | { readonly type: 'open'; readonly block: Block }
  | { readonly type: 'delta'; readonly block: Block; readonly text: string }
  | { readonly type: 'close'; readonly block: Block };

export class BlockTracker {
  private open: Block | null = null;
  readonly blocks: Block[] = [];

  push(parts: readonly AnswerPart[]): BlockEvent[] {
    const out: BlockEvent[] = [];
    for (const p of parts) {
      const streamed = this.open?.kind === 'tool_call' && 'id' in p && this.open.call!.id === p.id ? this.open : null;
      if (p.type === 'tool_call_start') {
        this.close(out);
        this.start('tool_call', out, { id: p.id, name: p.name, arguments: '' });
        continue;
      }
      if (p.type === 'tool_call_delta' || p.type === 'tool_call_fail') {
        if (!streamed) continue; // a fragment of no open call: nothing to attach it to
        if (p.type === 'tool_call_delta') {
          streamed.text += p.text;
          streamed.call!.arguments = streamed.text;
          out.push({ type: 'delta', block: streamed, text: p.text });
        } else {
          streamed.failed = true;
          this.close(out);
        }
        continue;
      }
      if (p.type === 'tool_call') {
        if (streamed) {
          streamed.call!.arguments = p.call.arguments;
          this.close(out);
          continue;
        }
        this.close(out);
        const b = this.start('tool_call', out, { id: p.id, ...p.call });
        out.push({ type: 'delta', block: b, text: p.call.arguments });
        b.text = p.call.arguments;
        this.close(out);
        continue;
      }
      const kind: BlockKind = p.type === 'reasoning' ? 'reasoning' : 'text';
      if (this.open?.kind !== kind) {
        this.close(out);
        this.start(kind, out);
      }
      this.open!.text += p.text;
      out.push({ type: 'delta', block: this.open!, text: p.text });
    }
    return out;
  }

  /** Close the open block (end of the answer); `cut`: the generation stopped inside it
   * (max tokens, abort), so it is marked failed. */
  finish(cut = false): BlockEvent[] {
    const out: BlockEvent[] = [];
    if (cut && this.open) this.open.failed = true;
    this.close(out);
    return out;
  }

  private start(kind: BlockKind, out: BlockEvent[], call?: Block['call']): Block {
    const b: Block = { index: this.blocks.length, kind, text: '', ...(call ? { call } : {}) };
    this.blocks.push(b);
    this.open = b;
    out.push({ type: 'open', block: b });
    return b;
  }

  private close(out: BlockEvent[]): void {
    if (this.open) out.push({ type: 'close', block: this.open });
    this.open = null;
  }
}

/** The generation stopped before the answer ended by itself (max tokens, abort). */
export function cutShort(d: Extract<GenerateEvent, { type: 'done' }>): boolean {
  return d.finishReason === 'length' || d.finishReason === 'abort';
}

/** The one choice of a block-shaped turn (Messages, Responses: n = 1) and the parser of its
 * answer (incremental tool-call arguments when streaming). */
export function singleAnswer(turn: Turn<unknown>, callIdPrefix: string): { run: Choice; answer: AnswerStream } {
  const answer = new AnswerStream(turn.prompts[0]!.thinking, turn.tools, callIdPrefix, turn.request.params.stream);
  return { run: turn.choices[0]!, answer };
}

/** The blocks of a finished run's text (non-streaming responses); `cut`: the generation
 * stopped inside the last block (see BlockTracker.finish). */
export function blocksOf(r: { readonly text: string }, answer: AnswerStream, cut: boolean): readonly Block[] {
  const t = new BlockTracker();
  t.push([...answer.push(r.text), ...answer.flush()]);
  t.finish(cut);
  return t.blocks;
}

/** Feed a run's text through the answer parser and the tracker, handing every block event
 * to `emit` as it forms; at the run's final event flush both and return that event (null
 * when the run ends without one). The streaming loop of every block-shaped API. */
export async function streamBlocks(events: AsyncIterable<GenerateEvent>, answer: AnswerStream, tracker: BlockTracker,
  emit: (events: BlockEvent[]) => void): Promise<Extract<GenerateEvent, { type: 'done' }> | null> {
  for await (const ev of events) {
    if (ev.type === 'delta') {
      emit(tracker.push(answer.push(ev.text)));
      continue;
    }
    emit(tracker.push(answer.flush()));
    emit(tracker.finish(cutShort(ev)));
    return ev;
  }
  return null;
}
