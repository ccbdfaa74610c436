// MTP drafting (docs/ARCHITECTURE.md "Speculative decoding (MTP)"). After every target step, for each request:
//   extend — the MTP head runs over the positions the step committed, position t fed
//            (target hidden h_t, token x_{t+1}), so the MTP KV always matches the
//            committed tokens; its last output predicts d_1;
//   draft  — k−1 more single-token MTP steps, each fed the previous MTP output and draft.
// Batched across requests. Drafts of greedy requests are argmax picks; sampling requests
// draw d_i from q_i (the request's sampling transform of the MTP logits), kept for the
// rejection test.
import type { KvPool } from '../../cache/kv-pool.js';
import { lmHeadInto, mtpForward, type MtpSeqInput } from '../../model/forward.js';
import type { StepArena } from '../../model/arena.js';
import type { AnyModel } from '../../model/model.js';
import { type Argmax, isGreedy, sampleToken } from '../sampler.js';
import { BatchSampler, type SampleJob, toProbs } from '../sample-batch.js';
import type { Tensor, Weight } from '../../kernels/types.js';
import type { Request } from '../request.js';
import { adjustInPlace, matcherAfterDrafts } from '../logits-adjust.js';

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

/** A request that drafts this round: its extend [start, start + n) and draft count. */
interface Chain {
  readonly req: Request;
  readonly start: number;
  readonly n: number;
  readonly drafts: number;
}

/** Draft step `step` (1-based) of the `active` chains, fed their MTP hidden rows. */
interface DraftStep {
  readonly active: readonly Chain[];
  readonly hidden: Tensor;
  readonly step: number;
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
    private readonly kv: KvPool<Tensor>,
    private readonly ws: StepArena<Tensor, Tensor>,
    private readonly sampleVocab: number,
    /** Grows a request's page list by up to n free pages (the scheduler's: it is the only
     * writer of request progress). */
    private readonly takeFreePages: (req: Request, n: number) => void,
    private readonly argmax?: Argmax,
    /** Drafts come from ids [0, draftVocab) only (see EngineOptions.draftVocab). */
    draftVocab = sampleVocab,
  ) {
    this.h = model.config.hiddenSize;
    this.v = Math.min(draftVocab, sampleVocab);
    this.head = this.v < model.weights.lmHead.rows ? model.kernels.weightRows(model.weights.lmHead, this.v) : model.weights.lmHead;
    this.sampler = new BatchSampler(model.kernels, argmax);
  }

  /** Extend, then draft. Synchronous unless the backend's read-back is asynchronous (one
   * read-back per draft step: each step's picks feed the next). */
  run(inputs: readonly ExtendInput[]): void | Promise<void> {
    if (inputs.length === 0) return;
    const mtpKv = this.kv.mtpLayers[0]!;
    const out = mtpForward(this.model, this.ws, inputs.map((i): MtpSeqInput<Tensor> => ({
      tokens: i.req.tokens.slice(i.start + 1, i.start + i.n + 1), hidden: i.hidden, hiddenRow: i.hiddenRow,
      hiddenFirst: i.hiddenFirst ?? null, start: i.start, pageTable: i.pages ?? i.req.pages, kv: mtpKv,
    })));
    // chains that draft: the last extend row of each predicts d_1
    const active: Chain[] = [];
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
    return this.steps({ active, hidden: this.pick(out, rows), step: 1 });
  }

  /** Propose draft `at.step` of every active chain from its MTP hidden row, then the
   * following steps. */
  private steps(at: DraftStep): void | Promise<void> {
    for (let s: DraftStep | null = at; s; s = this.nextStep(s)) {
      const proposed = this.propose(s.active.map((a) => a.req), s.hidden);
      if (proposed) {
        const here = s;
        return proposed.then(() => {
          const next = this.nextStep(here);
          return next ? this.steps(next) : undefined;
        });
      }
    }
  }

  /** The MTP forward of the chains that draft one more step, or null when none does. */
  private nextStep(prev: DraftStep): DraftStep | null {
    const step = prev.step + 1;
    const chains = prev.active.filter((a) => a.drafts >= step);
    if (chains.length === 0) return null;
    const idx = chains.map((c) => prev.active.indexOf(c));
    const stepOut = mtpForward(this.model, this.ws, chains.map((c, j): MtpSeqInput<Tensor> => ({
      tokens: [c.req.drafts[step - 2]!], hidden: prev.hidden, hiddenRow: idx[j]!, start: c.start + c.n + step - 2,
      pageTable: c.req.pages, kv: this.kv.mtpLayers[0]!,
    })));
    return { active: chains, hidden: this.pick(stepOut, chains.map((_, j) => j)), step };
  }

  /** Drafts that fit: each writes MTP KV at one more position, whose page must exist
   * (extra pages are taken only when free — drafting never preempts). */
  private draftRoom(i: ExtendInput): number {
    const lastPos = (d: number): number => i.start + i.n + d - 2; // MTP position of draft step d
    const ps = this.kv.pageSize;
    let d = i.drafts;
    this.takeFreePages(i.req, Math.floor(lastPos(d) / ps) + 1 - i.req.pages.length);
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
  private propose(reqs: readonly Request[], hidden: Tensor): void | Promise<void> {
    const t = lmHeadInto(this.model, this.ws, hidden, reqs.map((_, j) => j), this.ws.draftLogits.rows(reqs.length), this.head);
    // the draft chain needs each step's picks before the next step: a read-back per step
    const back = this.model.kernels.readBack([{ t, offset: 0, length: reqs.length * this.v }]);
    if (back instanceof Promise) return back.then(([logits]) => this.pickDrafts(reqs, logits!));
    this.pickDrafts(reqs, back[0]!);
  }

  /** Each request's next draft from its host logits row of `logits` ([n, V_draft]). */
  private pickDrafts(reqs: readonly Request[], logits: Float32Array): void {
    const sampled: { req: Request; job: SampleJob }[] = [];
    reqs.forEach((req, j) => {
      // drafts are proposed under the request's adjustment, its matcher forked past the
      // committed ids and advanced by the drafts before this one
      const l = logits.subarray(j * this.v, (j + 1) * this.v);
      adjustInPlace(l, this.v, req.adjust, matcherAfterDrafts(req, req.drafts.length));
      if (isGreedy(req.sampling)) req.drafts.push(sampleToken(l, req.sampling, req.history, this.v, req.draftRng, this.argmax));
      else if (req.adjust?.constraint && allMasked(l)) {
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
