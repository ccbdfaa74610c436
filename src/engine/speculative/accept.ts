// Acceptance of a chain of k drafts against the target's k+1 verify logits.
// Greedy: accept while draft == the target's pick (argmax after penalties); the first
// mismatch (or position k) gives the bonus token.
// Sampling, 'match' (SpecSampling; the default for a request that names its seed): position i draws its token exactly as MTP off
// would (the sampler's draw with the request's next uniform, i.e. the (i+1)-th ahead at the
// round's start), and the walk is the greedy one on those draws: accept while draft == draw.
// Every emitted token is the plain loop's token for the same seed, for any k and any drafts
// (the drafter draws its proposals with the same uniforms, so a draft head close to the
// target proposes the token the target draws). Sampling, 'rejection':
// accept d_i with probability min(1, p_i(d_i)/q_i(d_i)); on rejection draw the bonus from
// norm(max(0, p_i − q_i)); when all are accepted draw it from p_k. p_i is the request's
// full sampling distribution (penalties, temperature, top-k/p, min-p) given every token
// accepted before it, so the output distribution equals decoding without drafts.
import type { Rng } from '../../util/rng.js';
import { assert } from '../../util/errors.js';
import { type Argmax, drawFrom, greedyToken, type HistoryView, isGreedy, type SamplingParams, targetDistribution } from '../sampler.js';

/** How a sampled request's drafts are verified: 'match' emits the plain loop's draws (the same
 * tokens as MTP off for a seed, whatever k); 'rejection' is rejection sampling (the same
 * distribution; accepts more where the draft's distribution is flat, but its draws, so a
 * seed's tokens, depend on k); 'auto' (the engine's default): 'match' for a request that named
 * its seed, 'rejection' for one that did not (nothing of it is reproducible). */
export type SpecSampling = 'auto' | 'match' | 'rejection';

export function isSpecSampling(s: unknown): s is SpecSampling {
  return s === 'auto' || s === 'match' || s === 'rejection';
}

/** The verification of a sampled request under an engine's choice. */
export function samplingOf(mode: SpecSampling, seeded: boolean): 'match' | 'rejection' {
  return mode === 'auto' ? (seeded ? 'match' : 'rejection') : mode;
}

export interface DraftChain {
  readonly tokens: readonly number[]; // d_1..d_k
  /** q_i over the vocab for sampling requests; null for greedy drafts. */
  readonly probs: readonly Float64Array[] | null;
}

export interface AcceptContext {
  readonly sampling: SamplingParams;
  /** The request's history BEFORE this round: the walk counts the drafts accepted before
   * position i as generated (penalties), so the caller need not push as it emits. */
  readonly history: HistoryView;
  readonly vocab: number;
  readonly rng: Rng;
  /** The kernels' argmax for greedy picks (optional: the sampler has its own). */
  readonly argmax?: Argmax;
  /** p_i computed ahead (batched on the kernels, history + d_1..d_i); default: computed
   * here from logitsAt(i). */
  readonly targetAt?: (i: number) => Float64Array;
}

/** Walk the chain. `logitsAt(i)` = target logits after verify input i (i = 0..k).
 * `emit(token)` commits a token (accepted draft or bonus) and returns false when the
 * request just finished (eos/stop/length) — the walk then stops right there.
 * Returns the number of accepted drafts (the bonus is emitted after them). `bonus` false
 * (sampled chains only): position k's target is not the chain's, so a walk that accepts
 * every draft ends there with no bonus (deferred-rejection.ts). */
export function acceptDrafts(chain: DraftChain, ctx: AcceptContext, logitsAt: (i: number) => Float32Array,
  emit: (token: number) => boolean, bonus = true): number {
  const k = chain.tokens.length;
  const greedy = isGreedy(ctx.sampling);
  assert(bonus || !greedy, 'a greedy walk always has its bonus');
  for (let i = 0; i <= k; i++) {
    if (i === k && !bonus) return k;
    const logits = logitsAt(i);
    const draft = i < k ? chain.tokens[i]! : -1;
    if (greedy) {
      const pick = greedyToken(logits, ctx.sampling, ctx.history, ctx.vocab, ctx.argmax, chain.tokens.slice(0, i));
      const alive = emit(pick);
      if (pick !== draft) return i; // pick was the bonus
      if (!alive) return i + 1;
      continue;
    }
    const p = ctx.targetAt ? ctx.targetAt(i) : targetDistribution(logits, ctx.sampling, ctx.history, ctx.vocab, undefined, undefined, chain.tokens.slice(0, i));
    if (i === k) {
      emit(drawFrom(p, ctx.rng));
      return k;
    }
    const q = chain.probs![i]!;
    const qd = q[draft]!;
    const accept = qd > 0 && ctx.rng.next() * qd < p[draft]!;
    if (!accept) {
      emit(drawFrom(residual(p, q), ctx.rng));
      return i;
    }
    if (!emit(draft)) return i + 1;
  }
  return k;
}

/** norm(max(0, p − q)); falls back to p if the residual is empty (p ≤ q everywhere,
 * which rejection makes a probability-zero event). */
export function residual(p: Float64Array, q: Float64Array): Float64Array {
  const r = new Float64Array(p.length);
  let sum = 0;
  for (let i = 0; i < p.length; i++) {
    const v = p[i]! - q[i]!;
    if (v > 0) {
      r[i] = v;
      sum += v;
    }
  }
  if (sum <= 0) return p;
  for (let i = 0; i < r.length; i++) r[i] = r[i]! / sum;
  return r;
}

/** Acceptance on picks made already: the kernels' argmax of verify positions 0..k
 * (engine/device-picks.ts: the walk of acceptDrafts for a greedy request without penalties),
 * or a sampled request's draws at them ('match'). The tokens are the accepted drafts, then
 * the bonus (the first pick that differs from its draft, or pick k); with `bonus` false
 * (Request.lastDraftUnverified: pick k is not the target's) a walk that accepts every draft
 * ends with the last, which is then committed as the bonus is (accepted counts one fewer). */
export function acceptPicked(drafts: readonly number[], ids: ArrayLike<number>, bonus = true): { tokens: number[]; accepted: number } {
  const tokens: number[] = [];
  for (let i = 0; i <= drafts.length; i++) {
    if (i === drafts.length && !bonus && i > 0) return { tokens, accepted: i - 1 };
    const pick = ids[i]!;
    tokens.push(pick);
    if (i === drafts.length || pick !== drafts[i]) return { tokens, accepted: i };
  }
  throw new Error('unreachable: the walk ends at the bonus');
}
