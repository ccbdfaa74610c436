// The scheduler's update (Scheduler.update): the ONE writer of request progress after a
// step, in the spirit of vLLM v1's update_from_output. Given what a step computed from
// read-only views (step-output.ts), it commits, row by row in batch order:
//   - prefill / decode rows: computed advances by n, a prefix-cache snapshot is taken at a
//     snapshot point (the state is exactly that of tokens[0, computed)), then the sampled
//     token is appended;
//   - verify rows: the accepted drafts and the bonus are appended, the round is committed
//     (speculative/commit.ts: tracking snapshot, working slot) and computed advances by
//     accepted + 1;
//   - every appended token: stream its text, then the stop decision (stop id or string,
//     max_tokens, the context, a constraint's end error); a finished request releases its
//     memory and gets its done event;
//   - a row whose request has finished or was preempted (an overlapped step recorded before
//     the step that finished it committed, or a chained row whose token the host overruled:
//     overlap.ts) commits nothing.
// It also records the MTP drafts for the next verify and fails requests a step could not
// run. Nothing else writes a request's progress (test/request-ownership.test.ts).
import type { Tensor } from '../kernels/types.js';
import type { StatePool } from '../cache/state-pool.js';
import type { FinishReason } from './output.js';
import { constraintEndError } from './logits-adjust.js';
import { isSnapshotPoint, type PrefixContext, snapshotWorking } from './prefix.js';
import type { GenerateEvent, MutableRequest, RequestView } from './request.js';
import { logprobOf, type LogprobSummary } from './sample-batch.js';
import { commitRound } from './speculative/commit.js';
import type { CommittedRow, DraftOutcome, RowOutcome, StepCommit, StepOutcome } from './step-output.js';
import { assert } from '../util/errors.js';
import { ReasoningSplitter } from '../tokenizer/reasoning.js';

/** Who hears what update decided (the engine: metrics, end-of-generation snapshots). */
export interface ProgressListener {
  /** `req` finished with `reason` (its done event is out; not for snapshot-only requests). */
  readonly finished?: (req: RequestView, reason: FinishReason) => void;
  /** A verify round drafted `drafted` tokens and accepted `accepted`. */
  readonly specRound?: (drafted: number, accepted: number) => void;
}

/** What update needs of the scheduler. */
export interface UpdateContext {
  readonly state: StatePool<Tensor>;
  readonly prefix: PrefixContext | null;
  /** Release the request's memory, drop it from the queues, mark it finished. */
  readonly finish: (req: MutableRequest) => void;
  readonly listener: ProgressListener;
}

/** The scheduler's writable handle on a request it was given (Scheduler.add). */
export function own(req: RequestView): MutableRequest {
  return req as MutableRequest;
}

/** Commit a target step (see the file head); returns what each row committed. */
export function applyStep(ctx: UpdateContext, out: StepOutcome): StepCommit {
  const rows: CommittedRow[] = [];
  let generated = 0;
  out.batch.rows.slice(0, out.batch.nReal).forEach((row, i) => {
    const req = own(row.req!);
    // an overlapped step's row whose request finished at the step before it, or was preempted
    // to recompute (its device draw overruled: overlap.ts): computed for nothing, nothing committed
    if (req.status !== 'running') return;
    assert(row.start === req.computed, `request ${req.id}: a step row at ${row.start}, but ${req.computed} tokens computed`);
    const o = out.rows[i]!;
    const before = req.tokens.length;
    const pages = req.pages; // the page table as of this step (finishing clears req.pages)
    const hitHidden = row.start > 0 ? req.hitHidden : null;
    req.hitHidden = null;
    let n = row.n;
    let snapshotted = false;
    if (row.verify) n = commitVerify(ctx, req, i, row.start, o, (step) => out.hiddenAt(i, step));
    else {
      advance(req, row.n);
      // a row of n = 0 is a whole-prompt hit: its state is that snapshot already
      if (ctx.prefix && row.n > 0 && isSnapshotPoint(ctx.prefix, req, req.computed)) {
        snapshotted = snapshotWorking(ctx.prefix, req, out.hiddenAt(i, row.n - 1));
      }
      if (row.sample && req.snapshotOnly) {
        ctx.finish(req); // its snapshots are taken: nothing to sample
        req.events.end();
        n = row.n - 1;
      } else emitTokens(ctx, req, o);
    }
    generated += req.tokens.length - before;
    rows.push({ req, row: i, start: row.start, n, pages, hitHidden, snapshotted });
  });
  return { rows, generated };
}

/** Record each proposal as its request's drafts for the next verify (a pending round's:
 * placeholders and the claim; its resolution: the ids, for the requests still claiming it). */
export function applyDrafts(out: DraftOutcome): void {
  for (const p of out.proposals) {
    const req = own(p.req);
    if (out.resolves && (req.pendingDrafts?.round !== out.resolves || req.status !== 'running')) continue;
    // a deferred rejection chain may resolve to fewer drafts (deferred-rejection.ts), never more
    assert(!out.resolves || p.tokens.length <= req.drafts.length, `request ${req.id}: ${p.tokens.length} drafts resolve ${req.drafts.length} pending`);
    req.drafts = [...p.tokens];
    req.draftProbs = p.probs ? [...p.probs] : null;
    req.pendingDrafts = p.pending ?? null;
    req.lastDraftUnverified = p.lastUnverified ?? false;
  }
}

/** Finish `reqs` (and only them) with `error`; finished ones are left alone. */
export function failRequests(ctx: UpdateContext, reqs: readonly RequestView[], error: unknown): void {
  const msg = error instanceof Error ? error.message : String(error);
  for (const r of reqs) {
    const req = own(r);
    if (req.status === 'finished') continue;
    ctx.finish(req);
    emitDone(ctx, req, 'error', msg);
  }
}

/** `req` processed `n` more tokens: with admission and preemption, the only writer of
 * req.computed. */
export function advance(req: MutableRequest, n: number): void {
  assert(n >= 0 && req.computed + n <= req.tokens.length, `request ${req.id}: advancing ${n} from ${req.computed} past its ${req.tokens.length} tokens`);
  req.computed += n;
}

/** Commit a verify row; returns the positions it committed (accepted drafts + 1). */
function commitVerify(ctx: UpdateContext, req: MutableRequest, row: number, start: number, o: RowOutcome,
  hiddenAt: (step: number) => Float32Array): number {
  // a token that finishes the request ends the round there (later accepted drafts are dropped)
  const accepted = Math.min(o.accepted, emitTokens(ctx, req, o));
  assert(req.pendingDrafts === null, `request ${req.id}: a verify committed with its drafts still on the kernels`);
  req.drafts = [];
  req.draftProbs = null;
  req.lastDraftUnverified = false;
  req.spec.rounds++;
  req.spec.drafted += o.drafted;
  req.spec.accepted += accepted;
  ctx.listener.specRound?.(o.drafted, accepted);
  if (req.status !== 'finished') {
    commitRound(ctx.state, ctx.prefix, req, row, start, accepted, hiddenAt);
    advance(req, accepted + 1);
  }
  return accepted + 1;
}

/** Append a row's tokens in order up to the first that finishes the request; returns how
 * many were appended. */
function emitTokens(ctx: UpdateContext, req: MutableRequest, o: RowOutcome): number {
  for (let s = 0; s < o.tokens.length; s++) {
    const logits = o.logits[s];
    if (logits) req.captureLogits?.(logits);
    if (!appendToken(ctx, req, o.tokens[s]!, o.logprobs[s] ?? null)) return s + 1;
  }
  return o.tokens.length;
}

/** Commit a sampled token: stream its text, then check the stop conditions. Returns
 * false when the request just finished. */
function appendToken(ctx: UpdateContext, req: MutableRequest, id: number, logprobs: LogprobSummary | null): boolean {
  // a stop id under a constraint whose output is not complete: an error finish, not a stop
  const endError = req.output.isStopId(id) ? constraintEndError(req) : null;
  if (endError !== null) {
    failRequests(ctx, [req], endError);
    return false;
  }
  if (req.onLogprob && logprobs) req.onLogprob({ id, logprob: logprobOf(logprobs, id), top: logprobs.top });
  req.tokens.push(id);
  req.history.push(id);
  const out = req.output.push(id);
  req.events.push(deltaEvent(req, out.text, [id]));
  let reason: FinishReason | null = out.stopped ? 'stop' : null;
  if (!reason && (req.numGenerated >= req.maxTokens || req.tokens.length >= req.maxLength)) reason = 'length';
  if (reason) {
    ctx.finish(req);
    emitDone(ctx, req, reason);
    return false;
  }
  return true;
}

/** The request's last events: the held-back text, then its done event. */
export function emitDone(ctx: UpdateContext, req: MutableRequest, reason: FinishReason, error?: string): void {
  if (req.finishReason) return;
  req.finishReason = reason;
  if (req.snapshotOnly) {
    req.events.end();
    return;
  }
  const tail = req.output.flush();
  const last = deltaEvent(req, tail, [], true);
  if (last.text || last.reasoning || last.content) req.events.push(last);
  req.events.push({
    type: 'done', finishReason: reason, text: req.output.text, ...req.finalParts(),
    outputIds: req.outputIds, promptIds: req.promptIds,
    usage: { promptTokens: req.promptIds.length, completionTokens: req.numGenerated, cachedTokens: req.cachedTokens },
    ...(error !== undefined ? { error } : {}),
    spec: { ...req.spec },
    preemptions: req.preemptions,
  });
  req.events.end();
  ctx.listener.finished?.(req, reason);
}

/** Each streaming request's reasoning / content splitter (created at its first delta). */
const splitters = new WeakMap<RequestView, ReasoningSplitter>();

/** The delta event of newly streamed text; `last`: the request's final one, releasing
 * text the splitter held back (a possible partial tag). */
function deltaEvent(req: MutableRequest, text: string, ids: readonly number[], last = false): Extract<GenerateEvent, { type: 'delta' }> {
  let splitter = splitters.get(req);
  if (!splitter) splitters.set(req, (splitter = new ReasoningSplitter(req.startsInReasoning)));
  const p = splitter.push(text);
  if (last) {
    const rest = splitter.flush();
    p.reasoning += rest.reasoning;
    p.content += rest.content;
  }
  return { type: 'delta', text, ids, reasoning: p.reasoning, content: p.content };
}
