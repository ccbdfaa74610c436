// ModelConfig from GGUF metadata (architectures qwen35, qwen35moe, qwen3next): the same
// readonly, validated config config.json gives, so nothing downstream knows the format.
// Keys are `<arch>.<name>`; block_count counts the MTP block(s) too (they come last).
import { parseRopeScaling } from './rope-scaling.js';
import { DeltaserveError } from '../util/errors.js';
import type { Architecture, LayerKind, MlpConfig, ModelConfig } from './config.js';
import type { GgufFile, GgufValue } from '../checkpoint/gguf-file.js';

export const GGUF_ARCHITECTURES = ['qwen35', 'qwen35moe', 'qwen3next'] as const;
export type GgufArch = (typeof GGUF_ARCHITECTURES)[number];

const ARCH: Readonly<Record<GgufArch, { arch: Architecture; modelType: string }>> = {
  qwen35: { arch: 'qwen3_5', modelType: 'qwen3_5_text' },
  qwen35moe: { arch: 'qwen3_5_moe', modelType: 'qwen3_5_moe_text' },
  qwen3next: { arch: 'qwen3_next', modelType: 'qwen3_next' },
};

/** Tensor names are virtual (the Hugging Face names the loader asks for) under this prefix. */
export const GGUF_WEIGHT_PREFIX = 'model.language_model.';

/** Typed access to `<arch>.*` metadata; every error names the file and the key. */
export class GgufKeys {
  constructor(private readonly file: GgufFile, readonly arch: string) {}
  private bad(key: string, what: string): never {
    throw new DeltaserveError('bad_checkpoint', `${this.file.path}: metadata ${key} ${what}`);
  }
  raw(key: string): GgufValue | undefined {
    return this.file.metadata.get(key);
  }
  has(key: string): boolean {
    return this.file.metadata.has(key);
  }
  /** A non-negative integer; arrays (per-layer values) must hold one repeated value. */
  int(key: string, fallback?: number): number {
    const v = this.raw(key);
    if (v === undefined) {
      if (fallback !== undefined) return fallback;
      this.bad(key, 'is missing');
    }
    const x = Array.isArray(v) && v.length > 0 && v.every((e) => e === v[0]) ? v[0] : v;
    if (typeof x !== 'number' || !Number.isInteger(x) || x < 0) this.bad(key, `must be a non-negative integer (got ${String(v)})`);
    return x;
  }
  /** A float stored as f32: the shortest decimal that rounds to it (1e-6, not
   * 9.99999997e-7), i.e. the value config.json held before conversion. */
  f32(key: string, fallback?: number): number {
    const v = this.raw(key);
    if (v === undefined) {
      if (fallback !== undefined) return fallback;
      this.bad(key, 'is missing');
    }
    if (typeof v !== 'number' || !Number.isFinite(v)) this.bad(key, `must be a number (got ${String(v)})`);
    return shortestF32Decimal(v);
  }
  a(key: string): number { return this.int(`${this.arch}.${key}`); }
}

/** The shortest decimal whose float32 rounding equals fround(x). */
export function shortestF32Decimal(x: number): number {
  const target = Math.fround(x);
  for (let p = 1; p <= 17; p++) {
    const d = Number(x.toPrecision(p));
    if (Math.fround(d) === target) return d;
  }
  return x;
}

export function ggufArch(file: GgufFile): GgufArch {
  const a = file.metadata.get('general.architecture');
  if (typeof a !== 'string') {
    throw new DeltaserveError('bad_checkpoint', `${file.path}: metadata general.architecture is missing`);
  }
  if (!(GGUF_ARCHITECTURES as readonly string[]).includes(a)) {
    throw new DeltaserveError('bad_checkpoint',
      `${file.path}: unknown architecture "${a}" (general.architecture; supported: ${GGUF_ARCHITECTURES.join(', ')})`);
  }
  return a as GgufArch;
}

function layerKinds(k: GgufKeys, numLayers: number, tensorNames: ReadonlySet<string>, where: string): LayerKind[] {
  const key = `${k.arch}.full_attention_interval`;
  if (k.has(key)) {
    const interval = k.int(key);
    if (interval < 1) throw new DeltaserveError('bad_checkpoint', `${where}: metadata ${key} must be ≥ 1`);
    const kinds: LayerKind[] = Array.from({ length: numLayers }, (_, i) => ((i + 1) % interval === 0 ? 'full' : 'linear'));
    // The interval must agree with the blocks' tensors (a full-attention block has attn_q, a
    // GDN block has none): older writers gave an all-linear model an interval it contradicts.
    const off = kinds.findIndex((kind, i) => (kind === 'full') !== tensorNames.has(`blk.${i}.attn_q.weight`));
    if (off >= 0) {
      throw new DeltaserveError('bad_checkpoint',
        `${where}: metadata ${key} (${interval}) makes block ${off} ${kinds[off]} attention, but its tensors are a ${kinds[off] === 'full' ? 'linear' : 'full'}-attention block's; re-quantize the checkpoint`);
    }
    return kinds;
  }
  // No interval: a block is full attention iff it has attn_q (the GDN blocks have attn_qkv).
  return Array.from({ length: numLayers }, (_, i) => (tensorNames.has(`blk.${i}.attn_q.weight`) ? 'full' : 'linear'));
}

function mlpConfigs(k: GgufKeys, ga: GgufArch): MlpConfig {
  if (ga === 'qwen35') return { kind: 'dense', intermediateSize: k.a('feed_forward_length') };
  const numExperts = k.a('expert_count');
  const topK = k.a('expert_used_count');
  if (topK < 1 || topK > numExperts) {
    throw new DeltaserveError('bad_checkpoint', `metadata ${ga}.expert_used_count (${topK}) must be in 1..${ga}.expert_count (${numExperts})`);
  }
  return {
    kind: 'moe', numExperts, topK,
    expertIntermediateSize: k.a('expert_feed_forward_length'),
    sharedIntermediateSize: k.int(`${ga}.expert_shared_feed_forward_length`, 0),
    normTopkProb: ga === 'qwen35moe' || k.raw(`${ga}.expert_weights_norm`) !== false,
  };
}

/** Parse the config of a GGUF model. `vocabSize` is the row count of token_embd. */
export function ggufModelConfig(file: GgufFile, vocabSize: number, tensorNames: ReadonlySet<string>): ModelConfig {
  const ga = ggufArch(file);
  const k = new GgufKeys(file, ga);
  const where = file.path;
  const badCfg = (msg: string): never => { throw new DeltaserveError('bad_checkpoint', `${where}: ${msg}`); };
  const mtpLayers = k.int(`${ga}.nextn_predict_layers`, 0);
  const blocks = k.a('block_count');
  const numLayers = blocks - mtpLayers;
  if (numLayers < 1) badCfg(`${ga}.block_count (${blocks}) must exceed ${ga}.nextn_predict_layers (${mtpLayers})`);
  const hiddenSize = k.a('embedding_length');
  const numHeads = k.a('attention.head_count');
  const numKvHeads = k.a('attention.head_count_kv');
  if (numKvHeads < 1 || numHeads % numKvHeads !== 0) badCfg(`attention.head_count (${numHeads}) must be a multiple of attention.head_count_kv (${numKvHeads})`);
  const headDim = k.int(`${ga}.attention.key_length`, Math.floor(hiddenSize / numHeads));
  const valueLength = k.int(`${ga}.attention.value_length`, headDim);
  if (valueLength !== headDim) badCfg(`attention.value_length (${valueLength}) must equal attention.key_length (${headDim})`);
  const rotaryDim = k.int(`${ga}.rope.dimension_count`, headDim);
  if (rotaryDim % 2 !== 0 || rotaryDim > headDim) badCfg(`rope.dimension_count (${rotaryDim}) must be even and ≤ key_length (${headDim})`);
  const linNumKeyHeads = k.a('ssm.group_count');
  const linNumValueHeads = k.a('ssm.time_step_rank');
  const inner = k.a('ssm.inner_size');
  if (linNumKeyHeads < 1 || linNumValueHeads % linNumKeyHeads !== 0) badCfg(`ssm.time_step_rank (${linNumValueHeads}) must be a multiple of ssm.group_count (${linNumKeyHeads})`);
  if (inner % linNumValueHeads !== 0) badCfg(`ssm.inner_size (${inner}) must be a multiple of ssm.time_step_rank (${linNumValueHeads})`);
  const mlp = mlpConfigs(k, ga);
  const eos = ['tokenizer.ggml.eos_token_id', 'tokenizer.ggml.eot_token_id'].map((key) => file.metadata.get(key))
    .filter((id): id is number => typeof id === 'number' && id < vocabSize);
  const ropeTheta = k.f32(`${ga}.rope.freq_base`, 10000);
  const contextLength = k.int(`${ga}.context_length`, 32768);
  const ropeScaling = parseRopeScaling(ggufRopeScaling(k, ga), { base: ropeTheta, rotaryDim, maxPositions: contextLength, where });
  const cfg: ModelConfig = {
    modelType: ARCH[ga].modelType,
    arch: ARCH[ga].arch,
    hiddenSize, numLayers, vocabSize,
    layerKinds: layerKinds(k, numLayers, tensorNames, where),
    layerMlp: Array.from({ length: numLayers }, () => mlp),
    mtpMlp: mlp,
    rmsNormEps: k.f32(`${ga}.attention.layer_norm_rms_epsilon`, 1e-6),
    numHeads, numKvHeads, headDim, rotaryDim,
    ropeTheta,
    ropeScaling,
    attnOutputGate: true, // qwen35/qwen3next GGUFs always carry the attention output gate
    fp8Block: null,
    linNumKeyHeads, linNumValueHeads,
    linKeyDim: k.a('ssm.state_size'),
    linValueDim: inner / linNumValueHeads,
    convKernel: k.a('ssm.conv_kernel'),
    tieWordEmbeddings: !tensorNames.has('output.weight'),
    mtpLayers,
    maxPositionEmbeddings: Math.max(contextLength, ropeScaling?.maxPositions ?? 0),
    eosTokenIds: [...new Set(eos)],
    weightPrefix: GGUF_WEIGHT_PREFIX,
    vision: null, // a text GGUF carries no tower (llama.cpp keeps it in a separate mmproj file)
  };
  return Object.freeze(cfg);
}

/** `<arch>.rope.scaling.*` as the HF `rope_scaling` object parseRopeScaling reads (null when
 * absent or "none"); unknown types are rejected there. */
function ggufRopeScaling(k: GgufKeys, ga: string): Record<string, unknown> | null {
  const type = k.raw(`${ga}.rope.scaling.type`);
  if (type === undefined || type === 'none') return null;
  const opt = (key: string, as: string): Record<string, number> => (k.has(key) ? { [as]: k.f32(key) } : {});
  return {
    rope_type: type,
    ...opt(`${ga}.rope.scaling.factor`, 'factor'),
    ...opt(`${ga}.rope.scaling.original_context_length`, 'original_max_position_embeddings'),
    ...opt(`${ga}.rope.scaling.yarn_beta_fast`, 'beta_fast'),
    ...opt(`${ga}.rope.scaling.yarn_beta_slow`, 'beta_slow'),
  };
}
