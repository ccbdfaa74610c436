// MTP drafting (DESIGN.md §4). After every target step, for each request:
//   extend — the MTP head runs over the positions the step committed, position t fed
//            (target hidden h_t, token x_{t+1}), so the MTP KV always matches the
//            committed tokens; its last output predicts d_1;
//   draft  — k−1 more single-token MTP steps, each fed the previous MTP output and draft.
// Batched across requests. Drafts of greedy requests are argmax picks; sampling requests
// draw d_i from q_i (the request's sampling transform of the MTP logits), kept for the
// rejection test.
import type { KvPool } from '../../cache/kv-pool.js';
import { lmHeadInto, mtpForward, readNow, type MtpSeqInput } from '../../model/forward.js';
import type { StepArena } from '../../model/arena.js';
import type { AnyModel } from '../../model/model.js';
import { type Argmax, isGreedy, sampleToken } from '../sampler.js';
import { BatchSampler, type SampleJob, toProbs } from '../sample-batch.js';
import type { Tensor, Weight } from '../../kernels/types.js';
import type { Request } from '../request.js';
import { adjustInPlace } from '../logits-adjust.js';

export interface ExtendInput {
  readonly req: Request;
  /** MTP positions [start, start + n) are (re)computed from target hidden rows. */
  readonly start: number;
  readonly n: number;
  /** Target hidden rows [hiddenRow, hiddenRow + n) of `hidden` ([*, H], a kernel tensor);
   * with `hiddenFirst`, that host row is the first and `hidden` gives the other n − 1. */
  readonly hidden: Tensor;
  readonly hiddenRow: number;
  readonly hiddenFirst?: Float32Array | null;
  /** Drafts to propose after the extend (0 = KV upkeep only). */
  readonly drafts: number;
  /** Page table to write through (default req.pages; a request that finished this step
   * has released its own, and passes the one it ran with). */
  readonly pages?: readonly number[];
}

export class MtpDrafter {
  private readonly h: number;
  /** Ids a draft can be: the first v rows of the lm_head (the draft head). */
  private readonly v: number;
  private readonly head: Weight;
  /** Sampled drafts: q and the draw on the kernels, one call per draft step. */
  private readonly sampler: BatchSampler;
  /** Per request, q buffers over the sampling vocabulary reused round after round (zero
   * beyond the draft head; the engine drops req.draftProbs after each verify). */
  private readonly qBuffers = new WeakMap<Request, Float64Array[]>();

  constructor(
    private readonly model: AnyModel,
    private readonly kv: KvPool,
    private readonly ws: StepArena<Tensor, Tensor>,
    private readonly sampleVocab: number,
    private readonly argmax?: Argmax,
    /** Drafts come from ids [0, draftVocab) only (see EngineOptions.draftVocab). */
    draftVocab = sampleVocab,
  ) {
    this.h = model.config.hiddenSize;
    this.v = Math.min(draftVocab, sampleVocab);
    this.head = this.v < model.weights.lmHead.rows ? model.kernels.weightRows(model.weights.lmHead, this.v) : model.weights.lmHead;
    this.sampler = new BatchSampler(model.kernels, argmax);
  }

  run(inputs: readonly ExtendInput[]): void {
    if (inputs.length === 0) return;
    const mtpKv = this.kv.mtpLayers[0]!;
    const out = mtpForward(this.model, this.ws, inputs.map((i): MtpSeqInput<Tensor> => ({
      tokens: i.req.tokens.slice(i.start + 1, i.start + i.n + 1), hidden: i.hidden, hiddenRow: i.hiddenRow,
      hiddenFirst: i.hiddenFirst ?? null, start: i.start, pageTable: i.pages ?? i.req.pages, kv: mtpKv,
    })));
    // chains that draft: the last extend row of each predicts d_1
    let active: { req: Request; start: number; n: number; drafts: number }[] = [];
    const rows: number[] = [];
    let offset = 0;
    for (const i of inputs) {
      if (i.drafts > 0) {
        active.push({ req: i.req, start: i.start, n: i.n, drafts: this.draftRoom(i) });
        rows.push(offset + i.n - 1);
      }
      offset += i.n;
    }
    if (active.length === 0) return;
    for (const a of active) {
      a.req.drafts = [];
      a.req.draftProbs = isGreedy(a.req.sampling) ? null : [];
    }
    let prevHidden = this.pick(out, rows);
    this.propose(active.map((a) => a.req), prevHidden);
    for (let step = 2; ; step++) {
      const chains = active.filter((a) => a.drafts >= step);
      if (chains.length === 0) break;
      const idx = chains.map((c) => active.indexOf(c));
      const stepOut = mtpForward(this.model, this.ws, chains.map((c, j): MtpSeqInput<Tensor> => ({
        tokens: [c.req.drafts[step - 2]!], hidden: prevHidden, hiddenRow: idx[j]!, start: c.start + c.n + step - 2, pageTable: c.req.pages, kv: mtpKv,
      })));
      prevHidden = this.pick(stepOut, chains.map((_, j) => j));
      this.propose(chains.map((c) => c.req), prevHidden);
      active = chains;
    }
  }

  /** Drafts that fit: each writes MTP KV at one more position, whose page must exist
   * (extra pages are taken only when free — drafting never preempts). */
  private draftRoom(i: ExtendInput): number {
    const lastPos = (d: number): number => i.start + i.n + d - 2; // MTP position of draft step d
    const ps = this.kv.pageSize;
    let d = i.drafts;
    const needPages = Math.floor(lastPos(d) / ps) + 1 - i.req.pages.length;
    if (needPages > 0) {
      const got = this.kv.alloc(Math.min(needPages, this.kv.freePages));
      if (got) i.req.pages.push(...got);
    }
    while (d > 1 && lastPos(d) >= i.req.pages.length * ps) d--;
    return d;
  }

  /** Copy rows of an MTP output to the arena's draft-hidden rows (the next MTP forward
   * reads them into its own input before it overwrites its output). */
  private pick(out: Tensor, rows: readonly number[]): Tensor {
    const dst = this.ws.draftHidden.rows(rows.length);
    this.model.kernels.gatherRows(dst, out, rows, this.h);
    return dst;
  }

  /** One draft token per request from MTP hidden rows [n, H], over the draft head's ids.
   * A sampled request's proposal q is kept over the whole sampling vocabulary (zero beyond
   * the draft head), as rejection sampling compares it with the target's p id by id. */
  private propose(reqs: readonly Request[], hidden: Tensor): void {
    const t = lmHeadInto(this.model, this.ws, hidden, reqs.map((_, j) => j), this.ws.draftLogits.rows(reqs.length), this.head);
    // the draft chain needs each step's picks before the next step: a read-back per step
    const logits = readNow(this.model, t, reqs.length * this.v);
    const sampled: { req: Request; job: SampleJob }[] = [];
    reqs.forEach((req, j) => {
      // drafts are proposed under the request's adjustment, given the drafts before them
      const l = logits.subarray(j * this.v, (j + 1) * this.v);
      adjustInPlace(l, this.v, req.adjust, () => [...req.outputIds, ...req.drafts]);
      if (isGreedy(req.sampling)) req.drafts.push(sampleToken(l, req.sampling, req.history, this.v, req.draftRng, this.argmax));
      else if (req.adjust?.allowed && allMasked(l)) {
        // the constraint allows no id of the draft head: a sure-to-be-rejected draft keeps
        // the chain shape (rejection then samples from the target's p, still lossless)
        const q = this.qBuffer(req, req.draftProbs!.length);
        q.fill(0);
        q[0] = 1;
        req.drafts.push(0);
        req.draftProbs!.push(q);
      } else {
        sampled.push({ req, job: {
          logits: l, vocab: this.v, sampling: req.sampling, history: req.history, extra: req.drafts, rng: req.draftRng, dist: true, logprobs: -1,
        } });
      }
    });
    const out = this.sampler.run(sampled.map((s) => s.job));
    sampled.forEach(({ req }, j) => {
      const o = out[j]!;
      req.drafts.push(o.token);
      req.draftProbs!.push(toProbs(o.weights!, o.mass, this.v, this.qBuffer(req, req.draftProbs!.length)));
    });
  }

  /** The request's i-th reusable q buffer (zero beyond the draft vocabulary). */
  private qBuffer(req: Request, i: number): Float64Array {
    let list = this.qBuffers.get(req);
    if (!list) this.qBuffers.set(req, (list = []));
    return (list[i] ??= new Float64Array(this.sampleVocab));
  }
}

function allMasked(l: Float32Array): boolean {
  for (let i = 0; i < l.length; i++) if (l[i] !== -Infinity) return false;
  return true;
}
