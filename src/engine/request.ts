// A request inside the engine: its tokens, progress, memory and output stream.
// Token bookkeeping (invariant): `tokens` = prompt + generated ids; positions < `computed`
// are in the KV cache / recurrent state; tokens[computed..] are still to be processed.
// Tokens below `prefillEnd` are (re)computed as prefill rows; later ones are decode steps.
// Prompt positions use the chunked Gated DeltaNet form, generated positions the recurrence.
import type { Rng } from '../util/rng.js';
import type { HistoryView, SamplingParams, TokenHistory } from './sampler.js';
import type { FinishReason, OutputText } from './output.js';
import type { LogitsAdjust } from './logits-adjust.js';
import type { TokenLogprob } from './sample-batch.js';
import { splitReasoning } from '../tokenizer/reasoning.js';
import type { RequestVision } from './vision.js';
import type { Dist } from './speculative/sparse-accept.js';
import type { PendingDraft } from './speculative/draft-round.js';

export type RequestStatus = 'waiting' | 'running' | 'finished';

export interface Usage {
  readonly promptTokens: number;
  readonly completionTokens: number;
  readonly cachedTokens: number;
}

export interface SpecStats {
  rounds: number;
  drafted: number;
  accepted: number;
}

/** Generated text as shown to a reader: `text` is everything generated (think tags
 * included); `reasoning` is the part inside the reasoning block (<think>…</think>) and
 * `content` the answer after it, both without the tags (tokenizer/reasoning.ts rules).
 * Over a whole request the deltas' reasoning and content join to the done event's. */
export type GenerateEvent =
  | { readonly type: 'delta'; readonly text: string; readonly ids: readonly number[]; readonly reasoning: string; readonly content: string }
  | {
    readonly type: 'done';
    readonly finishReason: FinishReason;
    readonly text: string;
    /** Null when the output has no reasoning block. */
    readonly reasoning: string | null;
    readonly content: string;
    readonly outputIds: readonly number[];
    readonly promptIds: readonly number[];
    readonly usage: Usage;
    readonly error?: string;
    readonly spec?: SpecStats;
    /** Times the request was preempted and recomputed. */
    readonly preemptions: number;
  };

/** Unbounded single-consumer event queue feeding an async iterator. */
export class EventQueue<T> {
  private readonly items: T[] = [];
  private waiter: ((v: IteratorResult<T>) => void) | null = null;
  private ended = false;

  push(item: T): void {
    if (this.ended) return;
    if (this.waiter) {
      const w = this.waiter;
      this.waiter = null;
      w({ value: item, done: false });
    } else this.items.push(item);
  }
  end(): void {
    this.ended = true;
    if (this.waiter && this.items.length === 0) {
      const w = this.waiter;
      this.waiter = null;
      w({ value: undefined, done: true });
    }
  }
  next(): Promise<IteratorResult<T>> {
    const item = this.items.shift();
    if (item !== undefined) return Promise.resolve({ value: item, done: false });
    if (this.ended) return Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve) => (this.waiter = resolve));
  }
}

/** What a reader sees of a request's output text. */
export interface OutputView {
  readonly text: string;
  isStopId(id: number): boolean;
}

/** The consumer's end of a request's event stream. */
export interface EventSource<T> {
  next(): Promise<IteratorResult<T>>;
}

/**
 * A request inside the engine. Its PROGRESS (status, tokens, computed, prefillEnd, pages,
 * slot, aborted, finishReason, cachedTokens, preemptions, spec, drafts, draftProbs, pendingDrafts,
 * lastDraftUnverified, lockHandle, hitHidden, history, output, events) is read-only here: the scheduler alone
 * writes it (scheduler.ts and its update, update.ts), through MutableRequest. Its
 * CONFIGURATION (splits, adjust, sampling hooks, ...) is set while the request is built,
 * before it is queued, and never changes after.
 */
export class Request {
  readonly status: RequestStatus = 'waiting';
  /** Prompt followed by generated ids. */
  readonly tokens: readonly number[];
  readonly computed: number = 0;
  readonly prefillEnd: number;
  /** KV pages, in position order (page i holds positions i·pageSize …). */
  readonly pages: readonly number[] = [];
  /** Working state slot (0 = none). */
  readonly slot: number = 0;
  /** The client went away: the next step boundary finishes it with reason 'abort'. */
  readonly aborted: boolean = false;
  readonly finishReason: FinishReason | null = null;
  readonly cachedTokens: number = 0;
  readonly preemptions: number = 0;
  readonly spec: Readonly<SpecStats> = { rounds: 0, drafted: 0, accepted: 0 };
  readonly events: EventSource<GenerateEvent> = new EventQueue<GenerateEvent>();
  /** Drafts d_1..d_k for the next verify (empty = plain decode). */
  readonly drafts: readonly number[] = [];
  /** q_i of each draft for sampling requests (null for greedy): a row, or a list when the
   * draft row was certified from top candidates (speculative/sparse-accept.ts). */
  readonly draftProbs: readonly Dist[] | null = null;
  /** The drafts are still on the kernels, chain `chain` of a pending round: `drafts` holds
   * placeholders until the verify's read-back resolves them (speculative/pending-drafts.ts). */
  readonly pendingDrafts: PendingDraft | null = null;
  /** The last draft is the host's redraw of a deferred round's proposal, and the verify row
   * embedded the device's token there (speculative/deferred-rejection.ts): the target after it
   * is not this chain's, so an accepted last draft ends the round with no bonus. */
  readonly lastDraftUnverified: boolean = false;
  /** Prefix-cache lock held while running (null = none). */
  readonly lockHandle: object | null = null;
  /** After a prefix hit: target hidden at position hit−1 (MTP input), until the first step
   * after admission has used it. */
  readonly hitHidden: Float32Array | null = null;
  readonly history: HistoryView;
  readonly output: OutputView;
  /** Prompt positions in (0, promptLength] where the chunked prefill ends a chunk besides
   * the multiples of the Gated DeltaNet chunk: the end of every message of a chat prompt,
   * and the prompt's end (ascending; see prefix.ts). They are part of the request's
   * prefix-cache key: a cached prefix was computed with exactly the same splits. */
  splits: readonly number[] = [];
  /** Message ends of a chat prompt (⊆ splits; empty for raw prompts). */
  messageEnds: readonly number[] = [];
  /** Prompt positions (all in splits) where the prefix cache snapshots besides the interval
   * multiples: the end of the first message (the system/tools preamble), of the last one,
   * and the prompt's end (see prefix.ts promptSnapshotPoints). */
  snapshotPoints: ReadonlySet<number> = new Set();
  /** Internal request that only prefills its prompt to take prefix-cache snapshots (end
   * of a generation, see prefix.ts queueGenerationSnapshot): it never samples or emits. */
  snapshotOnly = false;
  /** Debug/test hook: called with the logits of every sampled position. */
  captureLogits: ((logits: Float32Array) => void) | null = null;
  /** Logit bias / constraint applied before sampling target and draft tokens (null = none). */
  adjust: LogitsAdjust | null = null;
  /** top_logprobs count of every emitted token, or −1 for no logprobs. */
  topLogprobs = -1;
  onLogprob: ((e: TokenLogprob) => void) | null = null;
  /** The prompt ends inside a reasoning block (a template's `<think>\n`): the output starts
   * as reasoning (set by the request builder). */
  startsInReasoning = false;
  /** The request named its seed: its sampled tokens must be reproducible (speculative/accept.ts
   * 'auto' verifies its drafts by matching, so they are MTP off's). */
  seeded = false;
  /** The prompt's images (null: none): embeddings over its pad rows, multimodal RoPE, image
   * prefix-cache keys (vision.ts). */
  vision: RequestVision | null = null;

  constructor(
    readonly id: number,
    readonly arrival: number,
    readonly promptIds: readonly number[],
    readonly maxTokens: number,
    /** Total positions this request may reach (prompt + generated). */
    readonly maxLength: number,
    readonly sampling: SamplingParams,
    readonly rng: Rng,
    /** Draws of sampled drafts (separate from `rng`, which the target's picks use). */
    readonly draftRng: Rng,
    history: TokenHistory,
    output: OutputText,
  ) {
    this.tokens = [...promptIds];
    this.prefillEnd = promptIds.length;
    this.history = history;
    this.output = output;
  }

  /** The whole output split at once (equal to the deltas' parts joined). */
  finalParts(): { reasoning: string | null; content: string } {
    return splitReasoning(this.output.text, this.startsInReasoning);
  }

  get numGenerated(): number {
    return this.tokens.length - this.promptIds.length;
  }
  get outputIds(): readonly number[] {
    return this.tokens.slice(this.promptIds.length);
  }
  /** Still in chunked prefill (including recompute after preemption). */
  get prefilling(): boolean {
    return this.computed < this.prefillEnd;
  }
}

/** A request as every module but the scheduler sees it: nothing is writable. */
export type RequestView = Readonly<Request>;

/** The request's progress with its real, writable types. */
interface Progress {
  status: RequestStatus;
  tokens: number[];
  computed: number;
  prefillEnd: number;
  pages: number[];
  slot: number;
  aborted: boolean;
  finishReason: FinishReason | null;
  cachedTokens: number;
  preemptions: number;
  spec: SpecStats;
  events: EventQueue<GenerateEvent>;
  drafts: number[];
  draftProbs: Dist[] | null;
  pendingDrafts: PendingDraft | null;
  lastDraftUnverified: boolean;
  lockHandle: object | null;
  hitHidden: Float32Array | null;
  history: TokenHistory;
  output: OutputText;
}

/** The scheduler's handle on a request: its progress writable. ONLY scheduler.ts and
 * update.ts may name this type (test/request-ownership.test.ts checks it). */
export type MutableRequest = Omit<Request, keyof Progress> & Progress;

/** Every progress field (the ownership test greps for writes to them). */
export const PROGRESS_FIELDS: readonly (keyof Progress)[] = [
  'status', 'tokens', 'computed', 'prefillEnd', 'pages', 'slot', 'aborted', 'finishReason', 'cachedTokens', 'preemptions',
  'spec', 'events', 'drafts', 'draftProbs', 'pendingDrafts', 'lastDraftUnverified', 'lockHandle', 'hitHidden', 'history', 'output',
];
