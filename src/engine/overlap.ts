// Overlapped decode steps: on a GPU the engine records and submits decode step N + 1 before
// step N's read-back has resolved, so the GPU runs step N while the host records N + 1 and
// the host never waits on an idle GPU between steps (the role of sglang's overlap scheduler
// and vLLM's async scheduling). Step N + 1 embeds the ids step N's argmax left on the device
// (Runner.run's `chained`: Kernels.embedIds over the runner's picks); its batch is step N's
// rows, each one position on (Scheduler.chain), built before N's update.
//
// Invariants (why the outputs are those of the plain loop, bit for bit):
// - A chained step is the step schedule() would build after N's update for every row whose
//   request is still running: the same rows in the same order, one token each at start + 1,
//   that token N's pick. schedule() would admit nothing (no request waits, or the batch is
//   full: a slot freed at N is taken one step later, as by a request arriving), reap nothing (no
//   row's request is aborted), preempt nothing (the next positions' pages are free), and
//   draft nothing (MTP is off, or the adaptive policy chose k = 0 for the round after N: its
//   choice is made now, once, and the draft after N uses it), so it would build exactly that.
// - N's update may not write device memory that N + 1 has already read or written: only a
//   prefix-cache snapshot of a working slot does, so a step whose rows may snapshot never
//   chains (rowMaySnapshot). Every greedy pick is the kernels' plain argmax (no penalty, bias,
//   logprobs or logits capture), or their masked argmax under a constraint whose mask is fixed
//   (logits-adjust.ts maskRunOf: a mask run, recorded for N + 1 as for N), so N's update needs
//   nothing else of the device. Where N's pick ends the run (a `</think>` in an open reasoning
//   block) N + 1 picked under the run's mask, not the one after it: its pick stands when the mask
//   after N allows it and allows nothing the run's did not (then it is that mask's argmax too;
//   chainedPickStands), else the request recomputes, as for an overruled draw below.
// - A sampled row (top-k on, no penalty, bias, constraint, logprobs or capture) chains
//   on a proposal: the device draws N + 1's token from N's top candidates with the uniform
//   the host's exact draw will use (the request's next one, looked ahead at on a fork of its
//   rng: Runner.drawChained). N + 1 reads back the tokens it embedded; where the host's draw
//   at N differs (an f32 draw at a boundary the f64 one falls on the other side of: rare),
//   that row computed on a wrong token and wrote its state: the engine preempts its request
//   (it recomputes, its rng untouched by the wasted row), and every later row of it commits
//   nothing. So the tokens, and the uniforms each consumes, are the plain loop's. A row of
//   N whose candidates the host refuses (ties at the edge: rare) would read its logits row in
//   a second read-back, but N + 1 has overwritten it by then: its request recomputes too.
// - A row whose request finished at N (a stop id or string) was computed for nothing: update
//   commits nothing for it (update.ts). Its slot and pages were freed at N's update; GPU work
//   runs in submission order, so any later user of them writes after N + 1 has run. A chain
//   with such a row ends there (its picks are no longer the next step's rows).
// - Requests arriving, or aborted, during a chain wait for its end: one step at most. A
//   saturated server (a full batch and a queue) keeps overlapping.
import type { Batch, BatchRow } from './batch.js';
import { finishesOnHost, penalised, picksOnKernels, sampledCandidates } from './device-picks.js';
import type { RequestView } from './request.js';
import { isGreedy } from './sampler.js';
import type { MaskRun } from '../constrain/constraint.js';
import { committedMatcher, maskRunOf } from './logits-adjust.js';

/** What the engine knows when deciding whether step N + 1 may be recorded now. */
export interface ChainFacts {
  /** Overlap is on (a GPU backend, or forced) and no test hook steers scheduling. */
  readonly enabled: boolean;
  /** Will the update of `batch` be followed by MTP drafts (the next step a verify)? Asked
   * last, once every other condition holds: with MTP on it makes the policy's choice of the
   * next round's k (Speculator.chooseNextK), which the draft after this step then uses. */
  readonly draftsAfter: (batch: Batch) => boolean;
  /** schedule() would admit a waiting request now (one waits and the batch has room). */
  readonly admitting: boolean;
  /** May the update of step N snapshot `row`'s working state (prefix.ts rowMaySnapshot)? */
  readonly maySnapshot: (row: BatchRow) => boolean;
  /** Ids a token may take (sampled rows' candidates are over them). */
  readonly sampleVocab: number;
  /** Sampled rows read top candidates (Runner.candidateStep: a GPU), which a device draw needs. */
  readonly candidates: boolean;
  /** Has a row of this request had its candidates refused past a chained step (its request
   * recomputed)? Its sampled rows chain no more: a row that ties at its candidates' edge
   * every step would recompute every step. */
  readonly recomputed: (req: RequestView) => boolean;
}

/** May the step after `batch` be recorded before `batch`'s read-back (Scheduler.chain)? */
export function chainable(batch: Batch, facts: ChainFacts): boolean {
  if (!facts.enabled || facts.admitting || batch.kind !== 'decode' || batch.nReal === 0) return false;
  return batch.rows.slice(0, batch.nReal).every((row) => rowChains(row, facts)) && !facts.draftsAfter(batch);
}

/** A running text request's one-token decode row, picked by the kernels' plain argmax or drawn
 * on the device (drawsChained), that neither snapshots nor reaches its length limit at this step. */
function rowChains(row: BatchRow, facts: ChainFacts): boolean {
  const req = row.req!;
  if (row.n !== 1 || !row.sample || row.verify || row.chunked) return false;
  if (req.status !== 'running' || req.aborted || req.snapshotOnly || req.vision !== null) return false;
  const plain = isGreedy(req.sampling) ? picksOnKernels(req) && !finishesOnHost(req) : facts.candidates && drawsChained(req, facts.sampleVocab) && !facts.recomputed(req);
  // a constraint's mask after N's pick must be known now: a mask run covering N + 1's position
  // (the closed-think mask of a chat answer, for good; an open reasoning block's, until
  // `</think>`: N + 1's pick is checked against the mask after N's once that is known,
  // chainedPickStands)
  const run = maskRunOf(req);
  if (!plain || !run || (run.positions !== undefined && run.positions < 2)) return false;
  // the token this step appends ends the request by length: its next step would be wasted
  if (req.numGenerated + 1 >= req.maxTokens || req.tokens.length + 1 >= req.maxLength) return false;
  return !facts.maySnapshot(row);
}

/** A sampled request whose next token the device can propose from its top candidates, the
 * host's draw from the same candidates confirming it: a top-k cut (its 2k candidates decide
 * the draw but for ties at the edge: sampled-candidates.ts certify; a min-p or top-p row can be
 * refused often, and a refused row of a step chained past costs a recompute), no adjustment
 * (penalty, bias, constraint), no logprobs or capture. */
export function drawsChained(req: RequestView, sampleVocab: number): boolean {
  const p = req.sampling;
  return !isGreedy(p) && p.topK > 0 && p.topK < sampleVocab && sampledCandidates(req, sampleVocab) > 0 && !penalised(p) && req.adjust === null;
}

/** A chained greedy row's pick (N + 1's), made under `run` (its request's mask run when N + 1
 * was recorded): does it stand once N's pick is committed? Yes unless N's pick ended the run
 * and the mask after it (the committed matcher's now) refuses the pick or allows an id the
 * run's mask did not (the pick may not be its argmax then). */
export function chainedPickStands(req: RequestView, run: MaskRun | undefined, inputToken: number, pick: number): boolean {
  if (!run || !run.until.includes(inputToken)) return true;
  const now = committedMatcher(req)?.mask() ?? null;
  if (now === null) return run.mask === null;
  if (((now[pick >>> 5]! >>> (pick & 31)) & 1) === 0) return false;
  return run.mask === null || now.every((w, i) => (w & ~run.mask![i]!) === 0);
}
