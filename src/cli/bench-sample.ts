// `deltaserve bench --mode decode --sample …`: the per-token cost of sampling against greedy,
// measured in the same run. Every repetition decodes the same prompts twice, back to back:
// greedy (the engine's argmax pick per row) and sampled (the engine's BatchSampler: one
// kernel call per step for every stream, penalties, logprobs), each fed its own picks. The
// report gives both step times, the overhead (median over repetitions of each pair's ratio:
// the pairs run seconds apart, so load changes cancel better than in a ratio of medians),
// and the time of the sampling call itself per row, which is far less noise-sensitive.
// On a busy machine the most robust figure is `step_overhead_pct`: inside the sampled run,
// every step also times the greedy pick on the same logits, so each step gives
// (sample pick − greedy pick) / (forward + greedy pick) measured within milliseconds.
import { forwardHidden, lmHeadInto, readNow, type SeqInput } from '../model/forward.js';
import { StepArena } from '../model/arena.js';
import { type AnyModel, allocSequenceMemory, type SequenceMemory } from '../model/model.js';
import type { Tensor } from '../kernels/types.js';
import { BatchSampler, type SampleJob } from '../engine/sample-batch.js';
import { REQUEST_PARAMS, validateSampling } from '../engine/request-rules.js';
import { GREEDY, greedyToken, type SamplingParams, TokenHistory } from '../engine/sampler.js';
import { DeltaserveError } from '../util/errors.js';
import { Rng } from '../util/rng.js';
import { type ArgValues, int, num } from './args.js';

export const SAMPLE_HELP = `  --sample                  decode mode: also decode with sampling and report its cost vs greedy;
                            mtp mode: seeded sampled requests instead of greedy ones
  --temperature T --top-p P --top-k K --min-p P --presence-penalty P --frequency-penalty F
  --repetition-penalty R    sampling settings of --sample (default temperature 1)
  --logprobs N              with --sample: logprobs + N top_logprobs per token (0..${REQUEST_PARAMS.topLogprobs.max})`;

export const SAMPLE_OPTIONS = {
  sample: { type: 'boolean' }, temperature: { type: 'string' }, 'top-p': { type: 'string' }, 'top-k': { type: 'string' },
  'min-p': { type: 'string' }, 'presence-penalty': { type: 'string' }, 'frequency-penalty': { type: 'string' },
  'repetition-penalty': { type: 'string' }, logprobs: { type: 'string' },
} as const;

export interface SampleBenchSettings {
  readonly sampling: SamplingParams;
  /** top_logprobs, or −1 for none. */
  readonly logprobs: number;
}

export function sampleSettings(v: ArgValues): SampleBenchSettings | null {
  if (v['sample'] !== true) return null;
  const sampling: SamplingParams = {
    temperature: num(v, 'temperature') ?? 1, topP: num(v, 'top-p') ?? 1, topK: int(v, 'top-k') ?? 0, minP: num(v, 'min-p') ?? 0,
    presencePenalty: num(v, 'presence-penalty') ?? 0, frequencyPenalty: num(v, 'frequency-penalty') ?? 0,
    repetitionPenalty: num(v, 'repetition-penalty') ?? 1,
  };
  validateSampling(sampling);
  if (sampling.temperature === 0) throw new DeltaserveError('bad_request', '--sample needs --temperature > 0 (0 is the greedy baseline)');
  const logprobs = int(v, 'logprobs') ?? -1;
  const maxTop = REQUEST_PARAMS.topLogprobs.max;
  if (logprobs > maxTop) throw new DeltaserveError('bad_request', `--logprobs must be in 0..${maxTop} (got ${logprobs})`);
  return { sampling, logprobs };
}

interface DecodeRun {
  stepMs: number;
  pickMsPerRow: number;
  /** Sampled runs: per step, (sample pick − greedy pick on the same logits) / (forward + greedy pick). */
  stepOverheads: number[];
}

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
}

const stats = (xs: readonly number[]): { median: number; min: number; max: number } =>
  ({ median: median(xs), min: Math.min(...xs), max: Math.max(...xs) });

/** Decode `gen` steps of `batch` streams from the same prompts, feeding back each pick. */
function decodeRun(model: AnyModel, ws: StepArena<Tensor, Tensor>, sampler: BatchSampler, prompts: number[][], gen: number,
  s: SampleBenchSettings, seed: number): DecodeRun {
  const vocab = model.config.vocabSize;
  const batch = prompts.length;
  const mems: SequenceMemory<Tensor>[] = prompts.map((p) => allocSequenceMemory(model, p.length + gen + 2));
  const seqs = (tokens: number[][], start: number[], chunked: boolean): SeqInput<Tensor>[] =>
    mems.map((m, i) => ({ tokens: tokens[i]!, start: start[i]!, pageTable: m.pageTable, kv: m.kv, state: m.state, chunked }));
  const fw0 = forwardHidden(model, ws, seqs(prompts, prompts.map(() => 0), true));
  const logitsT = ws.logits.rows(batch);
  lmHeadInto(model, ws, fw0.hidden, fw0.offsets.map((o, i) => o + prompts[i]!.length - 1), logitsT);
  let logits = readNow(model, logitsT, batch * vocab); // the step's read-back (CPU: a view)
  const hist = prompts.map((p) => new TokenHistory(p));
  const rngs = prompts.map((_, i) => new Rng(seed + i));
  const row = (i: number): Float32Array => logits.subarray(i * vocab, (i + 1) * vocab);
  let pickMs = 0;
  let pos = prompts[0]!.length;
  const greedyPick = (): number[] => prompts.map((_, i) => greedyToken(row(i), GREEDY, hist[i]!, vocab, sampler.argmax));
  const stepOverheads: number[] = [];
  let t0 = performance.now();
  for (let step = 0; step < gen; step++) {
    const p0 = performance.now();
    const next = s.sampling === GREEDY ? greedyPick() : sampler.run(prompts.map((_, i): SampleJob => ({
      logits: row(i), vocab, sampling: s.sampling, history: hist[i]!, rng: rngs[i]!, logprobs: s.logprobs,
    }))).map((o) => o.token);
    const p1 = performance.now();
    pickMs += p1 - p0;
    let g = 0;
    if (s.sampling !== GREEDY) { // the greedy pick on the same logits (not part of the step time)
      greedyPick();
      g = performance.now() - p1;
    }
    next.forEach((t, i) => hist[i]!.push(t));
    const f0 = performance.now();
    const fw = forwardHidden(model, ws, seqs(next.map((t) => [t]), prompts.map(() => pos), false));
    lmHeadInto(model, ws, fw.hidden, next.map((_, i) => i), logitsT);
    logits = readNow(model, logitsT, batch * vocab);
    const fwdMs = performance.now() - f0;
    if (s.sampling !== GREEDY) stepOverheads.push((p1 - p0 - g) / (fwdMs + g));
    pos++;
    t0 -= g; // the step time excludes the extra greedy pick
  }
  return { stepMs: (performance.now() - t0) / gen, pickMsPerRow: pickMs / (gen * batch), stepOverheads };
}

/** The sampled-vs-greedy decode report (one JSON object). */
export function benchSampling(model: AnyModel, batch: number, promptTokens: number, gen: number, repeat: number,
  s: SampleBenchSettings, argmax: (row: Float32Array, n: number) => number): Record<string, unknown> {
  const ws = new StepArena(model);
  const sampler = new BatchSampler(model.kernels, argmax);
  const rng = new Rng(7);
  const vocab = model.config.vocabSize;
  const prompts = Array.from({ length: batch }, () => Array.from({ length: promptTokens }, () => Math.floor(rng.next() * Math.min(vocab, 990))));
  const greedy: DecodeRun[] = [];
  const sampled: DecodeRun[] = [];
  const greedyS: SampleBenchSettings = { sampling: GREEDY, logprobs: -1 };
  decodeRun(model, ws, sampler, prompts.map((p) => p.slice(0, 16)), 2, s, 1); // warm-up
  for (let r = 0; r < repeat; r++) {
    // alternate which goes first, so a trend in the machine's load favours neither
    const pair = r % 2 === 0 ? [greedyS, s] : [s, greedyS];
    for (const settings of pair) (settings === greedyS ? greedy : sampled).push(decodeRun(model, ws, sampler, prompts, gen, settings, 100 * r));
    if (process.stderr.isTTY) process.stderr.write(`\rbench decode --sample: run ${r + 1}/${repeat}`);
  }
  if (process.stderr.isTTY) process.stderr.write('\n');
  const ratios = greedy.map((g, i) => sampled[i]!.stepMs / g.stepMs - 1);
  const p = s.sampling;
  return {
    mode: 'decode', sample: {
      temperature: p.temperature, top_p: p.topP, top_k: p.topK, min_p: p.minP, presence_penalty: p.presencePenalty,
      frequency_penalty: p.frequencyPenalty, repetition_penalty: p.repetitionPenalty, top_logprobs: s.logprobs >= 0 ? s.logprobs : null,
    },
    batch, threads: model.kernels.threads, kernels: model.kernels.name, model: model.dir, prompt_tokens: promptTokens, gen_tokens: gen,
    greedy_ms_per_step: stats(greedy.map((g) => g.stepMs)),
    sampled_ms_per_step: stats(sampled.map((g) => g.stepMs)),
    overhead_pct: { median: 100 * median(ratios), min: 100 * Math.min(...ratios), max: 100 * Math.max(...ratios) },
    greedy_pick_ms_per_row: stats(greedy.map((g) => g.pickMsPerRow)),
    sample_ms_per_row: stats(sampled.map((g) => g.pickMsPerRow)),
    // the pick's share of a greedy step: the overhead the sampler alone adds (noise-robust)
    pick_overhead_pct: 100 * ((median(sampled.map((g) => g.pickMsPerRow)) - median(greedy.map((g) => g.pickMsPerRow))) * batch)
      / median(greedy.map((g) => g.stepMs)),
    step_overhead_pct: stats(sampled.flatMap((g) => g.stepOverheads).map((x) => 100 * x)),
    repeat,
  };
}
