// `deltaserve bench --mode mtp`: end-to-end tokens/s with MTP speculative decoding on ÷ off,
// on the same prompts through the engine (greedy, or seeded sampling with --sample: verified by
// matching, speculative/accept.ts, so its outputs are MTP off's too), with the accept length and the time of a
// round split into draft, verify and the rest (acceptance, state commit, sampling,
// scheduling). Without --accept-rate the model's own MTP head proposes the drafts (real
// acceptance); with --accept-rate P a draft equals the target's greedy token with
// probability P per position (engine/speculative/accept-rate.ts), the MTP head's time
// being real. Every MTP-on run's outputs are checked equal to MTP off (lossless): a
// difference is an error, never a number.
import { overlapsSteps } from '../engine/engine-options.js';
import { Engine, type EngineOptions } from '../engine/engine.js';
import type { GenerateRequest } from '../engine/request-builder.js';
import { acceptRateDrafts } from '../engine/speculative/accept-rate.js';
import type { EngineTestHooks } from '../engine/test-hooks.js';
import type { AnyModel } from '../model/model.js';
import { DeltaserveError } from '../util/errors.js';
import { Rng } from '../util/rng.js';
import type { SamplingParams } from '../engine/sampler.js';
import { benchOnce } from './bench-run.js';
import { timeDraftChain } from './bench-mtp-draft.js';
import { gpuCounters } from './bench-gpu.js';

/** Raw-text prompts (no template: any tokenizer, any model); request i takes prompt i mod 8. */
const PROMPTS = [
  'The capital of France is', 'Counting from one: one, two, three,', 'Twelve plus seven equals',
  'A short list of colors: red, green,', 'Spell cat backwards:', 'The first letters of the alphabet are',
  'Water boils at a temperature of', 'The days of the week are Monday, Tuesday,',
];

export interface MtpBenchOptions {
  readonly engine: EngineOptions;
  /** Draft tokens per round (fixed: the adaptive policy is off). */
  readonly specTokens: number;
  /** One MTP-on measurement per entry: null = the model's own head, else a simulated rate. */
  readonly acceptRates: readonly (number | null)[];
  /** Concurrent requests (streams). */
  readonly batch: number;
  readonly genTokens: number;
  readonly repeat: number;
  readonly seed: number;
  /** Seeded sampled requests with these settings (request i: seed + i) instead of greedy ones:
   * their drafts are verified by matching, so the outputs are MTP off's (null: greedy). */
  readonly sampling?: SamplingParams | null;
}

type DraftOverride = NonNullable<EngineTestHooks['draftOverride']>;

interface RunOut { ids: (readonly number[])[]; prompts: (readonly number[])[]; wallMs: number; decodeMs: number; decodeTokens: number }

function requests(batch: number, gen: number, sampling: SamplingParams | null, seed: number): GenerateRequest[] {
  return Array.from({ length: batch }, (_, i) => ({
    prompt: PROMPTS[i % PROMPTS.length]!, maxTokens: gen, ignoreEos: true, ...(sampling ? { ...sampling, seed: seed + i } : { temperature: 0 }),
  }));
}

/** All requests at once; decode time runs from the last request's first token to the end. */
async function timedRun(e: Engine, reqs: readonly GenerateRequest[]): Promise<RunOut> {
  const t0 = performance.now();
  let lastFirst = t0;
  const done = await Promise.all(reqs.map(async (r) => {
    let first = true;
    for await (const ev of e.generate(r)) {
      if (ev.type === 'delta' && first && ev.ids.length > 0) {
        first = false;
        lastFirst = Math.max(lastFirst, performance.now());
      }
      if (ev.type === 'done') {
        if (ev.error) throw new DeltaserveError('internal', `bench mtp: a request failed: ${ev.error}`);
        return ev;
      }
    }
    throw new DeltaserveError('internal', 'bench mtp: a request ended without a done event');
  }));
  const end = performance.now();
  const tokens = done.reduce((n, d) => n + d.outputIds.length, 0);
  return { ids: done.map((d) => d.outputIds), prompts: done.map((d) => d.promptIds), wallMs: end - t0, decodeMs: end - lastFirst, decodeTokens: tokens - done.length };
}

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
}

/** Repeated runs: the median decode tok/s, and the last run's outputs. */
async function measure(e: Engine, reqs: readonly GenerateRequest[], repeat: number): Promise<{ last: RunOut; tokS: number; decodeMs: number; tokens: number }> {
  const runs: RunOut[] = [];
  for (let r = 0; r < repeat; r++) runs.push(await timedRun(e, reqs));
  const tokS = runs.map((r) => (r.decodeTokens * 1000) / Math.max(r.decodeMs, 1e-9));
  return { last: runs.at(-1)!, tokS: median(tokS), decodeMs: median(runs.map((r) => r.decodeMs)), tokens: runs.at(-1)!.decodeTokens };
}

function checkLossless(on: RunOut, off: RunOut, what: string): void {
  on.ids.forEach((ids, i) => {
    const want = off.ids[i]!;
    if (ids.length !== want.length || ids.some((id, j) => id !== want[j])) {
      throw new DeltaserveError('internal', `bench mtp: ${what}: request ${i}'s output differs from MTP off (speculation must be lossless)`);
    }
  });
}

export async function runMtpBench(o: MtpBenchOptions): Promise<Record<string, unknown>> {
  if (!(o.specTokens >= 1)) throw new DeltaserveError('bad_request', `--mode mtp needs --spec-tokens ≥ 1 (got ${o.specTokens})`);
  const sampling = o.sampling ?? null;
  if (sampling && o.engine.specSampling === 'rejection') {
    throw new DeltaserveError('bad_request', 'bench --mode mtp --sample verifies by matching (outputs == MTP off); --spec-sampling rejection draws other tokens');
  }
  const reqs = requests(o.batch, o.genTokens, sampling, o.seed);
  const warm = requests(Math.min(o.batch, 2), 4, sampling, o.seed);
  const base: EngineOptions = {
    ...o.engine, specAdaptive: false, prefixCache: false, maxRunning: Math.max(o.batch, o.engine.maxRunning ?? 1), ...(sampling ? { specSampling: 'match' } : {}),
  };
  // MTP off: the reference outputs and speed
  const offEngine = await Engine.load({ ...base, specTokens: 0 });
  let off: Awaited<ReturnType<typeof measure>>;
  const gpu = overlapsSteps(base, offEngine.model.kernels); // overlapped decode is on (engine-options.ts)
  try {
    await timedRun(offEngine, warm);
    off = await measure(offEngine, reqs, o.repeat);
  } finally {
    await offEngine.close();
  }
  const plain = gpu ? await plainLoop(base, warm, reqs, o.repeat, off.last) : null;
  const targets = new Map(off.last.prompts.map((p, i) => [p.join(','), off.last.ids[i]!]));
  // one on-engine for every rate: the hook consults the rate being measured
  const simulated: { fn: DraftOverride | null } = { fn: null };
  const onEngine = await Engine.load({ ...base, specTokens: o.specTokens }, { draftOverride: (r, d) => (simulated.fn ? simulated.fn(r, d) : d) });
  try {
    const vocab = onEngine.info.sampleVocab;
    await timedRun(onEngine, warm);
    const results: Record<string, unknown>[] = [];
    for (const p of o.acceptRates) {
      simulated.fn = p === null ? null : acceptRateDrafts({ rate: p, seed: o.seed, vocab, targetOf: (ids) => targets.get(ids.join(',')) });
      const before = onEngine.stats();
      const reads0 = readBacks(onEngine);
      const on = await measure(onEngine, reqs, o.repeat);
      const reads = readBacks(onEngine).map((x, i) => x - reads0[i]!);
      const after = onEngine.stats();
      checkLossless(on.last, off.last, p === null ? 'real acceptance' : `accept rate ${p}`);
      const rounds = after.spec.rounds - before.spec.rounds;
      const steps = (after.steps.verify - before.steps.verify) + (after.steps.decode - before.steps.decode);
      const drafted = after.spec.drafted - before.spec.drafted;
      const accepted = after.spec.accepted - before.spec.accepted;
      const deferred = after.spec.deferredRounds - before.spec.deferredRounds;
      results.push({
        accept: p === null ? 'mtp head' : p, accept_len_mean: rounds > 0 ? (accepted + rounds) / rounds : null,
        rounds, drafted, accepted,
        // steps whose verify read back their drafts with its picks (engine/speculative/pending-drafts.ts)
        deferred_rounds: deferred,
        tok_s_on: on.tokS, speedup: on.tokS / off.tokS, outputs_identical: true,
        round_ms: steps > 0 ? on.decodeMs / (steps / o.repeat) : null,
        // webgpu: every read-back of the runs (prefill steps included) per verify round
        ...(reads.length > 0 && rounds > 0 ? { read_backs_per_round: reads[0]! / rounds, read_back_bytes_per_round: reads[1]! / rounds } : {}),
      });
    }
    return {
      mode: 'mtp', kernels: onEngine.info.kernels.name, model: base.model ?? 'built-in', batch: o.batch, spec_tokens: o.specTokens,
      sampling: sampling ? { ...sampling, verified_by: 'match' } : 'greedy',
      gen_tokens: o.genTokens, repeat: o.repeat, node: process.version, tok_s_off: off.tokS,
      ...(plain ? { tok_s_off_no_overlap: plain.tokS, overlap_speedup: off.tokS / plain.tokS } : {}), runs: results,
    };
  } finally {
    await onEngine.close();
  }
}

/** On a GPU backend, MTP off with overlapped decode off too (engine/overlap.ts; a CPU
 * backend never overlaps): the plain loop's speed, its outputs checked equal to the
 * overlapped run's. */
async function plainLoop(base: EngineOptions, warm: readonly GenerateRequest[], reqs: readonly GenerateRequest[], repeat: number,
  overlapped: RunOut): Promise<Awaited<ReturnType<typeof measure>>> {
  const e = await Engine.load({ ...base, specTokens: 0, overlapSteps: false });
  try {
    await timedRun(e, warm);
    const plain = await measure(e, reqs, repeat);
    plain.last.ids.forEach((ids, i) => {
      if (ids.join(',') !== overlapped.ids[i]!.join(',')) throw new DeltaserveError('internal', `bench mtp: request ${i}'s output with overlapped decode differs from the plain loop's`);
    });
    return plain;
  } finally {
    await e.close();
  }
}

/** The webgpu backend's read-backs and their bytes so far ([] on a CPU backend). */
function readBacks(e: Engine): number[] {
  const c = gpuCounters(e.model.kernels)?.counters;
  return c ? [c.steps, c.readBackBytes] : [];
}

export interface RoundPhases { verify: number; draft: number }

/** The model-level cost of a round's parts at this batch: a verify step of k + 1 tokens per
 * sequence, and the MTP chain (k draft steps, each an MTP forward, the draft head and a
 * read-back). Timed on a model the bench loads after the engines have closed. */
export async function mtpRoundPhases(model: AnyModel, o: Pick<MtpBenchOptions, 'batch' | 'genTokens' | 'specTokens' | 'seed'> & { readonly phasePrompt?: number }):
  Promise<RoundPhases> {
  const rng = new Rng(o.seed);
  const steps = Math.max(4, Math.min(16, o.genTokens));
  const prompt = o.phasePrompt ?? 32; // the sequences' length before the timed rounds
  await benchOnce(model, 'verify', o.batch, Math.min(prompt, 16), 2, o.specTokens + 1, rng); // warm-up
  const verify = await benchOnce(model, 'verify', o.batch, prompt, steps, o.specTokens + 1, rng);
  const draft = await timeDraftChain(model, o.batch, prompt, o.specTokens, Math.max(2, Math.floor(steps / 2)));
  return { verify: verify.ms / verify.steps, draft };
}

/** A round's time split: draft and verify from the model-level timings; the rest of the
 * measured round is the host's (acceptance, state commit, sampling, scheduling) — under a
 * changing machine load it can come out negative, a sign to measure again. */
export function withPhases(result: Record<string, unknown>, p: RoundPhases): Record<string, unknown> {
  const runs = (result['runs'] as Record<string, unknown>[]).map((r) => {
    const round = r['round_ms'] as number | null;
    return { ...r, draft_ms: p.draft, verify_ms: p.verify, commit_and_host_ms: round === null ? null : round - p.draft - p.verify };
  });
  return { ...result, runs, phases_ms: p };
}

/** --accept-rate: "real" (the MTP head), or a comma list of rates in [0, 1]; default real. */
export function parseAcceptRates(s: string | undefined): (number | null)[] {
  if (s === undefined) return [null];
  return s.split(',').map((part) => {
    const t = part.trim();
    if (t === 'real') return null;
    const p = Number(t);
    if (t === '' || !(p >= 0 && p <= 1)) throw new DeltaserveError('bad_request', `--accept-rate expects "real" or rates in [0, 1], comma-separated (bad entry "${part}")`);
    return p;
  });
}
