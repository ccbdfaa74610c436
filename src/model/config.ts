// Parse a Hugging Face config.json of the Qwen3.5 / Qwen3-Next family into one readonly,
// validated ModelConfig. Every missing or invalid field is an error naming it.
import { readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { DeltaserveError } from '../util/errors.js';
import { type RopeScaling, parseRopeScaling } from './rope-scaling.js';
import { fp8BlockSize } from '../checkpoint/fp8.js';
import { VISION_PREFIX, type VisionConfig, parseVisionConfig } from '../vision/config.js';

/** Tensor-name prefix of a release checkpoint's vision tower (skipped by the text model). */
export { VISION_PREFIX };

export type Architecture = 'qwen3_5' | 'qwen3_5_moe' | 'qwen3_next';
export type LayerKind = 'linear' | 'full';

export interface DenseMlpConfig {
  readonly kind: 'dense';
  readonly intermediateSize: number;
}
export interface MoeMlpConfig {
  readonly kind: 'moe';
  readonly numExperts: number;
  readonly topK: number;
  readonly expertIntermediateSize: number;
  /** 0 when the model has no shared expert. */
  readonly sharedIntermediateSize: number;
  readonly normTopkProb: boolean;
}
export type MlpConfig = DenseMlpConfig | MoeMlpConfig;

export interface ModelConfig {
  readonly modelType: string;
  readonly arch: Architecture;
  readonly hiddenSize: number;
  readonly numLayers: number;
  readonly vocabSize: number;
  readonly layerKinds: readonly LayerKind[];
  /** MLP of every decoder layer (dense layers of MoE models via mlp_only_layers). */
  readonly layerMlp: readonly MlpConfig[];
  /** MLP of the MTP decoder layer(s). */
  readonly mtpMlp: MlpConfig;
  readonly rmsNormEps: number;
  // gated full attention
  readonly numHeads: number;
  readonly numKvHeads: number;
  readonly headDim: number;
  readonly rotaryDim: number;
  readonly ropeTheta: number;
  /** rope_scaling / rope_parameters beyond 'default' (linear, YaRN); null = plain RoPE. */
  readonly ropeScaling?: RopeScaling | null;
  /** q_proj carries a per-head output gate (attn_output_gate; absent ⇒ true). */
  readonly attnOutputGate?: boolean;
  /** Block size of a block-wise FP8 checkpoint (quantization_config), else null/absent. */
  readonly fp8Block?: readonly [number, number] | null;
  // Gated DeltaNet
  readonly linNumKeyHeads: number;
  readonly linNumValueHeads: number;
  readonly linKeyDim: number;
  readonly linValueDim: number;
  readonly convKernel: number;
  // head, MTP, tokens
  readonly tieWordEmbeddings: boolean;
  readonly mtpLayers: number;
  readonly maxPositionEmbeddings: number;
  readonly eosTokenIds: readonly number[];
  /** Prefix of the text model's tensors ('model.language_model.' or 'model.'). */
  readonly weightPrefix: string;
  /** The vision tower of a release config (`vision_config`); null/absent: text-only. */
  readonly vision?: VisionConfig | null;
}

type Json = Record<string, unknown>;

class Fields {
  constructor(private readonly obj: Json, private readonly where: string) {}
  private bad(key: string, what: string): never {
    throw new DeltaserveError('bad_config', `${this.where}: field "${key}" ${what}`);
  }
  has(key: string): boolean {
    return this.obj[key] !== undefined && this.obj[key] !== null;
  }
  int(key: string, fallback?: number, min = 1): number {
    const v = this.obj[key];
    if (v === undefined || v === null) {
      if (fallback !== undefined) return fallback;
      this.bad(key, 'is missing');
    }
    if (typeof v !== 'number' || !Number.isInteger(v)) this.bad(key, `must be an integer (got ${JSON.stringify(v)})`);
    if (v < min) this.bad(key, `must be ≥ ${min} (got ${v})`);
    return v;
  }
  num(key: string, fallback?: number): number {
    const v = this.obj[key];
    if (v === undefined || v === null) {
      if (fallback !== undefined) return fallback;
      this.bad(key, 'is missing');
    }
    if (typeof v !== 'number' || !Number.isFinite(v)) this.bad(key, `must be a number (got ${JSON.stringify(v)})`);
    return v;
  }
  bool(key: string, fallback: boolean): boolean {
    const v = this.obj[key];
    if (v === undefined || v === null) return fallback;
    if (typeof v !== 'boolean') this.bad(key, `must be true or false (got ${JSON.stringify(v)})`);
    return v;
  }
  intList(key: string): number[] | undefined {
    const v = this.obj[key];
    if (v === undefined || v === null) return undefined;
    const list = typeof v === 'number' ? [v] : v;
    if (!Array.isArray(list) || !list.every((x) => Number.isInteger(x))) this.bad(key, 'must be an integer or a list of integers');
    return list as number[];
  }
  raw(key: string): unknown {
    return this.obj[key];
  }
}

const SUPPORTED = ['qwen3_5_text', 'qwen3_5', 'qwen3_5_moe', 'qwen3_5_moe_text', 'qwen3_next'];

/** Read config.json (and generation_config.json for stop ids) from a model directory. */
export function loadModelConfig(dir: string): ModelConfig {
  const path = join(dir, 'config.json');
  if (!existsSync(path)) throw new DeltaserveError('bad_config', `no config.json in model directory ${dir}`);
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(path, 'utf8'));
  } catch (e) {
    throw new DeltaserveError('bad_config', `${path}: not valid JSON (${(e as Error).message})`);
  }
  const genPath = join(dir, 'generation_config.json');
  let gen: Json = {};
  if (existsSync(genPath)) {
    try {
      gen = JSON.parse(readFileSync(genPath, 'utf8')) as Json;
    } catch (e) {
      throw new DeltaserveError('bad_config', `${genPath}: not valid JSON (${(e as Error).message})`);
    }
  }
  return parseModelConfig(json, path, gen);
}

/** Normalise a parsed config.json object. `where` names the file in error messages. */
export function parseModelConfig(json: unknown, where = 'config.json', generation: Json = {}): ModelConfig {
  if (typeof json !== 'object' || json === null || Array.isArray(json)) {
    throw new DeltaserveError('bad_config', `${where}: expected a JSON object`);
  }
  const outer = json as Json;
  const modelType = outer['model_type'];
  if (typeof modelType !== 'string') throw new DeltaserveError('bad_config', `${where}: field "model_type" is missing`);
  if (!SUPPORTED.includes(modelType)) {
    throw new DeltaserveError('bad_config',
      `${where}: unsupported model_type "${modelType}" (supported: ${SUPPORTED.join(', ')})`);
  }
  // Qwen3.5 multimodal wrappers nest the text model under text_config.
  let text = outer;
  let weightPrefix = 'model.';
  if ((modelType === 'qwen3_5' || modelType === 'qwen3_5_moe') && outer['text_config'] !== undefined) {
    const tc = outer['text_config'];
    if (typeof tc !== 'object' || tc === null) throw new DeltaserveError('bad_config', `${where}: field "text_config" must be an object`);
    text = tc as Json;
    weightPrefix = 'model.language_model.';
  } else if (modelType.startsWith('qwen3_5')) {
    weightPrefix = 'model.language_model.';
  }
  const arch: Architecture = modelType === 'qwen3_next' ? 'qwen3_next' : modelType.startsWith('qwen3_5_moe') ? 'qwen3_5_moe' : 'qwen3_5';
  const f = new Fields(text, text === outer ? where : `${where} (text_config)`);

  const hiddenSize = f.int('hidden_size');
  const numLayers = f.int('num_hidden_layers');
  const vocabSize = f.int('vocab_size');
  const layerKinds = parseLayerKinds(f, numLayers);
  const numHeads = f.int('num_attention_heads');
  const numKvHeads = f.int('num_key_value_heads');
  if (numHeads % numKvHeads !== 0) {
    throw new DeltaserveError('bad_config', `${where}: num_attention_heads (${numHeads}) must be a multiple of num_key_value_heads (${numKvHeads})`);
  }
  const headDim = f.int('head_dim', Math.floor(hiddenSize / numHeads));
  const rope = parseRope(f, text, headDim, where);
  const maxPositions = f.int('max_position_embeddings', 32768);
  const ropeScaling = parseRopeScaling(ropeScalingJson(text), { base: rope.theta, rotaryDim: rope.rotaryDim, maxPositions, where });
  const linNumKeyHeads = f.int('linear_num_key_heads');
  const linNumValueHeads = f.int('linear_num_value_heads');
  if (linNumValueHeads % linNumKeyHeads !== 0) {
    throw new DeltaserveError('bad_config', `${where}: linear_num_value_heads (${linNumValueHeads}) must be a multiple of linear_num_key_heads (${linNumKeyHeads})`);
  }
  const { layerMlp, mtpMlp } = parseMlps(f, arch, numLayers);
  const mtpLayers = f.has('mtp_num_hidden_layers')
    ? f.int('mtp_num_hidden_layers', 0, 0)
    : arch === 'qwen3_next' ? f.int('num_nextn_predict_layers', 1, 0) : f.int('num_nextn_predict_layers', 0, 0);
  const genFields = new Fields(generation, 'generation_config.json');
  const eos = new Set<number>([...(f.intList('eos_token_id') ?? []), ...(new Fields(outer, where).intList('eos_token_id') ?? []),
    ...(genFields.intList('eos_token_id') ?? [])]);

  const cfg: ModelConfig = {
    modelType, arch, hiddenSize, numLayers, vocabSize, layerKinds, layerMlp, mtpMlp,
    rmsNormEps: f.num('rms_norm_eps', 1e-6),
    numHeads, numKvHeads, headDim, rotaryDim: rope.rotaryDim, ropeTheta: rope.theta, ropeScaling,
    attnOutputGate: f.bool('attn_output_gate', true),
    fp8Block: fp8BlockSize(outer['quantization_config'] !== undefined ? outer : text, where),
    linNumKeyHeads, linNumValueHeads,
    linKeyDim: f.int('linear_key_head_dim'),
    linValueDim: f.int('linear_value_head_dim'),
    convKernel: f.int('linear_conv_kernel_dim', 4, 2),
    tieWordEmbeddings: f.bool('tie_word_embeddings', new Fields(outer, where).bool('tie_word_embeddings', false)),
    mtpLayers,
    maxPositionEmbeddings: Math.max(maxPositions, ropeScaling?.maxPositions ?? 0),
    eosTokenIds: [...eos].filter((id) => id < vocabSize),
    weightPrefix,
    vision: parseVisionConfig(outer, where),
  };
  if (cfg.vision && cfg.vision.outHiddenSize !== hiddenSize) {
    throw new DeltaserveError('bad_config', `${where} (vision_config): out_hidden_size ${cfg.vision.outHiddenSize} must equal the text hidden_size ${hiddenSize}`);
  }
  return Object.freeze(cfg);
}

function parseLayerKinds(f: Fields, numLayers: number): LayerKind[] {
  const types = f.raw('layer_types');
  if (types !== undefined && types !== null) {
    if (!Array.isArray(types) || types.length !== numLayers) {
      throw new DeltaserveError('bad_config', `config field "layer_types" must be a list of ${numLayers} entries (num_hidden_layers)`);
    }
    return types.map((t, i) => {
      if (t === 'linear_attention') return 'linear';
      if (t === 'full_attention') return 'full';
      throw new DeltaserveError('bad_config', `config field "layer_types[${i}]" is "${String(t)}"; expected "linear_attention" or "full_attention"`);
    });
  }
  if (!f.has('full_attention_interval')) {
    throw new DeltaserveError('bad_config', 'config needs "layer_types" or "full_attention_interval" to know which layers are full attention');
  }
  const interval = f.int('full_attention_interval');
  return Array.from({ length: numLayers }, (_, i) => ((i + 1) % interval === 0 ? 'full' : 'linear'));
}

function parseRope(f: Fields, text: Json, headDim: number, where: string): { theta: number; rotaryDim: number } {
  const rp = text['rope_parameters'];
  const src = typeof rp === 'object' && rp !== null ? new Fields(rp as Json, `${where} (rope_parameters)`) : f;
  const theta = src.has('rope_theta') ? src.num('rope_theta') : f.num('rope_theta', 10000);
  const factor = src.has('partial_rotary_factor') ? src.num('partial_rotary_factor') : f.num('partial_rotary_factor', 1);
  if (!(factor > 0 && factor <= 1)) throw new DeltaserveError('bad_config', `${where}: partial_rotary_factor must be in (0, 1] (got ${factor})`);
  const rotaryDim = Math.floor(headDim * factor);
  if (rotaryDim % 2 !== 0) throw new DeltaserveError('bad_config', `${where}: rotary dim head_dim·partial_rotary_factor = ${rotaryDim} must be even`);
  return { theta, rotaryDim };
}

/** The rope config object: `rope_scaling` (when set) over `rope_parameters`; null if neither. */
function ropeScalingJson(text: Json): Json | null {
  const obj = (v: unknown): Json | null => (typeof v === 'object' && v !== null && !Array.isArray(v) ? v as Json : null);
  const params = obj(text['rope_parameters']);
  const scaling = obj(text['rope_scaling']);
  if (!params && !scaling) return null;
  // `type` is the older spelling of `rope_type`
  const scalingType = scaling ? scaling['rope_type'] ?? scaling['type'] : undefined;
  return { ...(params ?? {}), ...(scaling ?? {}), ...(scalingType !== undefined ? { rope_type: scalingType } : {}) };
}

function parseMlps(f: Fields, arch: Architecture, numLayers: number): { layerMlp: MlpConfig[]; mtpMlp: MlpConfig } {
  if (arch === 'qwen3_5') {
    const dense: MlpConfig = { kind: 'dense', intermediateSize: f.int('intermediate_size') };
    return { layerMlp: Array.from({ length: numLayers }, () => dense), mtpMlp: dense };
  }
  const moe: MoeMlpConfig = {
    kind: 'moe',
    numExperts: f.int('num_experts'),
    topK: f.int('num_experts_per_tok'),
    expertIntermediateSize: f.int('moe_intermediate_size'),
    sharedIntermediateSize: f.int('shared_expert_intermediate_size', 0, 0),
    normTopkProb: arch === 'qwen3_5_moe' ? true : f.bool('norm_topk_prob', true),
  };
  if (moe.topK > moe.numExperts) throw new DeltaserveError('bad_config', `config: num_experts_per_tok (${moe.topK}) exceeds num_experts (${moe.numExperts})`);
  const denseOnly = new Set(f.intList('mlp_only_layers') ?? []);
  const step = f.int('decoder_sparse_step', 1);
  const dense: MlpConfig | null = f.has('intermediate_size') ? { kind: 'dense', intermediateSize: f.int('intermediate_size') } : null;
  const layerMlp = Array.from({ length: numLayers }, (_, i): MlpConfig => {
    const sparse = !denseOnly.has(i) && (i + 1) % step === 0;
    if (sparse) return moe;
    if (!dense) throw new DeltaserveError('bad_config', `config: layer ${i} is dense (mlp_only_layers/decoder_sparse_step) but "intermediate_size" is missing`);
    return dense;
  });
  return { layerMlp, mtpMlp: moe };
}

/** Per-token state layout of one Gated DeltaNet layer, in floats. */
export function convDim(cfg: ModelConfig): number {
  return 2 * cfg.linNumKeyHeads * cfg.linKeyDim + cfg.linNumValueHeads * cfg.linValueDim;
}
