// Simulated MTP acceptance for `bench --mode mtp --accept-rate P` (docs/cli.md): a draft
// that equals the target's greedy token with probability P at each position, else a
// different token. Real Qwen3.5 heads accept 0.6–0.9 per position; tiny test models do
// not, so the bench simulates the rate and measures only what it costs. The model's own
// MTP head still runs (its time is real); only the proposed ids are replaced, through the
// engine's draftOverride hook (test-hooks.ts), so outputs stay those of MTP off (lossless:
// the verify step commits the target's own picks whatever the drafts are).
//
// Invariants: the draw of a position depends only on (seed, prompt, absolute position),
// not on k, the batch or the round a position is drafted in — and a position is verified
// at most once as "the first draft not yet rejected", so verified positions agree
// independently with probability P.
import { Rng } from '../../util/rng.js';
import type { HookRequest } from '../test-hooks.js';

export interface AcceptRateOptions {
  /** Per-position probability that a draft equals the target's greedy token, in [0, 1]. */
  readonly rate: number;
  readonly seed: number;
  /** Drafts are ids in [0, vocab): a disagreeing draft is another id of this range. */
  readonly vocab: number;
  /** The target's greedy output of a prompt (the MTP-off run's ids), or undefined. */
  readonly targetOf: (promptIds: readonly number[]) => readonly number[] | undefined;
}

/** FNV-1a over the prompt ids (a request's identity for the draws). */
function promptHash(ids: readonly number[]): number {
  let h = 0x811c9dc5;
  for (const id of ids) {
    h ^= id & 0xffff;
    h = Math.imul(h, 0x01000193);
    h ^= id >>> 16;
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** Uniform [0, 1) for (seed, prompt, position), reproducible. */
export function positionDraw(seed: number, prompt: number, position: number): number {
  const key = (BigInt.asUintN(16, BigInt(seed)) << 48n) ^ (BigInt(prompt) << 16n) ^ BigInt(position);
  return new Rng(key).next();
}

/** The draftOverride hook: draft i of a request (absolute position tokens.length + i) is
 * the target's token there with probability `rate`, else (token + 1) mod vocab. Past the
 * recorded output the model's own drafts are kept. */
export function acceptRateDrafts(o: AcceptRateOptions): (req: HookRequest, drafts: number[]) => number[] {
  if (!(o.rate >= 0 && o.rate <= 1)) throw new RangeError(`accept rate must be in [0, 1] (got ${o.rate})`);
  if (!(Number.isInteger(o.vocab) && o.vocab >= 2)) throw new RangeError(`accept-rate drafts need a vocabulary of 2+ ids (got ${o.vocab})`);
  return (req, drafts) => {
    const target = o.targetOf(req.promptIds);
    if (!target) return drafts;
    const p = promptHash(req.promptIds);
    return drafts.map((d, i) => {
      const pos = req.tokens.length + i;
      const want = target[pos - req.promptIds.length];
      if (want === undefined) return d;
      return positionDraw(o.seed, p, pos) < o.rate ? want : (want + 1) % o.vocab;
    });
  };
}
