// `deltaserve bench`: time decode / verify / prefill steps of the model forward directly
// (no scheduler), and report them against the memory-bandwidth roofline: a short table, or
// one JSON object with --json (bench-table.ts).
import { parseArgs } from 'node:util';
import { resolve } from 'node:path';
import { createKernels, type KernelsChoice } from '../kernels/index.js';
import type { AnyKernels, Weight } from '../kernels/types.js';
import { type AnyModel, loadModel } from '../model/model.js';
import { benchOnce, type Run } from './bench-run.js';
import type { ModelWeights, MlpWeights } from '../model/weights.js';
import type { SamplingParams } from '../engine/sampler.js';
import { cpus } from 'node:os';
import { DeltaserveError } from '../util/errors.js';
import { hugePageStatus } from '../util/huge-pages.js';
import { Rng } from '../util/rng.js';
import { type ArgValues, int, str } from './args.js';
import { mtpRoundPhases, parseAcceptRates, runMtpBench, withPhases } from './bench-mtp.js';
import { parseQuantizeMode, withLoadQuantizer } from '../checkpoint/quantize-load.js';
import { checkKernelsName, DEFAULT_MODEL, defaultKernels, emulationWarning, kernelsFields } from './engine-flags.js';
import { gpuCounters, gpuStepReport } from './bench-gpu.js';
import { runGrammarBench } from './bench-grammar.js';
import { benchSampling, SAMPLE_HELP, SAMPLE_OPTIONS, sampleSettings } from './bench-sample.js';
import { KernelProfile } from './bench-profile.js';
import { type BenchReport, formatBenchTable, roundNumbers } from './bench-table.js';

export const BENCH_HELP = `deltaserve bench [options]        prints a table (test, tok/s ± spread, ms/step, share of roofline)
  --json                    print one JSON object instead (every number; fractions to 4 significant
                            digits); --mode grammar, --sample and --profile always print JSON
  --model DIR               (default: built-in tiny-think)
  --mode decode|verify|prefill|grammar|mtp   (grammar: per-token structured-output mask cost;
                            mtp: engine tokens/s with MTP on ÷ off, same prompts: greedy, or
                            with --sample seeded sampling, verified by matching)
  --accept-rate P[,P...]    mtp: drafts agree with the target's token (greedy, or MTP off's draw
                            with --sample) with probability P
                            per position (simulated; the MTP head still runs); "real": the
                            model's own MTP head (default)
  --spec-tokens K           mtp: draft tokens per round (default 3)
  --kv-cache-tokens N       mtp: the engines' KV pool (default: the memory plan's)
  --vocab N                 grammar: grow the tokenizer's vocabulary to N tokens (BPE-like merges)
  --schema FILE             grammar: also time masks along seeded walks under this schema (a JSON
                            Schema or a JSONSchemaBench entry; repeatable), e.g. test/bench/*.json
  --decode-ms MS            grammar: a decode step of the served model, for the mask / step ratios
  --batch B                 sequences per step (default 1)
  --prompt-tokens P         prompt length before decoding / prefill length (default 128; --mode
                            mtp: the prompt of the round-phase timings, default 32)
  --gen-tokens N            timed steps (default 32)
  --verify-tokens V         tokens per sequence of a verify step (default 4)
  --overlap on|off          decode on a GPU backend: record step s + 1 before step s's read-back,
                            its tokens step s's picks on the device, as the engine's greedy decode
                            does (default on; "overlap" in the JSON)
  --threads T               (default: available cores)
  --quantize q8_0|q4_k      quantize matmul weights as they load
  --kernels cpu|wasm|ref|webgpu|auto  (default cpu: wasm when built); on webgpu the JSON adds
                            the adapter, dispatches per step, weight and KV bytes read per step
                            against the ideal (each byte once), and GPU time per step
                            (timestamp queries, when the adapter has them)
  --repeat R                repetitions; median/min/max over them (default 3)
  --profile                 add "profile": wall time per kernel op (matmuls by weight shape); on
                            webgpu also gpu_ms_per_step_pass_per_dispatch (a timed pass each)
${SAMPLE_HELP}`;


type Size = (w: Weight) => number;

function mlpPerToken(m: MlpWeights, size: Size): number {
  if (m.kind === 'dense') return size(m.gate) + size(m.up) + size(m.down);
  const e = m.experts[0]!;
  const expert = size(e.gate) + size(e.up) + size(e.down);
  const shared = m.shared ? size(m.shared.gate) + size(m.shared.up) + size(m.shared.down) : 0;
  return size(m.router) + m.topK * expert + shared + (m.sharedGate ? size(m.sharedGate) : 0);
}

/** Σ size(w) over the weights one decode step reads for one token (active experts only;
 * the embedding row is negligible; the LM head is read in full). */
function weightsPerToken(w: ModelWeights, size: Size): number {
  let total = size(w.lmHead) + size(w.finalNorm);
  for (const l of w.layers) {
    total += size(l.inputNorm) + size(l.postNorm) + mlpPerToken(l.mlp, size);
    const m = l.mixer;
    total += m.kind === 'full'
      ? size(m.qProj) + size(m.kProj) + size(m.vProj) + size(m.oProj)
      : size(m.inProjQkv) + size(m.inProjZ) + size(m.inProjA) + size(m.inProjB) + size(m.conv) + size(m.outProj);
  }
  return total;
}

/** Bytes of weights one decode step reads for one token, as the backend stores them. */
export function weightBytesPerToken(w: ModelWeights, kernels: Pick<AnyKernels, 'storedWeightBytes'>): number {
  return weightsPerToken(w, (x) => kernels.storedWeightBytes(x));
}

/** Weight elements one decode step reads for one token (same walk as weightBytesPerToken). */
function paramsPerToken(w: ModelWeights): number {
  return weightsPerToken(w, (x) => x.rows * x.cols);
}

/** Storage types of the weights one decode step reads (e.g. { q8_0: 170, f32: 49 } weights). */
function weightTypes(w: ModelWeights): Record<string, number> {
  const count: Record<string, number> = {};
  weightsPerToken(w, (x) => {
    count[x.dtype] = (count[x.dtype] ?? 0) + 1;
    return 0;
  });
  return count;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
}

async function probe(kernels: AnyKernels): Promise<number | null> {
  if (kernels.name !== 'wasm') return null;
  const wasmModule = '../kernels/wasm/index.js';
  const mod = (await import(wasmModule)) as { probeBandwidth(k: AnyKernels): number };
  return mod.probeBandwidth(kernels);
}

export async function runBench(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv, options: {
      model: { type: 'string' }, mode: { type: 'string' }, batch: { type: 'string' }, 'prompt-tokens': { type: 'string' },
      'gen-tokens': { type: 'string' }, 'verify-tokens': { type: 'string' }, threads: { type: 'string' }, kernels: { type: 'string' },
      repeat: { type: 'string' }, vocab: { type: 'string' }, quantize: { type: 'string' }, profile: { type: 'boolean' }, json: { type: 'boolean' },
      schema: { type: 'string', multiple: true }, 'decode-ms': { type: 'string' }, overlap: { type: 'string' },
      'accept-rate': { type: 'string' }, 'spec-tokens': { type: 'string' }, 'kv-cache-tokens': { type: 'string' }, seed: { type: 'string' },
      ...SAMPLE_OPTIONS,
    },
  });
  const mode = str(values, 'mode') ?? 'decode';
  if (mode === 'grammar') {
    const decodeMs = str(values, 'decode-ms');
    if (decodeMs !== undefined && !(Number(decodeMs) > 0)) throw new DeltaserveError('bad_request', `--decode-ms must be a positive number of ms (got "${decodeMs}")`);
    const schemas = { files: (values.schema as string[] | undefined) ?? [], decodeMs: decodeMs === undefined ? null : Number(decodeMs) };
    process.stdout.write(`${JSON.stringify(roundNumbers(runGrammarBench(str(values, 'model'), int(values, 'vocab', 1), DEFAULT_MODEL, schemas)))}\n`);
    return;
  }
  if (mode === 'mtp') {
    await benchMtp(values);
    return;
  }
  if (!['decode', 'verify', 'prefill'].includes(mode)) throw new DeltaserveError('bad_request', `--mode must be decode, verify, prefill, grammar or mtp (got "${mode}")`);
  const batch = int(values, 'batch', 1) ?? 1;
  const prompt = int(values, 'prompt-tokens', 1) ?? 128;
  const gen = int(values, 'gen-tokens', 1) ?? 32;
  const verify = int(values, 'verify-tokens', 1) ?? 4;
  const repeat = int(values, 'repeat', 1) ?? 3;
  const kernelName = (str(values, 'kernels') ?? defaultKernels()) as KernelsChoice & string;
  checkKernelsName(kernelName);
  const threads = int(values, 'threads', 1);
  const sample = sampleSettings(values);
  if (sample && mode !== 'decode') throw new DeltaserveError('bad_request', `--sample needs --mode decode (got "${mode}")`);
  const kernels = await createKernels(kernelName, threads);
  const profile = values.profile === true ? new KernelProfile(kernels) : null;
  try {
    const q = str(values, 'quantize');
    const quantize = q !== undefined ? parseQuantizeMode(q) : undefined;
    const model = await withLoadQuantizer(quantize, kernels, (quantizer) =>
      loadModel(resolve(str(values, 'model') ?? DEFAULT_MODEL), profile?.kernels ?? kernels, { ...(quantize ? { quantize } : {}), ...(quantizer ? { quantizer } : {}) }));
    if (sample && kernels.name === 'webgpu') throw new DeltaserveError('bad_request', '--sample times host-side sampling over CPU kernels: use --kernels cpu');
    if (sample) {
      const slot = new Int32Array(1);
      const argmax = (row: Float32Array, n: number): number => (kernels.argmax(slot, row, 1, n), slot[0]!);
      process.stdout.write(JSON.stringify(roundNumbers(benchSampling(model, batch, prompt, gen, repeat, sample, argmax))) + '\n');
      return;
    }
    const rng = new Rng(1);
    // decode on a GPU backend: overlapped as the engine's greedy decode (--overlap off: the plain loop)
    const overlap = mode === 'decode' && kernels.limits.deviceMemoryBytes !== null && overlapFlag(str(values, 'overlap'));
    await benchOnce(model, mode, batch, Math.min(prompt, 16), 2, verify, rng, undefined, undefined, overlap); // warm-up
    const gpu = gpuCounters(kernels);
    const emulation = emulationWarning(kernels);
    if (emulation) process.stderr.write(`deltaserve: ${emulation}\n`);
    const runs: Run[] = [];
    // The probe runs right before every run (the machine's load changes by the second);
    // the roofline uses the median probe.
    const probes: number[] = [];
    const once = async (onTimed?: () => void): Promise<Run> => {
      const run = await benchOnce(model, mode, batch, prompt, gen, verify, rng, onTimed, (on) => profile?.setEnabled(on), overlap);
      runs.push(run);
      return run;
    };
    // webgpu: the last run is also the counted one (step timestamps on: two queries a step);
    // --profile adds a run with a timed pass per dispatch, outside `runs`
    let gpuFields: Record<string, unknown> | null = null;
    for (let r = 0; r < repeat; r++) {
      const bw = await probe(kernels);
      if (bw !== null) probes.push(bw);
      if (gpu && r === repeat - 1) {
        gpuFields = await gpuStepReport(gpu, once, profile ? (onTimed) => benchOnce(model, mode, batch, prompt, gen, verify, rng, onTimed, undefined, overlap) : null);
      } else await once();
      if (process.stderr.isTTY) process.stderr.write(`\rbench ${mode}: run ${r + 1}/${repeat}`);
    }
    if (process.stderr.isTTY) process.stderr.write('\n');
    const bandwidth = probes.length > 0 ? median(probes) : null;
    const result: Record<string, unknown> = { ...report(model, kernels, mode, batch, prompt, verify, runs, bandwidth), gen_tokens: gen, overlap };
    if (profile) {
      const steps = runs.reduce((a, r) => a + r.steps, 0);
      result['profile'] = profile.report(steps, runs.reduce((a, r) => a + r.ms, 0));
    }
    const gpuReport = gpu ? { ...kernelsFields(kernels, kernelName), gpu: gpuFields } : {};
    const full = roundNumbers({ ...result, ...gpuReport });
    if (values.json === true || profile) process.stdout.write(JSON.stringify(full) + '\n');
    else process.stdout.write(formatBenchTable(full as BenchReport));
  } finally {
    kernels.dispose();
  }
}

/** --sample's settings for --mode mtp (null: greedy); logprobs are not part of it. */
function mtpSampling(values: ArgValues): SamplingParams | null {
  const s = sampleSettings(values);
  if (s && s.logprobs >= 0) throw new DeltaserveError('bad_request', '--logprobs is not measured by --mode mtp (drop it, or use --mode decode --sample)');
  return s?.sampling ?? null;
}

/** `--mode mtp` (bench-mtp.ts): the engines end to end, then the round's parts timed on a
 * model loaded here; always one JSON object. */
async function benchMtp(values: ArgValues): Promise<void> {
  const kernelName = str(values, 'kernels') ?? defaultKernels();
  checkKernelsName(kernelName);
  const q = str(values, 'quantize');
  const quantize = q !== undefined ? parseQuantizeMode(q) : undefined;
  const kv = int(values, 'kv-cache-tokens', 1);
  const threads = int(values, 'threads', 1);
  const dir = resolve(str(values, 'model') ?? DEFAULT_MODEL);
  const o = {
    engine: { model: dir, kernels: kernelName as KernelsChoice, ...(threads !== undefined ? { threads } : {}),
      ...(quantize ? { quantize } : {}), ...(kv !== undefined ? { kvCacheTokens: kv } : {}) },
    specTokens: int(values, 'spec-tokens', 1) ?? 3, acceptRates: parseAcceptRates(str(values, 'accept-rate')),
    batch: int(values, 'batch', 1) ?? 1, genTokens: int(values, 'gen-tokens', 2) ?? 32, repeat: int(values, 'repeat', 1) ?? 3,
    seed: int(values, 'seed', 0) ?? 1, phasePrompt: int(values, 'prompt-tokens', 1) ?? 32,
    sampling: mtpSampling(values),
  };
  const e2e = await runMtpBench(o);
  const kernels = await createKernels(kernelName as KernelsChoice, threads);
  try {
    const model = await withLoadQuantizer(quantize, kernels, (quantizer) =>
      loadModel(dir, kernels, { ...(quantize ? { quantize } : {}), ...(quantizer ? { quantizer } : {}) }));
    process.stdout.write(JSON.stringify(roundNumbers(withPhases(e2e, await mtpRoundPhases(model, o)))) + '\n');
  } finally {
    kernels.dispose();
  }
}

/** --overlap on|off (default on). */
function overlapFlag(s: string | undefined): boolean {
  if (s === undefined || s === 'on') return true;
  if (s === 'off') return false;
  throw new DeltaserveError('bad_request', `--overlap must be on or off (got "${s}")`);
}

function report(model: AnyModel, kernels: AnyKernels, mode: string, batch: number, prompt: number, verify: number, runs: Run[],
  bandwidth: number | null): Record<string, unknown> {
  const tokS = runs.map((r) => (r.tokens * 1000) / r.ms);
  const msStep = runs.map((r) => r.ms / r.steps);
  const perToken = weightBytesPerToken(model.weights, model.kernels);
  const stepMs = median(msStep);
  // a decode/verify step reads every weight once, whatever the batch
  const achieved = mode === 'prefill' ? null : perToken / (stepMs * 1e6);
  // Matmul FLOPs actually run (attention scores and the recurrence are not counted): every
  // row passes every layer; lm_head runs for the last prompt position only in prefill.
  const headParams = model.weights.lmHead.rows * model.weights.lmHead.cols;
  const bodyParams = paramsPerToken(model.weights) - headParams;
  const rowsPerRun = mode === 'prefill' ? batch * prompt : batch * (mode === 'verify' ? verify : 1);
  const headRows = mode === 'prefill' ? batch : rowsPerRun;
  const flopsPerStep = 2 * (bodyParams * rowsPerRun + headParams * headRows);
  return {
    mode, batch, threads: kernels.threads, kernels: kernels.name,
    // a speed figure names the machine and runtime it was measured on
    cpu: cpus()[0]?.model ?? 'unknown', node: process.version,
    // weights on 4 KB or 2 MB pages: worth 6–17% of decode on a VM (util/huge-pages.ts)
    ...thpFields(),
    ...('variant' in kernels ? { kernel_variant: (kernels as { variant: string }).variant } : {}),
    ...('q8u4' in kernels ? { q8_0_layout: kernels.q8u4 ? 'q8u4' : 'q8x4' } : {}),
    ...('calibration' in kernels && kernels.calibration ? { quant_kernels: kernels.calibration } : {}), model: model.dir,
    prompt_tokens: prompt, ...(mode === 'verify' ? { verify_tokens: verify } : {}),
    weight_types: weightTypes(model.weights),
    tok_s: { median: median(tokS), min: Math.min(...tokS), max: Math.max(...tokS) },
    ms_per_step: { median: stepMs, min: Math.min(...msStep), max: Math.max(...msStep) },
    weight_bytes_per_token: mode === 'prefill' ? perToken / (batch * prompt) : perToken / (mode === 'verify' ? batch * verify : batch),
    weight_bytes_per_step: perToken,
    achieved_gbs: achieved,
    bandwidth_gbs: bandwidth,
    roofline_fraction: achieved !== null && bandwidth ? achieved / bandwidth : null,
    roofline_tok_s: bandwidth && mode !== 'prefill' ? (bandwidth * 1e9 * batch) / perToken : null,
    matmul_gflop_s: flopsPerStep / (stepMs * 1e6),
    peak_rss_mb: process.resourceUsage().maxRSS / 1024,
    repeat: runs.length,
  };
}

function thpFields(): Record<string, unknown> {
  const h = hugePageStatus();
  return { transparent_huge_pages: h.thp, anon_huge_pages_mb: h.anonHugeMb };
}
