// Per-request logits adjustment, applied by the engine to every distribution a request
// samples from — the target's (decode and each verify position) and the MTP drafter's —
// before penalties, temperature and truncation. Because drafts are proposed under the same
// adjustment the target is verified under, speculative decoding stays lossless.
//
// - `bias`: additive logit biases by token id (OpenAI `logit_bias`).
// - `constraint`: structured output, forced tool calls, reasoning masks (src/constrain). The
//   engine starts one matcher per request and advances it with the ids the request commits
//   (never taken back); a position past the committed ids — a draft being proposed, a verify
//   position after drafts — reads a fork of it advanced by the drafts before that position.
//   Ids outside the matcher's mask get −∞. When a stop id is about to end the request, the
//   matcher's endError says why the output may not end there (a constraint at a dead end
//   allows only the stop ids and says so), or null when it may; a reason turns the stop into
//   an `error` finish carrying it, so an incomplete constrained output never looks like a
//   normal stop.
import { ANY_ID_RUN, type Constraint, type MaskRun, type Matcher } from '../constrain/constraint.js';

export interface LogitsAdjust {
  readonly bias: ReadonlyMap<number, number> | null;
  readonly constraint?: Constraint | null;
}

/** The parts of a request the adjustment reads: its committed ids are
 * tokens[promptIds.length ..), its current drafts follow them. */
export interface AdjustedRequest {
  readonly adjust: LogitsAdjust | null;
  readonly tokens: readonly number[];
  readonly promptIds: readonly number[];
  readonly drafts: readonly number[];
}

/** Each constrained request's matcher after its committed ids. */
const committed = new WeakMap<AdjustedRequest, Matcher>();
/** Each constrained request's fork past its committed ids, and the drafts it has read. */
const forks = new WeakMap<AdjustedRequest, { readonly base: number; readonly m: Matcher; readonly read: number[] }>();

/** The request's matcher after its committed ids, advanced by those committed since the last
 * call (null: no constraint). Read only: the caller never advances it. */
export function committedMatcher(req: AdjustedRequest): Matcher | null {
  const c = req.adjust?.constraint;
  if (!c) return null;
  let m = committed.get(req);
  if (!m) committed.set(req, (m = c.start()));
  const start = req.promptIds.length;
  const n = req.tokens.length - start;
  if (m.length > n) throw new Error(`constraint matcher is ${m.length} ids in, past the ${n} the request has committed (committed ids are never taken back)`);
  for (let i = m.length; i < n; i++) m.advance(req.tokens[start + i]!);
  return m;
}

/** The request's matcher after its committed ids and drafts[0..k), k = min(at, drafts): the
 * committed one for k = 0 or inside the committed matcher's mask run, else the request's fork
 * when it is on the way there (it is advanced by the drafts it has not read), else a new fork.
 * `drafts`: the request's drafts (verify), or the chain the MTP drafter is proposing (not the
 * request's until the scheduler's update records it). Read only for the caller. */
export function matcherAfterDrafts(req: AdjustedRequest, at: number, drafts: readonly number[] = req.drafts): Matcher | null {
  const base = committedMatcher(req);
  // a verify position past a resolved chain's last draft (a deferred round cut shorter:
  // pending-drafts.ts) is never accepted from: it reads the matcher after every draft
  const k = Math.min(at, drafts.length);
  if (!base || k === 0) return base;
  // a mask run stands for every later position until one of its `until` ids or its positions'
  // end; drafts still on the kernels (placeholders, negative: speculative/pending-drafts.ts) are
  // recorded under the run's mask at every position, and the round is cut at the run's end
  // when it resolves
  const run = base.maskRun?.();
  if (run && (firstOutside(run, drafts, k) < 0 || drafts.some((id, i) => i < k && id < 0))) return base;
  let f = forks.get(req);
  if (!f || f.base !== base.length || f.read.length > k || f.read.some((id, i) => id !== drafts[i])) {
    f = { base: base.length, m: base.fork(), read: [] };
    forks.set(req, f);
  }
  for (let i = f.read.length; i < k; i++) {
    const id = drafts[i]!;
    f.m.advance(id);
    f.read.push(id);
  }
  return f.m;
}

/** The mask run of the request's positions from its committed ids on (Matcher.maskRun: the
 * closed-think mask of a chat answer, for good; an open reasoning block's "any id" until
 * `</think>` or its budget's end): ANY_ID_RUN without a constraint; undefined when the mask may
 * change with other ids. */
export function maskRunOf(req: AdjustedRequest): MaskRun | undefined {
  const m = committedMatcher(req);
  return m ? m.maskRun?.() : ANY_ID_RUN;
}

/** A chain of drafts `ids` cut to the part whose verify positions are inside `run`: `keep`
 * drafts, and `ended` when the position after the last kept one (its bonus) is outside (the
 * chain went past the run's positions, or through an `until` id, kept as its last). */
export function runCut(run: MaskRun, ids: readonly number[]): { keep: number; ended: boolean } {
  const at = firstOutside(run, ids, ids.length);
  return at < 0 ? { keep: ids.length, ended: false } : { keep: at, ended: true };
}

/** The first of positions 1..n outside `run` for a chain of ids (position i follows ids[0..i)):
 * past the run's positions, or after an `until` id; −1 when positions 0..n are all inside. */
function firstOutside(run: MaskRun, ids: readonly number[], n: number): number {
  const last = run.positions ?? Infinity;
  if (run.until.length === 0 && last > n) return -1;
  for (let i = 1; i <= n; i++) if (i >= last || run.until.includes(ids[i - 1]!)) return i;
  return -1;
}

/** Does the request's constraint mask depend on the ids that follow other than through a mask
 * run? Such a request's masks are read per position, after the drafts before it. */
export function masksVary(req: AdjustedRequest): boolean {
  return maskRunOf(req) === undefined;
}

/** Why the request may not end now, as its constraint sees its committed ids (null: it may,
 * or it has no constraint). */
export function constraintEndError(req: AdjustedRequest): string | null {
  return committedMatcher(req)?.endError() ?? null;
}

/** Apply the bias and `matcher`'s mask (null: none) to logits[0..n) in place. */
export function adjustInPlace(logits: Float32Array, n: number, adj: LogitsAdjust | null, matcher: Matcher | null): void {
  if (adj?.bias) for (const [id, b] of adj.bias) if (id < n) logits[id] = logits[id]! + b;
  const mask = matcher ? matcher.mask() : null;
  if (!mask) return;
  for (let w = 0; w * 32 < n; w++) {
    const bits = mask[w] ?? 0;
    if (bits === -1 >>> 0) continue;
    const end = Math.min(n, w * 32 + 32);
    for (let i = w * 32; i < end; i++) if (((bits >>> (i & 31)) & 1) === 0) logits[i] = -Infinity;
  }
}

/** Every position a step samples from (a decode row's last position, each verify position
 * given the drafts before it) adjusted in place, before the batch sampler and the greedy
 * verify read them. The step's logits rows are private to this step. */
export function adjustStepLogits(rows: readonly { readonly req: AdjustedRequest | null; readonly verify?: boolean; readonly sample?: boolean }[],
  logits: readonly Float32Array[][], vocab: number): void {
  rows.forEach((row, i) => {
    const req = row.req;
    if (!req?.adjust) return;
    const positions = logits[i]!;
    if (row.verify) positions.forEach((l, s) => adjustInPlace(l, vocab, req.adjust, matcherAfterDrafts(req, s)));
    // a row the kernels picked under its mask (device-picks.ts) has no logits rows here
    else if (row.sample && positions.length > 0) adjustInPlace(positions[0]!, vocab, req.adjust, committedMatcher(req));
  });
}
