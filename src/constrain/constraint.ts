// The interface the engine and MTP drafts see of a constraint. A compiled constraint
// (`Constraint`) starts one `Matcher` per sequence; the matcher advances one token at a time
// and is forked for positions that may be thrown away (MTP drafts, verify positions), so no
// position ever rebuilds the history before it.
//
// Invariant: a matcher's mask and endError depend only on the ids advanced since start(), in
// order — a fork advanced by the same ids answers exactly as the original would (forks share
// nothing mutable), and the answers equal those of a fresh matcher fed the whole history.

export interface Matcher {
  /** Ids advanced since start (the history this matcher stands after). */
  readonly length: number;
  /** Ids that may come next, as a bitset over the vocabulary (bit i of word i>>5), or null
   * for "any id". Never empty: at a dead end only the stop ids (endError then says why).
   * The caller must not write to it (masks are shared through caches). */
  mask(): Uint32Array | null;
  /** Step past one generated id. */
  advance(id: number): void;
  /** An independent matcher at the same position. */
  fork(): Matcher;
  /** Why the output may not end here (a stop id is about to end it), or null when it may. */
  endError(): string | null;
  /** The mask of every later position while none of the run's `until` ids is taken (then it
   * is mask()), when the matcher can say so; undefined when the mask may change with other ids.
   * The engine lets such a request's MTP rounds stay on the kernels under that one mask and
   * cuts a round after a drafted `until` id (engine/logits-adjust.ts maskRunOf). */
  maskRun?(): MaskRun | undefined;
}

/** A mask that holds at every position until one of `until` is taken, for at most `positions`
 * positions (both absent: for good). Position 0 is the next id's. */
export interface MaskRun {
  /** null: any id. */
  readonly mask: Uint32Array | null;
  /** Ids after which the mask may change (the position after one of them is outside the run). */
  readonly until: readonly number[];
  /** Positions 0..positions − 1 at most are inside the run (absent: no limit; ≥ 1). */
  readonly positions?: number;
}

/** Any id, for good. */
export const ANY_ID_RUN: MaskRun = { mask: null, until: [] };

/** The run of two matchers' masks applied together (null: either has none): their masks
 * intersected, until either's ends. */
export function bothRuns(a: MaskRun | undefined, b: MaskRun | undefined, words: number): MaskRun | undefined {
  if (!a || !b) return undefined;
  if (a === ANY_ID_RUN) return b;
  if (b === ANY_ID_RUN) return a;
  // runs are values: a pair asked again (a grammar's free reasoning beside the open block's) is one object
  const kept = bothRunsOf.get(a)?.get(b);
  if (kept) return kept;
  const positions = Math.min(a.positions ?? Infinity, b.positions ?? Infinity);
  const run = {
    mask: intersect(a.mask, b.mask, words), until: [...new Set([...a.until, ...b.until])],
    ...(positions < Infinity ? { positions } : {}),
  };
  let byB = bothRunsOf.get(a);
  if (!byB) bothRunsOf.set(a, (byB = new WeakMap()));
  byB.set(b, run);
  return run;
}

const bothRunsOf = new WeakMap<MaskRun, WeakMap<MaskRun, MaskRun>>();

/** A compiled constraint: where every sequence under it starts. Shared by every sequence
 * (e.g. a request's choices); the matchers it starts are per sequence. */
export interface Constraint {
  start(): Matcher;
}

/** Words of a vocabulary bitset of `vocab` ids. */
export const maskWords = (vocab: number): number => Math.ceil(vocab / 32);

/** a & b into a fresh bitset (null = all ids). */
export function intersect(a: Uint32Array | null, b: Uint32Array | null, words: number): Uint32Array | null {
  if (!a) return b;
  if (!b) return a;
  const out = new Uint32Array(words);
  for (let w = 0; w < words; w++) out[w] = (a[w] ?? 0) & (b[w] ?? 0);
  return out;
}
