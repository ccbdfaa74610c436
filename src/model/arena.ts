// The step arena: every scratch tensor the forward, the LM head and the MTP head use
// between kernel calls, each a named field with its row shape (comments: [rows, width]).
// Each field owns its own allocation, so no two live tensors can alias; `rows(n)` views a
// field's first n rows. Reused step after step, so the hot path does not allocate.
//
// Invariants: the engine reserves every field at its bound (`reserve`, at engine start, from
// the engine's limits: `ArenaLimits`), and the memory plan counts those bytes (`arenaBytes`,
// memory-plan.ts), so a run allocates nothing; a field used past its reservation (a bound
// that was wrong, or a caller without one: probe, bench) grows, and the buffer it replaces
// goes to Kernels.free (a GPU buffer is destroyed once recorded work no longer reads it).
// Host int rows (HostInts) are JS heap, reserved too but not counted (4 bytes a token).
import type { Kernels, Tensor } from '../kernels/types.js';
import { convDim, type ModelConfig } from './config.js';
import type { ExpertWeights, LayerWeights, ModelWeights } from './weights.js';

/** What the arena is sized from: the parts of a loaded Model (model.ts) it reads. Stated
 * here rather than imported so that the arena, which layers.ts reads, does not depend on
 * model.ts, which depends on layers.ts (no import cycle). */
export interface ArenaModel<T extends Tensor, I extends Tensor> {
  readonly kernels: Kernels<T, I>;
  readonly config: ModelConfig;
  readonly weights: ModelWeights;
}

/** The engine's limits the arena's rows follow from. */
export interface ArenaLimits {
  /** Requests in a step at most (--max-running): the batch's rows. */
  readonly maxRunning: number;
  /** MTP drafts a round (0: no speculation, the MTP head never runs). */
  readonly specTokens: number;
  /** Prompt tokens a step processes at most (--max-prefill-tokens). */
  readonly maxPrefillTokens: number;
  /** Whole-prompt prefix hits may take logits from a stored hidden row. */
  readonly prefixCache: boolean;
  /** MTP drafts may stay on the kernels until the verify that reads them (a GPU:
   * engine/speculative/pending-drafts.ts): the verify embeds through `mixedEmbed`. */
  readonly deferredDrafts?: boolean;
  /** Columns the MTP draft head reads (--draft-vocab, capped at the vocabulary): the width of
   * the draft logits rows (default: the whole vocabulary). */
  readonly draftVocab?: number;
}

/** Rows of each kind of arena tensor at the limits (each affine in maxRunning). */
export function arenaRows(l: ArenaLimits): { step: number; mtp: number; logits: number; hits: number; chains: number } {
  const n = l.maxRunning;
  const k = l.specTokens;
  // a step: every prefill chunk within the token budget, plus a decode / verify row of 1 + k
  // tokens per other request (bounded by one per running request)
  const step = l.maxPrefillTokens + n * (1 + k);
  return {
    step,
    // the MTP extend: the step's rows plus, per row, the position before a prefix hit
    mtp: k > 0 ? step + n : 0,
    logits: n * (1 + k), // a verify row reads 1 + k logits rows, any other row one at most
    hits: l.prefixCache ? n : 0,
    chains: k > 0 ? n : 0, // draft chains: one a request
  };
}

/** Allocations, frees and bytes held of one arena's device tensors. */
export interface ArenaStats { allocs: number; frees: number; bytes: number }

/** Rows of `width` elements of one scratch tensor. */
export class ScratchRows<T extends Tensor> {
  private buf: T | null = null;
  private cap = 0;

  constructor(private readonly k: Kernels<T, Tensor>, readonly width: number, private readonly stats: ArenaStats) {}

  /** Give the buffer back (Kernels.free); the next use allocates again. */
  release(): void {
    if (!this.buf) return;
    this.stats.frees++;
    this.stats.bytes -= 4 * this.cap * this.width;
    this.k.free?.(this.buf);
    this.buf = null;
    this.cap = 0;
  }

  /** [n, width]: the first n rows (contents are whatever the last user left). */
  rows(n: number): T {
    return this.k.view(this.atLeast(n), 0, n * this.width);
  }

  /** The buffer, of at least n rows (a larger one replaces it, the old one freed). */
  atLeast(n: number): T {
    if (this.buf && n <= this.cap) return this.buf;
    this.release();
    this.cap = Math.max(n, 1);
    this.buf = this.k.alloc(this.cap * this.width);
    this.stats.allocs++;
    this.stats.bytes += 4 * this.cap * this.width;
    return this.buf;
  }
}

/** An int32 scratch tensor of at least n elements. */
export class ScratchInts<I extends Tensor> {
  private buf: I | null = null;

  constructor(private readonly k: Kernels<Tensor, I>, private readonly stats: ArenaStats) {}

  atLeast(n: number): I {
    if (this.buf && n <= this.buf.length) return this.buf;
    if (this.buf) {
      this.stats.frees++;
      this.stats.bytes -= 4 * this.buf.length;
      this.k.free?.(this.buf);
    }
    this.buf = this.k.allocI32(Math.max(n, 16));
    this.stats.allocs++;
    this.stats.bytes += 4 * this.buf.length;
    return this.buf;
  }
}

/** Host int32 rows (token ids, positions): plain memory the kernels read as ArrayLike. */
export class HostInts {
  private buf = new Int32Array(16);

  rows(n: number): Int32Array {
    if (n > this.buf.length) this.buf = new Int32Array(n);
    return this.buf.subarray(0, n);
  }
}

function maxOf(xs: readonly number[]): number {
  return xs.reduce((a, b) => Math.max(a, b), 1);
}

/** Every decoder layer of the model, the MTP layers included. */
function allLayers(model: ArenaModel<Tensor, Tensor>): LayerWeights[] {
  return [...model.weights.layers, ...model.weights.mtp.map((m) => m.layer)];
}

export class StepArena<T extends Tensor = Float32Array, I extends Tensor = Int32Array> {
  // decoder stack: [M, H]
  readonly x: ScratchRows<T>; // residual stream
  readonly normed: ScratchRows<T>;
  readonly mixed: ScratchRows<T>;
  readonly hidden: ScratchRows<T>; // after the final norm
  readonly mixedEmbed: ScratchRows<T>; // [M + chains·k, H] a verify step's embeddings, its drafts' ids on the kernels (forward.ts embedMixed)
  readonly gdn: {
    readonly qkv: ScratchRows<T>; // [M, convDim] pre-conv
    readonly conv: ScratchRows<T>; // [M, convDim] post-conv
    readonly z: ScratchRows<T>; // [M, HV·dv]
    readonly o: ScratchRows<T>; // [M, HV·dv]
    readonly oPerm: ScratchRows<T>; // [M, HV·dv] head blocks in out_proj's column order
    readonly a: ScratchRows<T>; // [M, HV]
    readonly b: ScratchRows<T>; // [M, HV]
    readonly g: ScratchRows<T>; // [M, HV]
    readonly beta: ScratchRows<T>; // [M, HV]
  };
  readonly attn: {
    readonly qg: ScratchRows<T>; // [M, nH·2hd] query then gate per head (or [M, nH·hd])
    readonly q: ScratchRows<T>; // [M, nH·hd]
    readonly gate: ScratchRows<T>; // [M, nH·hd]
    readonly k: ScratchRows<T>; // [M, nKV·hd]
    readonly v: ScratchRows<T>; // [M, nKV·hd]
    readonly o: ScratchRows<T>; // [M, nH·hd]
  };
  readonly mlp: { readonly gate: ScratchRows<T>; readonly up: ScratchRows<T> }; // [M, I]
  readonly moe: {
    readonly logits: ScratchRows<T>; // [M, E]
    readonly ids: ScratchInts<I>; // [M·topK]
    readonly weights: ScratchRows<T>; // [M, topK]
    readonly slot: ScratchRows<T>; // [M, topK·H]
    readonly rowsIn: ScratchRows<T>; // [M, H]
    readonly rowsOut: ScratchRows<T>; // [M, H]
    readonly gate: ScratchRows<T>; // [M, Ie]
    readonly up: ScratchRows<T>; // [M, Ie]
    readonly sharedGate: ScratchRows<T>; // [M, Is]
    readonly sharedUp: ScratchRows<T>; // [M, Is]
    readonly sharedOut: ScratchRows<T>; // [M, H]
    readonly sharedLogit: ScratchRows<T>; // [M, 1]
  };
  readonly mtp: {
    readonly cat: ScratchRows<T>; // [M, 2H] normed embedding | normed hidden
    readonly e: ScratchRows<T>; // [M, H]
    readonly h: ScratchRows<T>; // [M, H]
    readonly x: ScratchRows<T>; // [M, H]
    readonly out: ScratchRows<T>; // [M, H]
  };
  readonly head: { readonly in: ScratchRows<T>; readonly out: ScratchRows<T> }; // [R, H], [R, V]
  readonly logits: ScratchRows<T>; // [R, V] the engine step's logits rows
  readonly hit: { readonly hidden: ScratchRows<T>; readonly logits: ScratchRows<T> }; // [Z, H], [Z, V] whole-prompt prefix hits
  /** [R, Vd] MTP draft logits: Vd the draft head's columns (ArenaLimits.draftVocab; until
   * `reserve` sets it, the whole vocabulary). */
  get draftLogits(): ScratchRows<T> {
    return this.draft;
  }
  private draft: ScratchRows<T>;
  readonly draftHidden: ScratchRows<T>; // [R, H] the MTP outputs the next draft step reads
  readonly host: { readonly ids: HostInts; readonly positions: HostInts; readonly mtpIds: HostInts };
  /** The device tensors' allocations, frees and bytes held (host rows not included). */
  readonly stats: ArenaStats = { allocs: 0, frees: 0, bytes: 0 };
  /** Which fields the model's layers use (an unused one is never reserved). */
  private readonly uses: ArenaUses;

  constructor(private readonly model: ArenaModel<T, I>) {
    const k = model.kernels;
    const cfg = model.config;
    const f = (width: number): ScratchRows<T> => new ScratchRows(k, width, this.stats);
    const h = cfg.hiddenSize;
    const vd = cfg.linNumValueHeads * cfg.linValueDim;
    const hv = cfg.linNumValueHeads;
    const qd = cfg.numHeads * cfg.headDim;
    const kvd = cfg.numKvHeads * cfg.headDim;
    const layers = allLayers(model);
    const mlps = layers.map((l) => l.mlp);
    const dense = mlps.flatMap((m) => (m.kind === 'dense' ? [m.gate.rows] : []));
    const moes = mlps.flatMap((m) => (m.kind === 'moe' ? [m] : []));
    const experts = moes.flatMap((m) => m.experts.map((e: ExpertWeights) => e.gate.rows));
    const shared = moes.flatMap((m) => (m.shared ? [m.shared.gate.rows] : []));
    const topK = maxOf(moes.map((m) => m.topK));
    const qg = maxOf(layers.flatMap((l) => (l.mixer.kind === 'full' ? [l.mixer.qProj.rows] : [])));
    const v = model.weights.lmHead.rows;
    this.x = f(h);
    this.normed = f(h);
    this.mixed = f(h);
    this.hidden = f(h);
    this.mixedEmbed = f(h);
    this.gdn = {
      qkv: f(convDim(cfg)), conv: f(convDim(cfg)), z: f(vd), o: f(vd), oPerm: f(vd), a: f(hv), b: f(hv), g: f(hv), beta: f(hv),
    };
    this.attn = { qg: f(qg), q: f(qd), gate: f(qd), k: f(kvd), v: f(kvd), o: f(qd) };
    this.mlp = { gate: f(maxOf(dense)), up: f(maxOf(dense)) };
    this.moe = {
      logits: f(maxOf(moes.map((m) => m.router.rows))), ids: new ScratchInts(k, this.stats), weights: f(topK), slot: f(topK * h),
      rowsIn: f(h), rowsOut: f(h), gate: f(maxOf(experts)), up: f(maxOf(experts)),
      sharedGate: f(maxOf(shared)), sharedUp: f(maxOf(shared)), sharedOut: f(h), sharedLogit: f(1),
    };
    this.mtp = { cat: f(2 * h), e: f(h), h: f(h), x: f(h), out: f(h) };
    this.head = { in: f(h), out: f(v) };
    this.logits = f(v);
    this.hit = { hidden: f(h), logits: f(v) };
    this.draft = f(v);
    this.draftHidden = f(h);
    this.host = { ids: new HostInts(), positions: new HostInts(), mtpIds: new HostInts() };
    this.uses = usesOf(model);
  }

  /** Every device tensor with its rows at the limits (rows 0: the engine never uses it). */
  bounds(l: ArenaLimits): { readonly t: ScratchRows<T> | ScratchInts<I>; readonly rows: number; readonly width: number }[] {
    this.draftWidth(l);
    const r = arenaRows(l);
    const u = this.uses;
    // a decoder layer's rows: the main stack's step, and the MTP layer's extend when it runs
    const layer = (main: boolean, mtp: boolean): number => Math.max(main ? r.step : 0, mtp ? r.mtp : 0);
    const gdn = layer(u.linear.main, u.linear.mtp);
    const attn = layer(u.full.main, u.full.mtp);
    const dense = layer(u.dense.main, u.dense.mtp);
    const moe = layer(u.moe.main, u.moe.mtp);
    const shared = layer(u.shared.main, u.shared.mtp);
    const any = layer(true, r.mtp > 0);
    const topK = this.moe.weights.width;
    const rows: [ScratchRows<T>, number][] = [
      [this.x, r.step], [this.normed, any], [this.mixed, any], [this.hidden, r.step],
      [this.mixedEmbed, l.deferredDrafts && l.specTokens > 0 ? r.step + r.chains * l.specTokens : 0],
      ...[this.gdn.qkv, this.gdn.conv, this.gdn.z, this.gdn.o, this.gdn.a, this.gdn.b, this.gdn.g, this.gdn.beta].map((t) => [t, gdn] as [ScratchRows<T>, number]),
      [this.gdn.oPerm, layer(u.permuted.main, u.permuted.mtp)],
      [this.attn.qg, attn], [this.attn.k, attn], [this.attn.v, attn], [this.attn.o, attn],
      [this.attn.q, u.gated ? attn : 0], [this.attn.gate, u.gated ? attn : 0],
      [this.mlp.gate, dense], [this.mlp.up, dense],
      ...[this.moe.logits, this.moe.weights, this.moe.slot, this.moe.rowsIn, this.moe.rowsOut, this.moe.gate, this.moe.up].map((t) => [t, moe] as [ScratchRows<T>, number]),
      ...[this.moe.sharedGate, this.moe.sharedUp, this.moe.sharedOut, this.moe.sharedLogit].map((t) => [t, shared] as [ScratchRows<T>, number]),
      ...[this.mtp.cat, this.mtp.e, this.mtp.h, this.mtp.x, this.mtp.out].map((t) => [t, r.mtp] as [ScratchRows<T>, number]),
      // an lm_head call over rows that are not contiguous gathers them first (forward.ts lmHeadInto)
      [this.head.in, Math.max(r.logits, r.hits, r.chains)], [this.head.out, 0], // head.out: lmHead (probe, bench) only
      [this.logits, r.logits],
      [this.hit.hidden, r.hits + 1], [this.hit.logits, r.hits], // + 1: the deepstack row of a vision step
      [this.draftLogits, r.chains], [this.draftHidden, r.chains],
    ];
    // the routed experts' ids: topK a row, at least 16 (ScratchInts' floor)
    const ids = moe > 0 ? [{ t: this.moe.ids, rows: Math.max(moe * topK, 16), width: 1 }] : [];
    return [...rows.map(([t, n]) => ({ t, rows: n, width: t.width })), ...ids];
  }

  /** The draft logits rows `l.draftVocab` wide (the buffer they replace is freed). */
  private draftWidth(l: ArenaLimits): void {
    const v = this.model.weights.lmHead.rows;
    const w = Math.min(l.draftVocab ?? v, v);
    if (!(Number.isInteger(w) && w >= 1 && w <= v)) throw new RangeError(`arena: a ${w}-column draft head over a ${v}-token vocabulary`);
    if (w === this.draft.width) return;
    this.draft.release();
    this.draft = new ScratchRows(this.model.kernels, w, this.stats);
  }

  /** Device bytes of every tensor at its bound (what `reserve` holds, binding caps aside). */
  boundBytes(l: ArenaLimits): number {
    return this.bounds(l).reduce((sum, b) => sum + 4 * b.rows * b.width, 0);
  }

  /** Allocate every tensor at its bound, once, each at most one binding of the backend (a
   * step needing more grows it then, and fails as it would past the binding limit). */
  reserve(l: ArenaLimits): void {
    const binding = this.model.kernels.limits.maxBindingBytes;
    for (const b of this.bounds(l)) {
      if (b.rows === 0) continue;
      const fit = binding === null ? b.rows : Math.max(1, Math.min(b.rows, Math.floor(binding / (4 * b.width))));
      b.t.atLeast(fit);
    }
    const r = arenaRows(l);
    this.host.ids.rows(r.step);
    this.host.positions.rows(Math.max(r.step, r.mtp));
    this.host.mtpIds.rows(r.mtp);
  }
}

/** Which arena fields the model's layers use: in the main stack, in the MTP layers. */
interface ArenaUses {
  readonly linear: Where; readonly full: Where; readonly permuted: Where;
  readonly dense: Where; readonly moe: Where; readonly shared: Where;
  readonly gated: boolean;
}
interface Where { readonly main: boolean; readonly mtp: boolean }

function usesOf(model: ArenaModel<Tensor, Tensor>): ArenaUses {
  const main = model.weights.layers;
  const mtp = model.weights.mtp.map((m) => m.layer);
  const where = (p: (l: LayerWeights) => boolean): Where => ({ main: main.some(p), mtp: mtp.some(p) });
  return {
    linear: where((l) => l.mixer.kind === 'linear'),
    full: where((l) => l.mixer.kind === 'full'),
    permuted: where((l) => l.mixer.kind === 'linear' && l.mixer.outProjHeadOrder !== undefined),
    dense: where((l) => l.mlp.kind === 'dense'),
    moe: where((l) => l.mlp.kind === 'moe'),
    shared: where((l) => l.mlp.kind === 'moe' && l.mlp.shared !== null && l.mlp.sharedGate !== null), // layers.ts moe()
    gated: model.config.attnOutputGate !== false,
  };
}

/** Device bytes of the model's arena at the limits (memory-plan.ts counts them). */
export function arenaBytes(model: ArenaModel<Tensor, Tensor>, l: ArenaLimits): number {
  return new StepArena(model).boundBytes(l); // sizes only: a field allocates when first used
}
