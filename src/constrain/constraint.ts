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
  /** The mask of every later position, when it can no longer change whatever allowed ids
   * follow (then it is mask()); undefined when it may. The engine lets such a request's MTP
   * rounds stay on the kernels under that one mask (engine/logits-adjust.ts fixedMaskOf). */
  fixedMask?(): Uint32Array | undefined;
}

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
