// Glue between requests and the radix prefix cache: where snapshots are taken, applying
// a hit at admission, and the one path through which every snapshot enters the tree.
//
// Bit-exactness (a hit gives the same bits as a cold run of the same request):
// - Prompt tokens are computed in the chunked Gated DeltaNet form, generated tokens by the
//   recurrence. The state (and the KV of later layers) after a position depends on where
//   the chunks split. A prompt splits at every absolute multiple of the chunk (the model's
//   `layout.chunk`, 64), and at the request's own split points (`Request.splits`): the end
//   of every message of a chat prompt and the prompt's end. Whether a position splits
//   depends only on tokens at or before it, so turn 1's chunking is a prefix of turn 2's.
// - The cache key of a prompt token is (id, "a chunk ends right after it"), the second part
//   set for the request's own splits (multiples of the chunk split in every run). Two
//   requests share a cached node only when they computed it with the same splits, and a
//   snapshot at p matches only a request that splits at p (the flag of token p−1) — so a
//   hit resumes exactly where a cold run of the request has a chunk boundary.
// - A hit covering the whole prompt prefills nothing: the first token is sampled from the
//   lm_head over the snapshot's stored hidden (runner.ts), as bit-exact as the state.
// - A snapshot inside generated tokens (decode / verify commit) mixes the two forms:
//   positions [0, P) chunked, [P, p) recurrent (`Snapshot.chunkedTo` = P), and so do the KV
//   rows under it. The radix cache keeps it in a separate namespace (P) so it serves only
//   a request that computes the same split: the same prompt length P and the same tokens
//   up to p (a request recomputing after preemption).
import type { Tensor } from '../kernels/types.js';
import type { KvPool } from '../cache/kv-pool.js';
import type { RadixCache } from '../cache/radix-cache.js';
import type { StatePool } from '../cache/state-pool.js';
import type { TextTokenizer } from '../tokenizer/tokenizer.js';
import { Rng } from '../util/rng.js';
import { markerRest, messageEnds } from '../frontend/message-ends.js';
import { OutputText } from './output.js';
import { Request, type RequestView } from './request.js';
import { TokenHistory } from './sampler.js';
import { imageKey } from './vision.js';

/** T: the pools' tensors (the kernels' handles; host arrays in pool-only tests). */
export interface PrefixContext<T extends Tensor = Tensor> {
  readonly cache: RadixCache;
  readonly kv: KvPool<T>;
  readonly state: StatePool<T>;
  readonly kvDim: number;
  /** The Gated DeltaNet chunk (model layout): its multiples split every prefill. */
  readonly chunk: number;
  /** Snapshot every multiple of this many positions (a multiple of the chunk). */
  readonly interval: number;
  /** The MTP head is on: the page holding position p−1 is copied on a hit, because its
   * MTP KV row depends on the token after the prefix and is recomputed. */
  readonly mtp: boolean;
  /** Snapshots inserted into the tree (a duplicate of an existing one is not counted). */
  inserted: number;
}

/** A request's own split points: the message ends within the prompt and its end. */
export function promptSplits(messageEnds: readonly number[], promptLength: number): number[] {
  const inside = messageEnds.filter((b) => Number.isInteger(b) && b > 0 && b < promptLength);
  return [...new Set([...inside, promptLength])].sort((a, b) => a - b);
}

/** Prompt positions to snapshot besides the interval multiples: the end of the first
 * message (system + tools preamble, shared across conversations), of the last message
 * (where the next turn of the conversation resumes), the prompt's end (the same prompt
 * again prefills nothing) and the multiple of the chunk below it (a longer prompt that
 * extends this one, without a split at its end, resumes there). */
export function promptSnapshotPoints(messageEnds: readonly number[], promptLength: number, chunk: number): Set<number> {
  const ends = promptSplits(messageEnds, promptLength).filter((b) => b < promptLength);
  const points = new Set<number>([promptLength]);
  const below = Math.floor((promptLength - 1) / chunk) * chunk;
  if (below > 0) points.add(below);
  if (ends.length > 0) {
    points.add(ends[0]!);
    points.add(ends[ends.length - 1]!);
  }
  return points;
}

/** The last split point of `req` in (c, end], or c when there is none (a chunk that must
 * stop by `end` ends there). */
export function lastSplitBy(req: RequestView, c: number, end: number, chunk: number): number {
  let best = Math.floor(end / chunk) * chunk;
  for (const p of req.splits) if (p <= end && p > best) best = p;
  return Math.max(best, c);
}

/** The radix key of `req`'s first `end` tokens: id·2 + 1 when a chunk ends right after
 * the token at one of the request's own splits (see the file head); an image token's id is
 * replaced by its image's key (vision.ts imageKey: negative, from the pixel hash). */
export function prefixKey(req: RequestView, end: number, chunk: number): number[] {
  const key = req.tokens.slice(0, end).map((t) => t * 2);
  const v = req.vision;
  if (v) for (let i = 0; i < Math.min(end, v.imageOf.length); i++) if (v.imageOf[i]! >= 0) key[i] = imageKey(v.images[v.imageOf[i]!]!);
  for (const p of req.splits) if (p <= end && p % chunk !== 0) key[p - 1] = key[p - 1]! + 1;
  return key;
}

/** Should the state at committed length `pos` be snapshotted? */
export function isSnapshotPoint(ctx: PrefixContext, req: RequestView, pos: number): boolean {
  if (pos <= 0) return false;
  if (pos > req.promptIds.length) return pos % ctx.interval === 0;
  return pos % ctx.interval === 0 || req.snapshotPoints.has(pos);
}

/** May the step's update snapshot `row` (prefix.ts snapshotWorking, or a verify round's
 * tracked point)? Only then does the step read its hidden rows back: a snapshot point lies
 * among the committed lengths the row can reach, (start, start + n]. */
export function rowMaySnapshot(ctx: PrefixContext, row: { readonly req: RequestView | null; readonly start: number; readonly n: number }): boolean {
  for (let pos = row.start + 1; pos <= row.start + row.n; pos++) if (isSnapshotPoint(ctx, row.req!, pos)) return true;
  return false;
}

/** The first snapshot point after position `c` (a prefill chunk must end there). */
export function nextSnapshotPoint(ctx: PrefixContext, req: RequestView, c: number): number {
  let next = (Math.floor(c / ctx.interval) + 1) * ctx.interval;
  if (c < req.promptIds.length) for (const p of req.snapshotPoints) if (p > c && p < next) next = p;
  return next;
}

/** Pages a hit of `length` tokens adds beyond the shared ones (copy-on-write pages). */
export function cowPages(ctx: PrefixContext, length: number): number {
  const partial = length % ctx.kv.pageSize !== 0;
  return partial || ctx.mtp ? 1 : 0;
}

/** A usable cached prefix of a request: its first `length` positions. */
export interface PrefixHit {
  readonly length: number;
  /** The request's page table covering [0, length): shared pages (retained for it), then
   * its own copy of the last one when that is partial or holds the MTP row length−1. */
  readonly pages: number[];
  /** The radix lock the request holds while it runs. */
  readonly handle: object;
  /** Target hidden at length−1 (MTP input; the lm_head input of a whole-prompt hit). */
  readonly hidden: Float32Array;
}

/** Look up `req` (fresh or preempted, nothing computed) and, on a hit, retain the shared
 * pages, copy-on-write the last one, and copy the snapshot into its working slot (already
 * allocated). The scheduler applies the result to the request (it alone writes progress). */
export function findPrefixHit(ctx: PrefixContext, req: RequestView): PrefixHit | null {
  const n = req.tokens.length;
  // a fresh prompt may hit whole (its first token then comes from the stored hidden); a
  // recompute after preemption must process its last token, whose successor is unknown
  const maxLen = n === req.promptIds.length ? n : n - 1;
  const match = ctx.cache.match(prefixKey(req, n, ctx.chunk), maxLen, req.promptIds.length);
  if (!match) return null;
  const ps = ctx.kv.pageSize;
  const p = match.length;
  const shared = [...match.pages];
  const cow = ctx.kv.alloc(cowPages(ctx, p));
  if (!cow) {
    ctx.cache.unlock(match.handle);
    return null;
  }
  if (match.tailPage > 0) ctx.kv.copyPage(cow[0]!, match.tailPage, p % ps, ctx.kvDim);
  else if (cow.length > 0) ctx.kv.copyPage(cow[0]!, shared.pop()!, ps, ctx.kvDim);
  ctx.kv.retain(shared);
  ctx.state.copy(req.slot, match.snap.slot);
  return { length: p, pages: [...shared, ...cow], handle: match.handle, hidden: match.snap.hidden };
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
export function recordSnapshot(ctx: PrefixContext, req: RequestView, pos: number, slot: number, hidden: Float32Array): boolean {
  const kept = ctx.cache.insert(prefixKey(req, pos, ctx.chunk), req.pages, {
    slot, hidden: hidden.slice(), chunkedTo: Math.min(pos, req.promptIds.length),
  });
  if (kept) ctx.inserted++;
  return kept;
}

/** Snapshot the working slot of `req` at its committed length (prefill / decode).
 * Returns whether the tree kept it (false: no slot, or an equal snapshot exists). */
export function snapshotWorking(ctx: PrefixContext, req: RequestView, hidden: Float32Array): boolean {
  const slot = snapshotSlot(ctx);
  if (slot === 0) return false;
  ctx.state.copy(slot, req.slot);
  return recordSnapshot(ctx, req, req.computed, slot, hidden);
}

/** Give `req` its split and snapshot points from the message ends of its prompt. */
export function setPromptPoints(req: Request, ends: readonly number[], chunk: number): void {
  const n = req.promptIds.length;
  req.splits = promptSplits(ends, n);
  req.messageEnds = req.splits.filter((b) => b < n || ends.includes(b));
  req.snapshotPoints = promptSnapshotPoints(ends, n, chunk);
}

/** End of a generation (Engine.emitDone): queue, through `queue`, the internal request that
 * snapshots the conversation so far in the chunked form — the state the generation left was
 * made by the recurrence, which rounds differently from the chunked prefill the next turn's
 * cold run uses, so it is not reusable bit-exactly. The request hits the prompt's snapshot,
 * prefills the generated tokens, snapshots at its points (interval multiples, its end) and
 * finishes without sampling or output: a prefill of the generated tokens. For a chat prompt,
 * an answer ending inside the template's message-end marker (`<|im_end|>`) gets the rest of
 * it (`\n`) and the prompt's message ends: the snapshot then sits at the end of the assistant
 * message as the next turn renders it, with the same splits before it (message-ends.ts).
 * An answer cut by a length limit is rendered closed by the next turn, so nothing after
 * the prompt would match; a raw prompt is snapshotted when the output passes a multiple of
 * the chunk (a next prompt may extend this one). */
export function queueGenerationSnapshot(ctx: PrefixContext, req: RequestView, tok: TextTokenizer, id: number, maxContext: number,
  queue: (r: Request) => void): void {
  const chat = req.messageEnds.length > 0;
  const rest = chat ? markerRest(tok, req.tokens) : [];
  const c = ctx.chunk;
  if (rest === null || (!chat && Math.floor(req.tokens.length / c) <= Math.floor(req.promptIds.length / c))) return;
  const ids = [...req.tokens, ...rest];
  if (req.numGenerated === 0 || ids.length >= maxContext) return;
  const ends = chat ? [...req.messageEnds, ...messageEnds(tok, ids).filter((b) => b > req.promptIds.length)] : [];
  const r = new Request(id, id, ids, 1, ids.length + 1, {
    temperature: 0, topK: 0, topP: 1, minP: 0, repetitionPenalty: 1, presencePenalty: 0, frequencyPenalty: 0,
  }, new Rng(0), new Rng(1), new TokenHistory([]), new OutputText(() => '', [], new Set(), []));
  r.snapshotOnly = true;
  r.vision = req.vision; // the same images at the same places (positions past the prompt: i + delta)
  setPromptPoints(r, ends, c);
  queue(r);
}
