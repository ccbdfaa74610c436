// Invariant 5 (docs/ARCHITECTURE.md "Invariants"): speculative sampling has the same output distribution as plain
// sampling. From a fixed prompt and first token t at temperature 1 (top-k 12), the joint
// distribution of the next 2 tokens produced by acceptDrafts with real MTP drafts (k = 2)
// over 40,000 rounds matches p(x2|t)·p(x3|t,x2) (chi-square, p > 0.001). Target and draft
// logits are computed once per candidate and cached, so the sampling loop is fast. A second
// run uses a deliberately poor proposal (draft temperature 2.5) so that the rejection path
// and the residual distribution carry real weight. Every p and q comes from the wasm
// sampling kernel (the engine's fast path), handed to acceptDrafts as the engine does.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { createRefKernels } from '../src/kernels/ref/index.js';
import { loadModel, allocSequenceMemory, type Model } from '../src/model/model.js';
import { forwardHidden, lmHead, mtpForward } from '../src/model/forward.js';
import { StepArena } from '../src/model/arena.js';
import { acceptDrafts } from '../src/engine/speculative/accept.js';
import { drawFrom, targetDistribution, TokenHistory, type SamplingParams } from '../src/engine/sampler.js';
import { Rng } from '../src/util/rng.js';
import { readFileSync } from 'node:fs';
import { sharedPath, TINY_THINK } from './paths.js';
import { createWasmKernels } from '../src/kernels/wasm/index.js';

const fast = await createWasmKernels({ threads: 1 });
after(() => fast.dispose());
const dist = (logits: Float32Array, p: SamplingParams): Float64Array =>
  targetDistribution(logits, p, new TokenHistory([]), VOCAB, undefined, (r, o) => fast.sample(r, o));

const PARAMS: SamplingParams = { temperature: 1, topK: 12, topP: 1, minP: 0, repetitionPenalty: 1, presencePenalty: 0, frequencyPenalty: 0 };
const VOCAB = 1000;

/** Regularised upper incomplete gamma Q(a, x) (series / continued fraction). */
function gammaQ(a: number, x: number): number {
  const lnGamma = (z: number): number => {
    const c = [76.18009172947146, -86.50532032941677, 24.01409824083091, -1.231739572450155, 0.1208650973866179e-2, -0.5395239384953e-5];
    let y = z;
    const tmp = z + 5.5 - (z + 0.5) * Math.log(z + 5.5);
    let ser = 1.000000000190015;
    for (const ci of c) ser += ci / ++y;
    return -tmp + Math.log((2.5066282746310005 * ser) / z);
  };
  if (x < a + 1) {
    let sum = 1 / a;
    let del = sum;
    for (let n = 1; n < 500; n++) {
      del *= x / (a + n);
      sum += del;
    }
    return 1 - sum * Math.exp(-x + a * Math.log(x) - lnGamma(a));
  }
  let b = x + 1 - a;
  let c = 1e300;
  let d = 1 / b;
  let h = d;
  for (let i = 1; i < 500; i++) {
    const an = -i * (i - a);
    b += 2;
    d = an * d + b;
    d = 1 / d;
    c = b + an / c;
    h *= d * c;
  }
  return Math.exp(-x + a * Math.log(x) - lnGamma(a)) * h;
}

interface Branch { target: Float32Array; draft: Float32Array }

/** After [prompt, t]: p1 logits (target, next token), q1 logits (MTP position P−1 fed t),
 * and for each candidate x: the target logits after x and the MTP logits of position P
 * fed (h_P, x) — the draft distribution of the token after x. */
class Branches {
  readonly p1: Float32Array;
  readonly q1: Float32Array;
  private readonly ws: StepArena;
  private readonly mem: ReturnType<typeof allocSequenceMemory>;
  private readonly hP: Float32Array;
  private readonly saved: { conv: Float32Array; ssm: Float32Array }[];

  constructor(private readonly model: Model, private readonly prompt: number[], t: number) {
    this.ws = new StepArena(model);
    this.mem = allocSequenceMemory(model, prompt.length + 4);
    const P = prompt.length;
    const h = model.config.hiddenSize;
    const pre = forwardHidden(model, this.ws, [{ tokens: [...prompt, t], start: 0, pageTable: this.mem.pageTable, kv: this.mem.kv, state: this.mem.state, chunked: true }]);
    const hidden = pre.hidden.slice();
    this.hP = hidden.slice(P * h, (P + 1) * h);
    this.p1 = lmHead(model, this.ws, hidden, [P]);
    const mtp = mtpForward(model, this.ws, [{ tokens: [...prompt.slice(1), t], hidden, start: 0, pageTable: this.mem.pageTable, kv: this.mem.mtpKv[0]! }]);
    this.q1 = lmHead(model, this.ws, mtp, [P - 1]);
    this.saved = this.mem.state.map((st) => ({ conv: st.conv.slice(), ssm: st.ssm.slice() }));
  }

  after(x: number): Branch {
    const P = this.prompt.length;
    this.mem.state.forEach((st, i) => {
      st.conv.set(this.saved[i]!.conv);
      st.ssm.set(this.saved[i]!.ssm);
    });
    const step = forwardHidden(this.model, this.ws, [{ tokens: [x], start: P + 1, pageTable: this.mem.pageTable, kv: this.mem.kv, state: this.mem.state, chunked: false }]);
    const target = lmHead(this.model, this.ws, step.hidden, [0]);
    const m = mtpForward(this.model, this.ws, [{ tokens: [x], hidden: this.hP, start: P, pageTable: this.mem.pageTable, kv: this.mem.mtpKv[0]! }]);
    return { target, draft: lmHead(this.model, this.ws, m, [0]) };
  }
}

let shared: Model | null = null;
/** The proposal restricted to even ids (zero elsewhere, renormalised), as a restricted
 * draft vocabulary (--draft-vocab) makes it: q is 0 where p is not. */
function evenIdsOnly(q: Float64Array): Float64Array {
  const r = new Float64Array(q.length);
  let sum = 0;
  for (let i = 0; i < q.length; i += 2) sum += q[i]!;
  for (let i = 0; i < q.length; i += 2) r[i] = q[i]! / sum;
  return r;
}

for (const [draftTemperature, restrict] of [[1, false], [2.5, false], [1, true]] as const) test(`MTP rejection sampling preserves the 2-token output distribution (chi-square, draft temperature ${draftTemperature}${restrict ? ', drafts from even ids only' : ''})`, () => {
  const model = (shared ??= loadModel(TINY_THINK(), createRefKernels()));
  // a point inside the add task's reasoning where p is spread and the MTP proposal overlaps
  // it by about half (so accepts, rejections and residual draws all happen)
  const g = JSON.parse(readFileSync(sharedPath('golden', 'tiny-think.json'), 'utf8')) as { prompts: { name: string; prompt_ids: number[]; greedy_ids: number[] }[] };
  const add = g.prompts.find((p) => p.name === 'add-zeroshot-think')!;
  const prompt = [...add.prompt_ids, add.greedy_ids[0]!];
  const t = add.greedy_ids[1]!;
  const hist = new TokenHistory([]);
  // candidates: the support of p1 and of q1 (top-12 each)
  const probe = new Branches(model, prompt, t);
  const p1 = dist(probe.p1, PARAMS);
  // draft temperature 2.5: a proposal far from p, so rejections and the residual matter
  const QPARAMS = { ...PARAMS, temperature: draftTemperature };
  const shape = (q: Float64Array): Float64Array => (restrict ? evenIdsOnly(q) : q);
  const q1 = shape(dist(probe.q1, QPARAMS));
  const xs = [...p1.keys()].filter((i) => p1[i]! > 0 || q1[i]! > 0);
  const by = new Map(xs.map((x) => [x, probe.after(x)]));
  const p2 = new Map(xs.map((x) => [x, dist(by.get(x)!.target, PARAMS)]));
  const q2 = new Map(xs.map((x) => [x, shape(dist(by.get(x)!.draft, QPARAMS))]));
  const rng = new Rng(11);
  const draftRng = new Rng(12);
  const counts = new Map<string, number>();
  const N = 40_000;
  const bonusLogits = probe.p1; // the bonus after 2 accepted drafts is not part of the test
  const bonus = p1;
  for (let n = 0; n < N; n++) {
    const d1 = drawFrom(q1, draftRng);
    const d2 = drawFrom(q2.get(d1)!, draftRng);
    const out: number[] = [];
    const targetAt = (i: number): Float64Array => (i === 0 ? p1 : i === 1 ? p2.get(d1)! : bonus);
    acceptDrafts({ tokens: [d1, d2], probs: [q1, q2.get(d1)!] }, { sampling: PARAMS, history: hist, vocab: VOCAB, rng, targetAt },
      (i) => (i === 0 ? probe.p1 : i === 1 ? by.get(d1)!.target : bonusLogits), (tok) => (out.push(tok), true));
    // a rejection at the first draft yields one token; the next one comes from the target
    if (out.length === 1) out.push(drawFrom(p2.get(out[0]!)!, rng));
    const key = `${out[0]},${out[1]}`;
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  // exact joint p(x2) p(x3|x2); bins with expected count < 5 merged into one
  let chi = 0;
  let bins = 0;
  let restObs = 0;
  let restExp = 0;
  for (const x2 of xs) {
    const px2 = p1[x2]!;
    if (px2 === 0) continue;
    const cond = p2.get(x2)!;
    for (let x3 = 0; x3 < VOCAB; x3++) {
      const e = N * px2 * cond[x3]!;
      if (e === 0) continue;
      const o = counts.get(`${x2},${x3}`) ?? 0;
      counts.delete(`${x2},${x3}`);
      if (e < 5) {
        restObs += o;
        restExp += e;
        continue;
      }
      chi += (o - e) ** 2 / e;
      bins++;
    }
  }
  const impossible = [...counts.values()].reduce((a, b) => a + b, 0);
  assert.equal(impossible, 0, 'sampled a pair the target gives probability 0');
  if (restExp > 0) {
    chi += (restObs - restExp) ** 2 / restExp;
    bins++;
  }
  const pValue = gammaQ((bins - 1) / 2, chi / 2);
  assert.ok(bins >= 6, `enough bins (${bins})`);
  assert.ok(pValue > 0.001, `chi-square ${chi.toFixed(1)} over ${bins} bins: p = ${pValue}`);
});
