// Glue between requests and the radix prefix cache: applying a hit at admission and
// taking snapshots as a request's committed length crosses a snapshot point.
import type { KvPool } from '../cache/kv-pool.js';
import type { RadixCache } from '../cache/radix-cache.js';
import type { StatePool } from '../cache/state-pool.js';
import type { Request } from './request.js';

export interface PrefixContext {
  readonly cache: RadixCache;
  readonly kv: KvPool;
  readonly state: StatePool;
  readonly kvDim: number;
  /** Snapshot every multiple of this many positions. */
  readonly interval: number;
  /** The MTP head is on: the page holding position p−1 is copied on a hit, because its
   * MTP KV row depends on the token after the prefix and is recomputed. */
  readonly mtp: boolean;
}

/** Pages a hit of `length` tokens adds beyond the shared ones (copy-on-write pages). */
export function cowPages(ctx: PrefixContext, length: number): number {
  const partial = length % ctx.kv.pageSize !== 0;
  return partial || ctx.mtp ? 1 : 0;
}

/** Look up `req` (fresh or preempted, nothing computed) and, on a hit that fits in
 * `freePages`, give it the shared pages, copy-on-write the last one, and copy the
 * snapshot into its working slot (already allocated). Returns the cached length. */
export function applyPrefixHit(ctx: PrefixContext, req: Request): number {
  const match = ctx.cache.match(req.tokens, req.tokens.length - 1);
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
  req.cachedTokens = Math.max(req.cachedTokens, p);
  req.lockHandle = match.handle;
  req.hitHidden = match.snap.hidden;
  return p;
}

/** A slot for a new snapshot, evicting old snapshots if needed (0 = none to be had). */
export function snapshotSlot(ctx: PrefixContext): number {
  if (ctx.state.freeSlots === 0) ctx.cache.evictSlots(1);
  return ctx.state.alloc() ?? 0;
}

/** Should the state at committed length `pos` be snapshotted? */
export function isSnapshotPoint(ctx: PrefixContext, req: Request, pos: number): boolean {
  return pos > 0 && (pos % ctx.interval === 0 || pos === req.promptIds.length || pos === req.snapshotAt);
}

/** Snapshot the working slot of `req` at its committed length (prefill / decode). */
export function snapshotWorking(ctx: PrefixContext, req: Request, hidden: Float32Array): void {
  const slot = snapshotSlot(ctx);
  if (slot === 0) return;
  ctx.state.copy(slot, req.slot);
  ctx.cache.insert(req.tokens.slice(0, req.computed), req.pages, { slot, hidden: hidden.slice() });
}
