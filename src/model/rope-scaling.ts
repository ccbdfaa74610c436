// RoPE scaling from `rope_scaling` / `rope_parameters`: 'default' (none),
// 'linear' (positions interpolated by `factor`) and 'yarn' (NTK-by-parts interpolation plus
// an attention factor on cos/sin), with the formulas of the YaRN paper as implemented by
// the reference stacks (HF `_compute_yarn_parameters`, vLLM YaRNScalingRotaryEmbedding).
// Any other rope_type is a load error naming it — never silently dropped.
//
// Context: YaRN extends the context to original_max_position_embeddings · factor (vLLM's
// rule; Qwen documents `factor` 4 over 262,144 for ~1M tokens). Inverse frequencies are
// computed in f64 once at load; Kernels.rope applies them (ropeTableOf).
import { DeltaserveError } from '../util/errors.js';
import type { RopeTable } from '../kernels/types.js';
import { plainRopeTable } from '../kernels/rope-table.js';

export interface RopeScaling {
  readonly type: 'linear' | 'yarn';
  readonly factor: number;
  /** [rotaryDim / 2] inverse frequency of each rotated pair. */
  readonly invFreq: Float64Array;
  /** Multiplies cos and sin (YaRN's attention factor; 1 for linear). */
  readonly attentionFactor: number;
  /** The context the scaled model supports. */
  readonly maxPositions: number;
}

type Json = Record<string, unknown>;

const KNOWN = ['default', 'linear', 'yarn'];

function num(obj: Json, key: string, where: string, fallback?: number): number {
  const v = obj[key];
  if (v === undefined || v === null) {
    if (fallback !== undefined) return fallback;
    throw new DeltaserveError('bad_config', `${where}: field "${key}" is missing`);
  }
  if (typeof v !== 'number' || !Number.isFinite(v)) throw new DeltaserveError('bad_config', `${where}: field "${key}" must be a number (got ${JSON.stringify(v)})`);
  return v;
}

/** YaRN's mscale: 0.1·mscale·ln(scale) + 1 for scale > 1, else 1. */
export function yarnMscale(scale: number, mscale = 1): number {
  return scale <= 1 ? 1 : 0.1 * mscale * Math.log(scale) + 1;
}

/** The rotated dimension index whose wavelength makes `rotations` turns over `maxPos`. */
function correctionDim(rotations: number, dim: number, base: number, maxPos: number): number {
  return (dim * Math.log(maxPos / (rotations * 2 * Math.PI))) / (2 * Math.log(base));
}

/** YaRN inverse frequencies and attention factor (see the file comment). */
export function yarnParameters(o: { dim: number; base: number; factor: number; originalMax: number;
  betaFast?: number; betaSlow?: number; mscale?: number; mscaleAllDim?: number; attentionFactor?: number; truncate?: boolean }):
  { invFreq: Float64Array; attentionFactor: number; low: number; high: number } {
  const { dim, base, factor } = o;
  let low = correctionDim(o.betaFast ?? 32, dim, base, o.originalMax);
  let high = correctionDim(o.betaSlow ?? 1, dim, base, o.originalMax);
  if (o.truncate ?? true) {
    low = Math.floor(low);
    high = Math.ceil(high);
  }
  low = Math.max(low, 0);
  high = Math.min(high, dim - 1);
  const span = low === high ? 0.001 : high - low;
  const half = dim / 2;
  const invFreq = new Float64Array(half);
  for (let i = 0; i < half; i++) {
    const ramp = Math.min(Math.max((i - low) / span, 0), 1);
    const extrapolation = 1 - ramp; // 1: keep the original frequency, 0: interpolate
    const extra = 1 / Math.pow(base, (2 * i) / dim);
    invFreq[i] = (extra / factor) * (1 - extrapolation) + extra * extrapolation;
  }
  const attentionFactor = o.attentionFactor ?? (o.mscale && o.mscaleAllDim
    ? yarnMscale(factor, o.mscale) / yarnMscale(factor, o.mscaleAllDim) : yarnMscale(factor));
  return { invFreq, attentionFactor, low, high };
}

/** Parse the scaling of a rope config object (`rope_parameters`, or `rope_scaling` merged
 * over it); null for 'default' / absent. */
export function parseRopeScaling(rope: Json | null, o: { base: number; rotaryDim: number; maxPositions: number; where: string }): RopeScaling | null {
  if (!rope) return null;
  const rawType = rope['rope_type'] ?? rope['type'];
  const type = rawType === undefined || rawType === null ? 'default' : rawType;
  if (typeof type !== 'string' || !KNOWN.includes(type)) {
    throw new DeltaserveError('bad_config',
      `${o.where}: rope type ${JSON.stringify(type)} is not supported (supported: ${KNOWN.join(', ')})`);
  }
  if (type === 'default') return null;
  const factor = num(rope, 'factor', o.where);
  if (!(factor >= 1)) throw new DeltaserveError('bad_config', `${o.where}: rope scaling "factor" must be ≥ 1 (got ${factor})`);
  const originalMax = num(rope, 'original_max_position_embeddings', o.where, o.maxPositions);
  if (type === 'linear') {
    const invFreq = new Float64Array(o.rotaryDim / 2).map((_, i) => 1 / Math.pow(o.base, (2 * i) / o.rotaryDim) / factor);
    return { type: 'linear', factor, invFreq, attentionFactor: 1, maxPositions: Math.floor(originalMax * factor) };
  }
  const opt = (k: string): number | undefined => (rope[k] === undefined || rope[k] === null ? undefined : num(rope, k, o.where));
  const truncate = rope['truncate'];
  const p = yarnParameters({
    dim: o.rotaryDim, base: o.base, factor, originalMax,
    ...(opt('beta_fast') !== undefined ? { betaFast: opt('beta_fast')! } : {}),
    ...(opt('beta_slow') !== undefined ? { betaSlow: opt('beta_slow')! } : {}),
    ...(opt('mscale') !== undefined ? { mscale: opt('mscale')! } : {}),
    ...(opt('mscale_all_dim') !== undefined ? { mscaleAllDim: opt('mscale_all_dim')! } : {}),
    ...(opt('attention_factor') !== undefined ? { attentionFactor: opt('attention_factor')! } : {}),
    ...(typeof truncate === 'boolean' ? { truncate } : {}),
  });
  return { type: 'yarn', factor, invFreq: p.invFreq, attentionFactor: p.attentionFactor, maxPositions: Math.floor(originalMax * factor) };
}

/** The RoPE table of a model: its scaling's inverse frequencies and attention factor, or
 * the plain θ^(−2f/R) table. Built once per config (Kernels.rope runs every form). */
export function ropeTableOf(cfg: { readonly ropeTheta: number; readonly rotaryDim: number; readonly ropeScaling?: RopeScaling | null }): RopeTable {
  let t = TABLES.get(cfg);
  if (!t) {
    const s = cfg.ropeScaling;
    t = s ? { invFreq: s.invFreq, scale: s.attentionFactor } : plainRopeTable(cfg.ropeTheta, cfg.rotaryDim);
    TABLES.set(cfg, t);
  }
  return t;
}

const TABLES = new WeakMap<object, RopeTable>();
