// Glue between requests and the radix prefix cache: where snapshots are taken, applying
// a hit at admission, and the one path through which every snapshot enters the tree.
//
// Bit-exactness (a hit gives the same bits as a cold run of the same request):
// - Prompt tokens are computed in the chunked Gated DeltaNet form with chunk boundaries at
//   absolute multiples of 64 (GDN_CHUNK), generated tokens by the recurrence. The state
//   after a position depends on where the chunks split, so prompt snapshots are taken only
//   at multiples of 64 — where every run of any prompt passing through them splits too.
//   A hit resumes at the deepest such snapshot and re-prefills the (≤ 64) tokens after it.
// - A snapshot inside generated tokens (decode / verify commit) mixes the two forms:
//   positions [0, P) chunked, [P, p) recurrent (`Snapshot.chunkedTo` = P), and so do the KV
//   rows under it. The radix cache keeps it in a separate namespace (P) so it serves only
//   a request that computes the same split: the same prompt length P and the same tokens
//   up to p (a request recomputing after preemption).
import type { KvPool } from '../cache/kv-pool.js';
import type { RadixCache } from '../cache/radix-cache.js';
import type { StatePool } from '../cache/state-pool.js';
import type { Request } from './request.js';

/** Prompt snapshot positions are multiples of this (= the Gated DeltaNet chunk). */
export const SNAPSHOT_ALIGN = 64;

export interface PrefixContext {
  readonly cache: RadixCache;
  readonly kv: KvPool;
  readonly state: StatePool;
  readonly kvDim: number;
  /** Snapshot every multiple of this many positions (a multiple of 64). */
  readonly interval: number;
  /** The MTP head is on: the page holding position p−1 is copied on a hit, because its
   * MTP KV row depends on the token after the prefix and is recomputed. */
  readonly mtp: boolean;
  /** Snapshots inserted into the tree (a duplicate of an existing one is not counted). */
  inserted: number;
}

const floorAlign = (n: number): number => Math.floor(n / SNAPSHOT_ALIGN) * SNAPSHOT_ALIGN;

/** The aligned prompt positions where a request snapshots besides the interval multiples:
 * the multiple of 64 at or below each boundary (end of every chat message, the prompt's
 * end) and below the prompt's last token (so the same prompt sent again hits, re-prefilling
 * at least its last token to produce the first one). */
export function promptSnapshotPoints(boundaries: readonly number[], promptLength: number): Set<number> {
  const points = new Set<number>();
  for (const b of [...boundaries, promptLength, promptLength - 1]) {
    const p = floorAlign(Math.min(b, promptLength));
    if (p > 0) points.add(p);
  }
  return points;
}

/** Should the state at committed length `pos` be snapshotted? */
export function isSnapshotPoint(ctx: PrefixContext, req: Request, pos: number): boolean {
  if (pos <= 0) return false;
  if (pos > req.promptIds.length) return pos % ctx.interval === 0;
  return pos % SNAPSHOT_ALIGN === 0 && (pos % ctx.interval === 0 || req.snapshotPoints.has(pos));
}

/** The first snapshot point after position `c` (a prefill chunk must end there). */
export function nextSnapshotPoint(ctx: PrefixContext, req: Request, c: number): number {
  let next = (Math.floor(c / ctx.interval) + 1) * ctx.interval;
  if (c < req.promptIds.length) for (const p of req.snapshotPoints) if (p > c && p < next) next = p;
  return next;
}

/** Pages a hit of `length` tokens adds beyond the shared ones (copy-on-write pages). */
export function cowPages(ctx: PrefixContext, length: number): number {
  const partial = length % ctx.kv.pageSize !== 0;
  return partial || ctx.mtp ? 1 : 0;
}

/** Look up `req` (fresh or preempted, nothing computed) and, on a hit, give it the
 * shared pages, copy-on-write the last one, and copy the snapshot into its working slot
 * (already allocated). Returns the cached length. */
export function applyPrefixHit(ctx: PrefixContext, req: Request): number {
  const match = ctx.cache.match(req.tokens, req.tokens.length - 1, req.promptIds.length);
  if (!match) return 0;
  const ps = ctx.kv.pageSize;
  const p = match.length;
  const shared = [...match.pages];
  const cow = ctx.kv.alloc(cowPages(ctx, p));
  if (!cow) {
    ctx.cache.unlock(match.handle);
    return 0;
  }
  if (match.tailPage > 0) ctx.kv.copyPage(cow[0]!, match.tailPage, p % ps, ctx.kvDim);
  else if (cow.length > 0) ctx.kv.copyPage(cow[0]!, shared.pop()!, ps, ctx.kvDim);
  ctx.kv.retain(shared);
  req.pages = [...shared, ...cow];
  ctx.state.copy(req.slot, match.snap.slot);
  req.computed = p;
  // usage counts prompt tokens only (a recompute after preemption may hit generated ones)
  req.cachedTokens = Math.max(req.cachedTokens, Math.min(p, req.promptIds.length));
  req.lockHandle = match.handle;
  req.hitHidden = match.snap.hidden;
  return p;
}

/** A free slot for a new snapshot, evicting old snapshots if needed (0 = none to be had).
 * The caller fills it with the state, then passes it to recordSnapshot. */
export function snapshotSlot(ctx: PrefixContext): number {
  if (ctx.state.freeSlots === 0) ctx.cache.evictSlots(1);
  return ctx.state.alloc() ?? 0;
}

/** The one commit path of every snapshot (prefill, decode, verify accept): `slot` holds
 * `req`'s state at committed length `pos`, `hidden` the target's post-norm hidden at
 * pos−1. The slot passes to the tree, which shares req's pages covering [0, pos). */
export function recordSnapshot(ctx: PrefixContext, req: Request, pos: number, slot: number, hidden: Float32Array): boolean {
  const kept = ctx.cache.insert(req.tokens.slice(0, pos), req.pages, {
    slot, hidden: hidden.slice(), chunkedTo: Math.min(pos, req.promptIds.length),
  });
  if (kept) ctx.inserted++;
  return kept;
}

/** Snapshot the working slot of `req` at its committed length (prefill / decode).
 * Returns whether the tree kept it (false: no slot, or an equal snapshot exists). */
export function snapshotWorking(ctx: PrefixContext, req: Request, hidden: Float32Array): boolean {
  const slot = snapshotSlot(ctx);
  if (slot === 0) return false;
  ctx.state.copy(slot, req.slot);
  return recordSnapshot(ctx, req, req.computed, slot, hidden);
}
