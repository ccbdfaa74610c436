// Flags every engine-driving command shares (generate, serve, eval, bench).
import { resolve } from 'node:path';
import type { EngineOptions } from '../engine/engine.js';
import { autoDecision, defaultKernels, gpuAdapterOf, KERNEL_NAMES, type KernelsChoice } from '../kernels/index.js';
import type { AnyKernels } from '../kernels/types.js';
import { describeAdapter } from '../kernels/webgpu/device.js';
export { defaultKernels };
import { DeltaserveError } from '../util/errors.js';
import { isHubReference } from '../hub/resolve.js';
import { BUILTIN_MODEL } from '../hub/builtin.js';
import { type ArgValues, int, str } from './args.js';
import { parseQuantizeMode } from '../checkpoint/quantize-load.js';
import { checkPrefixCacheDir } from '../engine/prefix-persist.js';
import { isSpecSampling, type SpecSampling } from '../engine/speculative/accept.js';

/** The built-in default model, shipped in the repository and the package. */
export const DEFAULT_MODEL = BUILTIN_MODEL;

export const ENGINE_FLAGS = {
  model: { type: 'string' },
  mmproj: { type: 'string' },
  'no-mmproj': { type: 'boolean' },
  kernels: { type: 'string' },
  threads: { type: 'string' },
  quantize: { type: 'string' },
  'max-running': { type: 'string' },
  'max-prefill-tokens': { type: 'string' },
  'page-size': { type: 'string' },
  'kv-cache-tokens': { type: 'string' },
  'max-context': { type: 'string' },
  'spec-tokens': { type: 'string' },
  'spec-adaptive': { type: 'string' },
  'spec-redrafts': { type: 'string' },
  'spec-sampling': { type: 'string' },
  'overlap': { type: 'string' },
  'draft-vocab': { type: 'string' },
  'no-prefix-cache': { type: 'boolean' },
  'state-track-interval': { type: 'string' },
  'cache-state-slots': { type: 'string' },
  'memory-budget': { type: 'string' },
  'prefix-cache-dir': { type: 'string' },
  'prefix-cache-disk-bytes': { type: 'string' },
} as const;

export const ENGINE_FLAGS_HELP = `  --model PATH|ORG/NAME[@REV][:QUANT]  model directory, .gguf file (or the first part of a
                            split GGUF), a directory holding one GGUF, or a Hugging Face repo:
                            ORG/NAME (safetensors) or ORG/NAME:Q4_K_M (that quantization's GGUF
                            and the repo's mmproj); from the HF cache (HF_HOME, HF_HUB_CACHE), else
                            downloaded from HF_ENDPOINT (size first, then progress; token HF_TOKEN;
                            "deltaserve pull" downloads only, "deltaserve list" shows the cache);
                            HF_HUB_OFFLINE=1: cache only (default: built-in tiny-think)
  --mmproj FILE             the vision tower from llama.cpp's projector GGUF (mmproj-….gguf),
                            beside a text GGUF or a model directory (default: the projector a
                            ORG/NAME:QUANT reference downloaded, else a release checkpoint's tower)
  --no-mmproj               load no vision tower (text only; images are refused)
  --kernels auto|cpu|wasm|ref|webgpu  kernel backend (default cpu: wasm when built, else ref);
                            webgpu: the GPU through WebGPU (Dawn; also a CPU emulation such as
                            lavapipe); auto: webgpu on a GPU that is not a CPU emulation, else cpu
  --threads N               compute threads (default: available cores)
  --quantize q8_0|q4_k      quantize BF16/F32 matmul weights to GGML blocks as they load
  --max-running N           max concurrent requests in a batch (default 16)
  --max-prefill-tokens N    prefill token budget per step (default 512, ≥ 64)
  --page-size N             KV page size in tokens (default 16)
  --kv-cache-tokens N       KV pool capacity in tokens (default: what the memory budget allows, up to max(context, 16384))
  --max-context N           context length cap (default: the model's, lowered to what the memory budget allows)
  --spec-tokens K           MTP speculative draft tokens per round (default 3 with an MTP head; 0 = off)
  --spec-adaptive on|off    adapt k to measured throughput (default on)
  --spec-redrafts N         GPU: extra MTP draft passes a round may run where the exact replay
                            overrules a device draft (a grammar-refused pick); default 0: the
                            chain ends there, a round reads back at most twice
  --spec-sampling auto|match|rejection  how sampled requests' drafts are verified: match
                            (the draw MTP off makes: a seed gives MTP off's tokens at any k),
                            rejection (rejection sampling: the same distribution, more drafts
                            accepted where they are uncertain; a seed's tokens depend on k, so
                            a seeded request keeps k); auto (default): match for a request that
                            names its seed, rejection for one that does not
  --overlap on|off          GPU: record each decode step while the one before it runs (its
                            greedy picks and top-k draws stay on the device), and read
                            a greedy or seeded sampled MTP round's drafts back with its
                            verify (the same outputs; default on, lavapipe's included)
  --draft-vocab N           MTP drafts among token ids < N only: a cheaper draft lm_head,
                            lossless for any N (default 32768)
  --no-prefix-cache         disable the prefix cache (radix tree + recurrent-state snapshots)
  --state-track-interval N  snapshot interval in tokens (default 256; multiple of 64 and of --page-size)
  --cache-state-slots N     state slots for cached snapshots (default 4 × --max-running)
  --memory-budget BYTES|PCT memory for KV pages, state slots and verify scratch: bytes (8G, 6GiB)
                            or a percentage of the memory available after the weights (default 80%);
                            unset pool sizes and --max-context follow from it
  --prefix-cache-dir DIR    keep the prefix cache on disk: loaded at start, saved when idle
                            (at most once a minute) and at shutdown
  --prefix-cache-disk-bytes N  bound on the saved cache (LRU; default 2147483648)`;

export function engineOptions(v: ArgValues): EngineOptions {
  const kernels = str(v, 'kernels') ?? defaultKernels();
  if (str(v, 'kernels') === undefined && kernels === 'ref' && process.env['DELTASERVE_KERNELS'] !== 'ref') {
    process.stderr.write('deltaserve: warning: the WebAssembly kernels are not built (build/kernels.wasm): using the reference ' +
      'kernels, several times slower; run `npm run build` in a checkout, or reinstall the package\n');
  }
  checkKernelsName(kernels);
  return {
    model: modelArg(str(v, 'model') ?? DEFAULT_MODEL),
    ...mmprojArg(v),
    kernels: kernels as KernelsChoice,
    ...(int(v, 'threads', 1) !== undefined ? { threads: int(v, 'threads', 1)! } : {}),
    ...(str(v, 'quantize') !== undefined ? { quantize: parseQuantizeMode(str(v, 'quantize')!) } : {}),
    ...(int(v, 'max-running', 1) !== undefined ? { maxRunning: int(v, 'max-running', 1)! } : {}),
    ...(int(v, 'max-prefill-tokens', 1) !== undefined ? { maxPrefillTokens: int(v, 'max-prefill-tokens', 1)! } : {}),
    ...(int(v, 'page-size', 1) !== undefined ? { pageSize: int(v, 'page-size', 1)! } : {}),
    ...(int(v, 'kv-cache-tokens', 1) !== undefined ? { kvCacheTokens: int(v, 'kv-cache-tokens', 1)! } : {}),
    ...(int(v, 'max-context', 2) !== undefined ? { maxContext: int(v, 'max-context', 2)! } : {}),
    ...(int(v, 'spec-tokens', 0) !== undefined ? { specTokens: int(v, 'spec-tokens', 0)! } : {}),
    ...(onOff(v, 'spec-adaptive') !== undefined ? { specAdaptive: onOff(v, 'spec-adaptive')! } : {}),
    ...(int(v, 'spec-redrafts', 0) !== undefined ? { specRedrafts: int(v, 'spec-redrafts', 0)! } : {}),
    ...(str(v, 'spec-sampling') !== undefined ? { specSampling: specSamplingArg(str(v, 'spec-sampling')!) } : {}),
    ...(onOff(v, 'overlap') !== undefined ? { overlapSteps: onOff(v, 'overlap')! } : {}),
    ...(int(v, 'draft-vocab', 1) !== undefined ? { draftVocab: int(v, 'draft-vocab', 1)! } : {}),
    ...(v['no-prefix-cache'] ? { prefixCache: false } : {}),
    ...(int(v, 'state-track-interval', 1) !== undefined ? { stateTrackInterval: int(v, 'state-track-interval', 1)! } : {}),
    ...(int(v, 'cache-state-slots', 0) !== undefined ? { cacheStateSlots: int(v, 'cache-state-slots', 0)! } : {}),
    ...(str(v, 'memory-budget') !== undefined ? { memoryBudget: str(v, 'memory-budget')! } : {}),
    ...(str(v, 'prefix-cache-dir') !== undefined ? { prefixCacheDir: prefixCacheDirArg(str(v, 'prefix-cache-dir')!) } : {}),
    ...(int(v, 'prefix-cache-disk-bytes', 0) !== undefined ? { prefixCacheDiskBytes: int(v, 'prefix-cache-disk-bytes', 0)! } : {}),
  };
}

/** The backend that runs, for the ready line: its name, the GPU adapter (vendor,
 * architecture, limits) on webgpu, and why `auto` chose it — one sentence. */
export function kernelsLine(k: AnyKernels, asked: KernelsChoice | undefined): string {
  const a = gpuAdapterOf(k);
  const auto = asked === 'auto' ? autoDecision() : null;
  return `${k.name}${a ? ` on ${describeAdapter(a)}` : ''}${auto ? `, chosen by auto: ${auto.reason}` : ''}`;
}

/** A warning when the backend is WebGPU on a CPU emulation (lavapipe / llvmpipe,
 * SwiftShader, WARP): there the wasm kernels are far faster (null otherwise). */
export function emulationWarning(k: AnyKernels): string | null {
  const a = gpuAdapterOf(k);
  if (!a?.cpuEmulation) return null;
  return `warning: the WebGPU adapter "${a.description || a.device || a.vendor}" is a CPU emulation, not a GPU: ` +
    'the wasm kernels are many times faster on this machine (--kernels cpu, or auto)';
}

/** The kernels line (for --kernels auto|webgpu) and the CPU-emulation warning, on stderr. */
export function reportKernels(k: AnyKernels, asked: KernelsChoice | undefined): void {
  if (asked === 'auto' || asked === 'webgpu') process.stderr.write(`deltaserve: kernels ${kernelsLine(k, asked)}\n`);
  const warning = emulationWarning(k);
  if (warning) process.stderr.write(`deltaserve: ${warning}\n`);
}

/** The same as fields of a JSON log record or report. */
export function kernelsFields(k: AnyKernels, asked: KernelsChoice | undefined): Record<string, unknown> {
  const a = gpuAdapterOf(k);
  const auto = asked === 'auto' ? autoDecision() : null;
  return {
    kernels: k.name,
    ...(a ? { adapter: { vendor: a.vendor, architecture: a.architecture, device: a.device, description: a.description,
      cpu_emulation: a.cpuEmulation, features: a.features, limits: a.limits } } : {}),
    ...(auto ? { kernels_auto: auto.reason } : {}),
  };
}

/** --kernels VALUE is one of the backends' names (a one-line error otherwise). */
export function checkKernelsName(kernels: string): void {
  if (!(KERNEL_NAMES as readonly string[]).includes(kernels)) {
    throw new DeltaserveError('bad_request', `--kernels must be one of ${KERNEL_NAMES.join(', ')} (got "${kernels}")`);
  }
}

/** The directory made absolute, created and proven writable now: an unusable one fails
 * at start, before the model loads. */
function prefixCacheDirArg(dir: string): string {
  const abs = resolve(dir);
  checkPrefixCacheDir(abs);
  return abs;
}

/** A local path (made absolute), or a hub reference `org/name[@rev][:QUANT]` kept as is. */
function modelArg(m: string): string {
  return isHubReference(m) ? m : resolve(m);
}

/** --mmproj FILE (made absolute) or --no-mmproj (false); not both. */
function mmprojArg(v: ArgValues): { mmproj?: string | false } {
  const file = str(v, 'mmproj');
  if (file !== undefined && v['no-mmproj']) throw new DeltaserveError('bad_request', '--mmproj and --no-mmproj exclude each other');
  if (file !== undefined) return { mmproj: resolve(file) };
  return v['no-mmproj'] ? { mmproj: false } : {};
}

/** An on|off flag's value (undefined: not given). */
function specSamplingArg(s: string): SpecSampling {
  if (isSpecSampling(s)) return s;
  throw new DeltaserveError('bad_request', `--spec-sampling must be auto, match or rejection (got "${s}")`);
}

function onOff(v: ArgValues, name: string): boolean | undefined {
  const s = str(v, name);
  if (s === undefined) return undefined;
  if (s === 'on' || s === 'off') return s === 'on';
  throw new DeltaserveError('bad_request', `--${name} must be on or off (got "${s}")`);
}
