// Device memory of MTP draft passes (speculative/draft-device.ts): what the
// buffers are, their size at the engine's limits, and the one owner of them per backend.
//
// Buffers of a round of b chains drafting k steps over a V-token draft head (hidden size H,
// c candidates a row), in elements of 4 bytes:
//   logits  [b, V]              f32  the pass step's draft logits: ONE buffer, each step
//                                    overwrites the last; a row read whole (top-p alone) is
//                                    staged (Kernels.stage: read-back staging, no device
//                                    buffer) right after its step, and a row the certificate
//                                    refuses is recomputed by the draft lm_head from its kept
//                                    hidden row (saved) after the pass (draft-device.ts)
//   cands   2 × k·b·c           i32 + f32  topCandidates' ids and values of every pass step
//   ids     2·k·b               i32  picks [k, b] then untouched bests [k, b]
//   saved   k(k+1)/2 · b · H    f32  MTP hidden rows of every step of every pass (a redraft
//                                    pass starts a step later), for redrafts
//   vals    k·b·(1 + T) + b·k(k−1)/2  f32  penaltyPicks' gathered values: per row and pass
//                                    step s (1-based), the best's raw logit, each table id's
//                                    (T at most) and each of the s − 1 earlier drafts'
// T bounds a row's table (penaltyRow: its penalised ids and logit-bias ids, < V): the distinct
// ids of its context (prompt and outputs: at most the engine's max context C) and of the exact
// drafts before the pass (< k), so T = min(V, C + k) when the bias holds no id outside them. A
// logit bias of more ids can pass it: the pass then grows vals to what it needs (penaltiesFor
// in speculative/draft-device.ts, the replaced buffer freed) — never a write past the buffer
// (every backend's penaltyPicks checks the call's values against vals.length).
// Every round is draft-device.ts's (penalised rounds and sampled ones); cands serve sampled
// rounds only, vals rounds with a penalised or biased chain.
//
// Invariants: every buffer is allocated once at its bound (`reserve`, at engine start from
// max running × spec tokens × max context) when the engine's draft passes run on the kernels,
// so a round allocates nothing and the memory plan's `draftBytes` (memory-plan.ts, from
// draftRowBytes at the plan's max context) covers every byte — but for vals past T (a large
// logit bias, above); a buffer used past a reservation (that, or a drafter used without one)
// grows to what the round needs, the old one handed to Kernels.free (GPU buffers are
// destroyed, not left to the collector).
import type { AnyKernels, Tensor } from '../kernels/types.js';
import { MAX_DRAW_CANDIDATES } from '../kernels/candidate-draws.js';

/** The largest draft round: chains (max running), drafts per chain (spec tokens), the draft
 * head's vocabulary, the hidden size, candidates a sampled row reads (≤ MAX_DRAW_CANDIDATES),
 * and the engine's max context (tokens of a request's prompt and outputs). */
export interface DraftPassShape {
  readonly batch: number;
  readonly k: number;
  readonly vocab: number;
  readonly hidden: number;
  readonly candidates: number;
  readonly context: number;
}

/** The ids a penaltyPicks row's table holds at most without a logit bias of other ids: the
 * distinct ids of a context of `context` tokens and of the < k drafts before the pass, < vocab. */
export function penaltyTableBound(vocab: number, context: number, k: number): number {
  return Math.min(vocab, context + k);
}

/** Elements of each draft-pass buffer at the shape (the header's table). */
export function draftPassElems(s: DraftPassShape): { logits: number; cands: number; ids: number; saved: number; vals: number } {
  const { batch: b, k, vocab: v, hidden: h, candidates: c } = s;
  const t = penaltyTableBound(v, s.context, k);
  return { logits: b * v, cands: 2 * k * b * c, ids: 2 * k * b, saved: ((k * (k + 1)) / 2) * b * h, vals: k * b * (1 + t) + (b * k * (k - 1)) / 2 };
}

/** Bytes of every draft-pass buffer at the shape. */
export function draftPassBytes(s: DraftPassShape): number {
  const e = draftPassElems(s);
  return 4 * (e.logits + e.cands + e.ids + e.saved + e.vals);
}

/** Bytes per running request at a max context of `context` tokens (every buffer is linear in
 * the batch): what the plan reserves. */
export function draftRowBytes(k: number, vocab: number, hidden: number, context: number): number {
  return k > 0 ? draftPassBytes({ batch: 1, k, vocab, hidden, candidates: MAX_DRAW_CANDIDATES, context }) : 0;
}

/** Do the engine's MTP draft passes run on the kernels (the penalised or the sampled path:
 * draft.ts's 'auto' is where tensors are device memory; the test hooks force either)? */
export function draftPassesOnKernels(kernels: AnyKernels, forced: { readonly sampledChain?: boolean; readonly penaltyChain?: boolean } = {}): boolean {
  const auto = kernels.limits.deviceMemoryBytes !== null;
  return (forced.sampledChain ?? auto) || (forced.penaltyChain ?? auto);
}

/** One buffer of at least `cap` elements, grown (the old one freed) when a round needs more:
 * to exactly that, or (`doubling`: a need that creeps up round by round, as the penalty
 * values' with a request's outputs) to at least twice the old size, within one binding. */
class Held {
  t: Tensor | null = null;
  cap = 0;

  constructor(private readonly mem: DraftPassMemory, private readonly i32: boolean, private readonly doubling = false) {}

  atLeast(n: number): Tensor {
    if (this.t && this.cap >= n) return this.t;
    const grown = this.t && this.doubling ? Math.min(2 * this.cap, this.mem.bindingElems()) : 0;
    if (this.t) this.mem.release(this.t, this.cap);
    this.cap = Math.max(n, grown, 1);
    this.t = this.mem.allocate(this.cap, this.i32);
    return this.t;
  }
}

/** The draft-pass buffers of one backend (shared by its drafters; a round is one drafter's). */
export class DraftPassMemory {
  readonly ids: Held;
  readonly saved: Held;
  readonly vals: Held;
  readonly candIds: Held;
  readonly candVals: Held;
  /** The pass step's draft logits rows (each step's overwrite the last's). */
  private readonly logits: Held;
  /** Allocations and frees since construction, and the bytes held now. */
  readonly stats = { allocs: 0, frees: 0, bytes: 0 };

  constructor(private readonly k: AnyKernels, private readonly vocab: number) {
    this.ids = new Held(this, true);
    this.saved = new Held(this, false);
    this.vals = new Held(this, false, true);
    this.candIds = new Held(this, true);
    this.candVals = new Held(this, false);
    this.logits = new Held(this, false);
  }

  /** Every buffer at the shape's bound, at once — each at most one binding of the backend
   * (a pass needing more grows it then, as it would without a reservation, and fails as it
   * would past the binding limit): the plan's bytes are an upper bound of what is held. */
  reserve(s: DraftPassShape): void {
    if (s.vocab !== this.vocab) throw new RangeError(`draft memory: a ${s.vocab}-token shape for a ${this.vocab}-token draft head`);
    const e = draftPassElems(s);
    const fit = (n: number): number => Math.min(n, this.bindingElems());
    this.ids.atLeast(fit(e.ids));
    this.saved.atLeast(fit(e.saved));
    this.vals.atLeast(fit(e.vals));
    this.candIds.atLeast(fit(e.cands / 2));
    this.candVals.atLeast(fit(e.cands / 2));
    this.logitsRows(Math.floor(fit(s.batch * this.vocab) / this.vocab));
  }

  /** Elements of 4 bytes one binding of the backend holds (Infinity: no limit). */
  bindingElems(): number {
    const binding = this.k.limits.maxBindingBytes;
    return binding === null ? Infinity : Math.floor(binding / 4);
  }

  /** The draft logits buffer, of at least `rows` rows of the draft vocabulary. */
  logitsRows(rows: number): Tensor {
    return this.logits.atLeast(rows * this.vocab);
  }

  /** @internal Held's allocation, counted. */
  allocate(n: number, i32: boolean): Tensor {
    this.stats.allocs++;
    this.stats.bytes += 4 * n;
    return i32 ? this.k.allocI32(n) : this.k.alloc(n);
  }

  /** @internal A replaced buffer back to the kernels (no pending read of it: a round grows its
   * buffers before it records anything into them). */
  release(t: Tensor, n: number): void {
    this.stats.frees++;
    this.stats.bytes -= 4 * n;
    this.k.free?.(t);
  }
}

const byKernels = new WeakMap<AnyKernels, Map<number, DraftPassMemory>>();

/** The draft-pass buffers of `kernels` for a `vocab`-token draft head (one per backend and head). */
export function draftPassMemory(kernels: AnyKernels, vocab: number): DraftPassMemory {
  let heads = byKernels.get(kernels);
  if (!heads) byKernels.set(kernels, (heads = new Map()));
  let m = heads.get(vocab);
  if (!m) heads.set(vocab, (m = new DraftPassMemory(kernels, vocab)));
  return m;
}
