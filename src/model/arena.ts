// The step arena: every scratch tensor the forward, the LM head and the MTP head use
// between kernel calls, each a named field with its row shape (comments: [rows, width]).
// Each field owns its own allocation, so no two live tensors can alias; a field is grown
// on demand (never shrunk) and `rows(n)` views its first n rows. Reused step after step,
// so the hot path does not allocate backend memory.
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

/** Rows of `width` elements of one scratch tensor. */
export class ScratchRows<T extends Tensor> {
  private buf: T | null = null;
  private cap = 0;

  constructor(private readonly k: Kernels<T, Tensor>, readonly width: number) {}

  /** [n, width]: the first n rows (contents are whatever the last user left). */
  rows(n: number): T {
    if (!this.buf || n > this.cap) {
      this.cap = Math.max(n, 1);
      this.buf = this.k.alloc(this.cap * this.width);
    }
    return this.k.view(this.buf, 0, n * this.width);
  }
}

/** An int32 scratch tensor of at least n elements. */
export class ScratchInts<I extends Tensor> {
  private buf: I | null = null;

  constructor(private readonly k: Kernels<Tensor, I>) {}

  atLeast(n: number): I {
    if (!this.buf || n > this.buf.length) this.buf = this.k.allocI32(Math.max(n, 16));
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
  readonly draftLogits: ScratchRows<T>; // [R, V] MTP draft logits
  readonly draftHidden: ScratchRows<T>; // [R, H] the MTP outputs the next draft step reads
  readonly host: { readonly ids: HostInts; readonly positions: HostInts; readonly mtpIds: HostInts };

  constructor(model: ArenaModel<T, I>) {
    const k = model.kernels;
    const cfg = model.config;
    const f = (width: number): ScratchRows<T> => new ScratchRows(k, width);
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
    this.gdn = {
      qkv: f(convDim(cfg)), conv: f(convDim(cfg)), z: f(vd), o: f(vd), oPerm: f(vd), a: f(hv), b: f(hv), g: f(hv), beta: f(hv),
    };
    this.attn = { qg: f(qg), q: f(qd), gate: f(qd), k: f(kvd), v: f(kvd), o: f(qd) };
    this.mlp = { gate: f(maxOf(dense)), up: f(maxOf(dense)) };
    this.moe = {
      logits: f(maxOf(moes.map((m) => m.router.rows))), ids: new ScratchInts(k), weights: f(topK), slot: f(topK * h),
      rowsIn: f(h), rowsOut: f(h), gate: f(maxOf(experts)), up: f(maxOf(experts)),
      sharedGate: f(maxOf(shared)), sharedUp: f(maxOf(shared)), sharedOut: f(h), sharedLogit: f(1),
    };
    this.mtp = { cat: f(2 * h), e: f(h), h: f(h), x: f(h), out: f(h) };
    this.head = { in: f(h), out: f(v) };
    this.logits = f(v);
    this.hit = { hidden: f(h), logits: f(v) };
    this.draftLogits = f(v);
    this.draftHidden = f(h);
    this.host = { ids: new HostInts(), positions: new HostInts(), mtpIds: new HostInts() };
  }
}
