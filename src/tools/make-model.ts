// `deltaserve make-model`: write a random-weight checkpoint of a named shape (config.json,
// generation_config.json, safetensors, optional tokenizer) so benchmarks and tests run on
// real sizes without downloads.
//
// Invariants:
// - Every tensor name and shape is exactly what src/model/loader.ts loads for the written
//   config (and nothing else is written).
// - Deterministic: each tensor's values come from its own Rng seeded by (seed, tensor
//   name), using integer arithmetic and V8's portable Math functions only, so equal
//   options give byte-identical files; values do not depend on write order or sharding.
// - Tensor data is generated piece by piece while writing (never held whole).
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Rng } from '../util/rng.js';
import { DeltaserveError, assert } from '../util/errors.js';
import { progressBar } from '../util/progress.js';
import { type TensorSource, type WriteDType, INDEX_FILE, tensorBytes, writeSafetensors, writeShardedSafetensors } from './safetensors-writer.js';
import {
  type VisionTowerSpec, type VisionTokenIds, STAND_IN_TOWER, preprocessorConfigJson, releaseConfig, releaseWrapper, splitChatTemplate, visionTensorShapes,
} from './release-layout.js';
import { type AddedToken, planVisionTokens, writeVisionTokens } from './vision-tokens.js';
import { writePlannedMmproj } from './make-mmproj.js';
import { fp8Sources } from './fp8-write.js';

export type ShapeModelType = 'qwen3_5_text' | 'qwen3_5_moe_text' | 'qwen3_next';

export interface MoeShape {
  readonly experts: number; readonly topK: number;
  readonly intermediate: number; // per routed expert
  readonly sharedIntermediate: number; // 0: no shared expert
}

export interface ShapeSpec {
  readonly description: string;
  readonly modelType: ShapeModelType;
  readonly hidden: number; readonly layers: number; readonly vocab: number;
  /** Layer i is full attention iff (i+1) % fullAttentionInterval == 0. */
  readonly fullAttentionInterval: number;
  /** Dense MLP width (qwen3_5_text); for qwen3_next written to config but unused; 0 = absent. */
  readonly intermediate: number;
  readonly heads: number; readonly kvHeads: number; readonly headDim: number; // gated attention
  readonly linKeyHeads: number; readonly linValueHeads: number; // Gated DeltaNet
  readonly linKeyDim: number; readonly linValueDim: number; readonly convKernel: number;
  /** Every decoder layer and the MTP layer is MoE iff set (MoE model types only). */
  readonly moe: MoeShape | null;
  readonly tied: boolean;
  readonly ropeTheta: number; readonly partialRotary: number;
  readonly mtpLayers: number; readonly maxPositions: number;
  /** The release layout's vision tower; absent: the small stand-in (STAND_IN_TOWER). */
  readonly vision?: VisionTowerSpec;
}

const QWEN35_GDN = { linKeyHeads: 16, linValueHeads: 16, linKeyDim: 128, linValueDim: 128, convKernel: 4 } as const;
const QWEN35_ATTN = { heads: 8, kvHeads: 2, headDim: 256, ropeTheta: 1e7, partialRotary: 0.25 } as const;
const TINY_ATTN = { kvHeads: 2, convKernel: 4, ropeTheta: 1e7, partialRotary: 0.25, mtpLayers: 1 } as const;
/** vision_config of Qwen/Qwen3.5-0.8B and -4B as quoted by several public loaders and tests
 * (they agree field for field; patch 16, temporal 2, merge 2, gelu_pytorch_tanh, no deepstack). */
const QWEN35_TOWERS = {
  '0.8b': { depth: 12, hidden: 768, heads: 12, intermediate: 3072, numPositions: 2304, deepstack: [] },
  '4b': { depth: 24, hidden: 1024, heads: 16, intermediate: 4096, numPositions: 2304, deepstack: [] },
} as const satisfies Record<string, VisionTowerSpec>;

/** Named shapes: the text stacks of the public models (4b…80b from their published
 * config.json dimensions; 0.8b/2b from MODEL-NOTES). Sizes in BF16: 0.8b 1.55 GB, 2b
 * 3.89 GB, 4b 8.65 GB, 9b 18.4 GB, 27b 54.6 GB, 35b-a3b 71.0 GB, 80b-a3b 162.7 GB
 * (--layers truncates). The release layout adds the published vision tower for 0.8b and 4b
 * (QWEN35_TOWERS) and a tiny stand-in tower for the other shapes. */
export const SHAPES: Readonly<Record<string, ShapeSpec>> = {
  'qwen3.5-0.8b': {
    description: 'approximation of Qwen3.5-0.8B (text): 24 layers (3 GDN + 1 attention), dense MLP, tied',
    modelType: 'qwen3_5_text', hidden: 1024, layers: 24, fullAttentionInterval: 4, vocab: 248320, intermediate: 3584,
    ...QWEN35_ATTN, ...QWEN35_GDN, moe: null, tied: true, mtpLayers: 1, maxPositions: 262144, vision: QWEN35_TOWERS['0.8b'],
  },
  // qwen3.5-2b: the model card's table agrees (hidden 2048, 24 layers = 6 × (3 GDN + 1
  //   attention), FFN 6144, GDN 16 V / 16 QK heads × 128, attention 8 Q / 2 KV × 256, vocab
  //   248320, MTP); tie_word_embeddings not confirmed from a public copy of its config.json.
  'qwen3.5-2b': {
    description: 'approximation of Qwen3.5-2B (text): 24 layers (3 GDN + 1 attention), dense MLP, tied',
    modelType: 'qwen3_5_text', hidden: 2048, layers: 24, fullAttentionInterval: 4, vocab: 248320, intermediate: 6144,
    ...QWEN35_ATTN, ...QWEN35_GDN, moe: null, tied: true, mtpLayers: 1, maxPositions: 262144,
  },
  'qwen3-next-tiny': {
    description: 'small Qwen3-Next (interleaved in_proj_qkvz/ba), 16 experts top-4 + shared expert, untied',
    modelType: 'qwen3_next', hidden: 256, layers: 8, fullAttentionInterval: 4, vocab: 2048, intermediate: 512,
    heads: 4, headDim: 64, linKeyHeads: 2, linValueHeads: 4, linKeyDim: 64, linValueDim: 64, ...TINY_ATTN,
    moe: { experts: 16, topK: 4, intermediate: 128, sharedIntermediate: 128 }, tied: false, maxPositions: 8192,
  },
  'qwen3.5-moe-tiny': {
    description: 'small Qwen3.5-MoE (fused experts.gate_up_proj/down_proj), 16 experts top-4 + shared expert, untied',
    modelType: 'qwen3_5_moe_text', hidden: 256, layers: 8, fullAttentionInterval: 4, vocab: 2048, intermediate: 0,
    heads: 4, headDim: 64, linKeyHeads: 2, linValueHeads: 4, linKeyDim: 64, linValueDim: 64, ...TINY_ATTN,
    moe: { experts: 16, topK: 4, intermediate: 128, sharedIntermediate: 128 }, tied: false, maxPositions: 8192,
  },
  // Dimensions of the published configs (Qwen/Qwen3.5-*, Qwen/Qwen3-Next-80B-A3B-*),
  // cross-checked 2026-12-01 against public copies (no hub access here), shape by shape:
  // every field below matched its sources; nothing had to change.
  // qwen3.5-4b: text_config of Qwen/Qwen3.5-4B as reproduced in public loader tests (hidden
  //   2560, intermediate 9216, 32 layers, 16/4 heads × 256, GDN 16 K / 32 V heads × 128,
  //   vocab 248320, tie_word_embeddings true, mtp_num_hidden_layers 1).
  'qwen3.5-4b': {
    description: 'Qwen3.5-4B (text): 32 layers (3 GDN + 1 attention), 16/32 GDN heads, dense MLP 9216, tied',
    modelType: 'qwen3_5_text', hidden: 2560, layers: 32, fullAttentionInterval: 4, vocab: 248320, intermediate: 9216,
    ...QWEN35_ATTN, heads: 16, kvHeads: 4, ...QWEN35_GDN, linValueHeads: 32, moe: null, tied: true, mtpLayers: 1, maxPositions: 262144,
    vision: QWEN35_TOWERS['4b'],
  },
  // qwen3.5-9b: the model card's table (hidden 4096, 32 layers = 8 × (3 GDN + 1 attention),
  //   FFN 12288, GDN 32 V / 16 QK heads × 128, attention 16 Q / 4 KV × 256, vocab 248320, MTP)
  //   and the GGUF metadata of a conversion (same numbers, 8.95 B parameters without MTP,
  //   which is the untied count: tied would be ~7.9 B).
  'qwen3.5-9b': {
    description: 'Qwen3.5-9B (text): 32 layers (3 GDN + 1 attention), 16/32 GDN heads, dense MLP 12288, untied',
    modelType: 'qwen3_5_text', hidden: 4096, layers: 32, fullAttentionInterval: 4, vocab: 248320, intermediate: 12288,
    ...QWEN35_ATTN, heads: 16, kvHeads: 4, ...QWEN35_GDN, linValueHeads: 32, moe: null, tied: false, mtpLayers: 1, maxPositions: 262144,
  },
  // qwen3.5-27b: THUDM/slime scripts/models/qwen3.5-27B.sh (24 heads, 4 KV groups, kv-channels
  //   256, 64 layers, hidden 5120, ffn 17408, vocab 248320, untied, rotary 0.25, base 1e7)
  //   and public copies of the full text_config (GDN 16 K / 48 V heads × 128, MTP 1).
  'qwen3.5-27b': {
    description: 'Qwen3.5-27B (text): 64 layers (3 GDN + 1 attention), 16/48 GDN heads, 24/4 attention heads, dense MLP 17408, untied',
    modelType: 'qwen3_5_text', hidden: 5120, layers: 64, fullAttentionInterval: 4, vocab: 248320, intermediate: 17408,
    ...QWEN35_ATTN, heads: 24, kvHeads: 4, ...QWEN35_GDN, linValueHeads: 48, moe: null, tied: false, mtpLayers: 1, maxPositions: 262144,
  },
  // qwen3.5-35b-a3b: THUDM/slime scripts/models/qwen3.5-35B-A3B.sh (40 layers, hidden 2048,
  //   16 heads / 2 KV × 256, 256 experts top-8 of width 512, shared expert 512, GDN 16 K / 32 V
  //   × 128, conv 4, vocab 248320, untied) and public copies of its text_config (MTP 1).
  'qwen3.5-35b-a3b': {
    description: 'Qwen3.5-35B-A3B (text): 40 layers (3 GDN + 1 attention), 256 fused experts top-8 (512) + shared expert (512), untied',
    modelType: 'qwen3_5_moe_text', hidden: 2048, layers: 40, fullAttentionInterval: 4, vocab: 248320, intermediate: 0,
    ...QWEN35_ATTN, heads: 16, kvHeads: 2, ...QWEN35_GDN, linValueHeads: 32,
    moe: { experts: 256, topK: 8, intermediate: 512, sharedIntermediate: 512 }, tied: false, mtpLayers: 1, maxPositions: 262144,
  },
  // qwen3-next-80b-a3b: transformers' Qwen3NextConfig defaults, documented as the
  //   Qwen/Qwen3-Next-80B-A3B-Instruct checkpoint (48 layers, hidden 2048, 16/2 heads × 256,
  //   GDN 16 K / 32 V × 128, 512 experts top-10 of width 512, shared 512, vocab 151936, untied);
  //   intermediate_size 5120, rope_theta 1e7, max_position_embeddings 262144 and the MTP layer
  //   from the published config.json (quoted in public code) and THUDM/slime
  //   scripts/models/qwen3-next-80B-A3B.sh.
  'qwen3-next-80b-a3b': {
    description: 'Qwen3-Next-80B-A3B: 48 layers (3 GDN + 1 attention), 512 experts top-10 (512) + shared expert (512), untied; use --layers to truncate',
    modelType: 'qwen3_next', hidden: 2048, layers: 48, fullAttentionInterval: 4, vocab: 151936, intermediate: 5120,
    heads: 16, kvHeads: 2, headDim: 256, ropeTheta: 1e7, partialRotary: 0.25, ...QWEN35_GDN, linValueHeads: 32,
    moe: { experts: 512, topK: 10, intermediate: 512, sharedIntermediate: 512 }, tied: false, mtpLayers: 1, maxPositions: 262144,
  },
  tiny: {
    description: 'tiny Qwen3.5 (text) for tests: 4 layers, hidden 128, vocab 1024, tied',
    modelType: 'qwen3_5_text', hidden: 128, layers: 4, fullAttentionInterval: 4, vocab: 1024, intermediate: 384,
    heads: 4, headDim: 32, linKeyHeads: 2, linValueHeads: 4, linKeyDim: 32, linValueDim: 32, ...TINY_ATTN,
    moe: null, tied: true, maxPositions: 4096,
  },
  // The repo's vision fixture (test/fixtures/tiny-vision): the smallest model that still has
  // both layer kinds, MTP and a working 2-block tower (patch 16, merge 2, 4×4 learned grid).
  'tiny-vision': {
    description: 'tiny Qwen3.5 (text + vision tower) for vision tests: 2 layers, hidden 64, vocab 1024, 2-block tower of width 32, tied',
    modelType: 'qwen3_5_text', hidden: 64, layers: 2, fullAttentionInterval: 2, vocab: 1024, intermediate: 128,
    heads: 2, headDim: 32, linKeyHeads: 1, linValueHeads: 2, linKeyDim: 16, linValueDim: 16, ...TINY_ATTN,
    moe: null, tied: true, maxPositions: 4096,
    vision: { depth: 2, hidden: 32, heads: 2, intermediate: 64, numPositions: 16, deepstack: [] },
  },
};

export interface MakeModelOptions {
  readonly shape: string;
  /** fp8: block-wise e4m3 (128×128 scales) for every *_proj.weight matrix, the BF16
   * checkpoint of the same seed quantized; other tensors BF16. */
  readonly dtype: 'bf16' | 'f32' | 'fp8';
  readonly seed: number;
  readonly out: string;
  /** Directory to copy tokenizer.json (+ tokenizer_config.json, chat_template.jinja) from. */
  readonly tokenizer?: string;
  /** Override the shape's vocab size (ids at or above the tokenizer's size are padding). */
  readonly vocabSize?: number;
  /** Override the number of decoder layers (the full-attention pattern continues). */
  readonly layers?: number;
  /** Shard size limit; by default a single file, sharded (2 GiB shards) above 2 GiB. */
  readonly shardBytes?: number;
  /** 'release' (Qwen3.5: ConditionalGeneration wrapper, nested text_config, a small
   * model.visual.* tower, chat_template.jinja) or 'flat' (text model only; the default here,
   * while the CLI defaults to 'release'). Qwen3-Next is flat either way. */
  readonly layout?: 'release' | 'flat';
  /** Also write the vision tower as llama.cpp's mmproj GGUF (release layout only). */
  readonly mmproj?: 'F16' | 'F32';
}

/** Token ids for config / generation_config (from the tokenizer when one is given). */
export interface SpecialTokens {
  readonly endOfText?: number; // <|endoftext|>: bos and pad
  readonly imEnd?: number; // <|im_end|>: eos
  readonly vision?: VisionTokenIds; // image_token_id etc. of the release config
}

export interface ModelPlan {
  readonly spec: ShapeSpec;
  readonly config: Record<string, unknown>;
  readonly generationConfig: Record<string, unknown>;
  /** Sorted by name. */
  readonly tensors: readonly TensorSource[];
  readonly params: number;
  readonly bytes: number;
}

export const SHARD_THRESHOLD = 2 * 1024 ** 3;
const MATRIX_STD = 0.02;
const NORM_STD = 0.05; // zero-centred RMSNorm weights: the scale is 1 + w
const CONV_STD = 0.3;

/** How a tensor's values are drawn ('normal' is the Irwin–Hall approximation in generate()). */
type Init =
  | { readonly kind: 'normal'; readonly mean: number; readonly std: number }
  | { readonly kind: 'alog' } // log(uniform(1, 16))
  | { readonly kind: 'dtbias' }; // softplus⁻¹(dt), dt log-uniform in [1e-3, 1e-1]

const MATRIX: Init = { kind: 'normal', mean: 0, std: MATRIX_STD };
const ZC_NORM: Init = { kind: 'normal', mean: 0, std: NORM_STD };
const PLAIN_NORM: Init = { kind: 'normal', mean: 1, std: NORM_STD };

interface TensorDef { readonly name: string; readonly shape: number[]; readonly init: Init }

function bad(message: string): never {
  throw new DeltaserveError('bad_request', message);
}

function layerKinds(spec: ShapeSpec, layers: number): ('linear' | 'full')[] {
  return Array.from({ length: layers }, (_, i) => ((i + 1) % spec.fullAttentionInterval === 0 ? 'full' : 'linear'));
}

/** Vision tower values with signal through every block: LayerNorm weights centred on 1,
 * matrices of std 1/√fan_in (unit-variance outputs, so attention is far from uniform),
 * position table std 0.5, biases small. */
function visionInit(name: string, shape: readonly number[]): Init {
  if (/norm\d?\.weight$/.test(name)) return PLAIN_NORM;
  if (name.endsWith('.bias')) return MATRIX;
  if (name.endsWith('pos_embed.weight')) return { kind: 'normal', mean: 0, std: 0.5 };
  const fanIn = shape.slice(1).reduce((a, b) => a * b, 1);
  return { kind: 'normal', mean: 0, std: 1 / Math.sqrt(fanIn) };
}

/** The tensor list the loader expects for `spec` with `layers` layers and vocab `vocab`. */
function tensorDefs(spec: ShapeSpec, layers: number, vocab: number, release: boolean): TensorDef[] {
  const h = spec.hidden;
  const defs: TensorDef[] = [];
  const add = (name: string, shape: number[], init: Init = MATRIX): void => {
    defs.push({ name, shape, init });
  };
  const qwen35 = spec.modelType !== 'qwen3_next';
  const p = qwen35 ? 'model.language_model.' : 'model.';
  const { linKeyHeads: hk, linValueHeads: hv, linKeyDim: dk, linValueDim: dv } = spec;
  const convDim = 2 * hk * dk + hv * dv;

  const mlp = (q: string): void => {
    const expert = (e: string, inter: number): void => {
      add(`${e}gate_proj.weight`, [inter, h]);
      add(`${e}up_proj.weight`, [inter, h]);
      add(`${e}down_proj.weight`, [h, inter]);
    };
    const m = spec.moe;
    if (!m) return expert(`${q}mlp.`, spec.intermediate);
    add(`${q}mlp.gate.weight`, [m.experts, h]);
    if (qwen35) {
      add(`${q}mlp.experts.gate_up_proj`, [m.experts, 2 * m.intermediate, h]);
      add(`${q}mlp.experts.down_proj`, [m.experts, h, m.intermediate]);
    } else {
      for (let e = 0; e < m.experts; e++) expert(`${q}mlp.experts.${e}.`, m.intermediate);
    }
    if (m.sharedIntermediate > 0) {
      expert(`${q}mlp.shared_expert.`, m.sharedIntermediate);
      add(`${q}mlp.shared_expert_gate.weight`, [1, h]);
    }
  };
  const attention = (q: string): void => {
    const { heads, kvHeads, headDim: hd } = spec;
    add(`${q}self_attn.q_proj.weight`, [heads * hd * 2, h]);
    add(`${q}self_attn.k_proj.weight`, [kvHeads * hd, h]);
    add(`${q}self_attn.v_proj.weight`, [kvHeads * hd, h]);
    add(`${q}self_attn.o_proj.weight`, [h, heads * hd]);
    add(`${q}self_attn.q_norm.weight`, [hd], ZC_NORM);
    add(`${q}self_attn.k_norm.weight`, [hd], ZC_NORM);
  };
  const gdn = (q: string): void => {
    const la = `${q}linear_attn.`;
    if (qwen35) {
      add(`${la}in_proj_qkv.weight`, [convDim, h]);
      add(`${la}in_proj_z.weight`, [hv * dv, h]);
      add(`${la}in_proj_b.weight`, [hv, h]);
      add(`${la}in_proj_a.weight`, [hv, h]);
    } else {
      // interleaved per key-head group (see qwen3_next.ts); values are i.i.d., so only
      // the shapes matter here
      add(`${la}in_proj_qkvz.weight`, [hk * 2 * dk + 2 * hv * dv, h]);
      add(`${la}in_proj_ba.weight`, [2 * hv, h]);
    }
    add(`${la}conv1d.weight`, [convDim, 1, spec.convKernel], { kind: 'normal', mean: 0, std: CONV_STD });
    add(`${la}A_log`, [hv], { kind: 'alog' });
    add(`${la}dt_bias`, [hv], { kind: 'dtbias' });
    add(`${la}norm.weight`, [dv], PLAIN_NORM); // gated norm: plain w, so centred on 1
    add(`${la}out_proj.weight`, [h, hv * dv]);
  };
  const layer = (q: string, kind: 'linear' | 'full'): void => {
    add(`${q}input_layernorm.weight`, [h], ZC_NORM);
    add(`${q}post_attention_layernorm.weight`, [h], ZC_NORM);
    if (kind === 'full') attention(q);
    else gdn(q);
    mlp(q);
  };

  add(`${p}embed_tokens.weight`, [vocab, h]);
  add(`${p}norm.weight`, [h], ZC_NORM);
  if (!spec.tied) add('lm_head.weight', [vocab, h]);
  layerKinds(spec, layers).forEach((kind, i) => layer(`${p}layers.${i}.`, kind));
  if (spec.mtpLayers > 0) {
    add('mtp.fc.weight', [h, 2 * h]);
    add('mtp.pre_fc_norm_embedding.weight', [h], ZC_NORM);
    add('mtp.pre_fc_norm_hidden.weight', [h], ZC_NORM);
    add('mtp.norm.weight', [h], ZC_NORM);
    for (let i = 0; i < spec.mtpLayers; i++) layer(`mtp.layers.${i}.`, 'full');
  }
  if (release) {
    for (const [name, shape] of visionTensorShapes(spec.vision ?? STAND_IN_TOWER, h)) add(name, shape, visionInit(name, shape));
  }
  return defs;
}

/** config.json in the Hugging Face format of the shape's model_type. */
function configJson(spec: ShapeSpec, layers: number, vocab: number, dtype: 'bf16' | 'f32' | 'fp8', tok: SpecialTokens): Record<string, unknown> {
  const eos = tok.imEnd ?? tok.endOfText;
  const ids = { bos_token_id: tok.endOfText, eos_token_id: eos, pad_token_id: tok.endOfText };
  const rotaryPairs = Math.floor((spec.headDim * spec.partialRotary) / 2);
  const third = Math.ceil(rotaryPairs / 3);
  const moe = spec.moe && {
    num_experts: spec.moe.experts, num_experts_per_tok: spec.moe.topK, moe_intermediate_size: spec.moe.intermediate,
    shared_expert_intermediate_size: spec.moe.sharedIntermediate, output_router_logits: false, router_aux_loss_coef: 0.001,
  };
  const common = {
    vocab_size: vocab, hidden_size: spec.hidden,
    ...(spec.intermediate > 0 ? { intermediate_size: spec.intermediate } : {}),
    num_hidden_layers: layers, hidden_act: 'silu',
    num_attention_heads: spec.heads, num_key_value_heads: spec.kvHeads, head_dim: spec.headDim,
    attention_bias: false, attention_dropout: 0.0,
    linear_num_key_heads: spec.linKeyHeads, linear_num_value_heads: spec.linValueHeads,
    linear_key_head_dim: spec.linKeyDim, linear_value_head_dim: spec.linValueDim, linear_conv_kernel_dim: spec.convKernel,
    ...moe,
    rms_norm_eps: 1e-6, max_position_embeddings: spec.maxPositions, tie_word_embeddings: spec.tied,
    initializer_range: MATRIX_STD, use_cache: true, torch_dtype: dtype === 'f32' ? 'float32' : 'bfloat16',
  };
  if (spec.modelType === 'qwen3_next') {
    return {
      architectures: ['Qwen3NextForCausalLM'], model_type: 'qwen3_next', ...common,
      full_attention_interval: spec.fullAttentionInterval,
      rope_theta: spec.ropeTheta, partial_rotary_factor: spec.partialRotary, rope_scaling: null,
      norm_topk_prob: true, decoder_sparse_step: 1, mlp_only_layers: [],
      num_nextn_predict_layers: spec.mtpLayers, ...ids,
    };
  }
  return {
    architectures: [spec.modelType === 'qwen3_5_text' ? 'Qwen3_5ForCausalLM' : 'Qwen3_5MoeForCausalLM'],
    model_type: spec.modelType, ...common,
    layer_types: layerKinds(spec, layers).map((k) => (k === 'full' ? 'full_attention' : 'linear_attention')),
    full_attention_interval: spec.fullAttentionInterval, attn_output_gate: true,
    // text-only: the three mrope position ids are equal, so this is plain partial RoPE
    rope_parameters: {
      rope_type: 'default', rope_theta: spec.ropeTheta, partial_rotary_factor: spec.partialRotary,
      mrope_interleaved: true, mrope_section: [third, third, rotaryPairs - 2 * third],
    },
    mtp_num_hidden_layers: spec.mtpLayers, mamba_ssm_dtype: 'float32', ...ids,
  };
}

// ---------------------------------------------------------------------------------------
// Value generation

/** Irwin–Hall sum of the 4 bytes of one u32: mean 510, sd = sqrt(4·(256²−1)/12). Integer
 * only (portable, fast); approximately normal, bounded at ±3.46 sd. */
const IH_MEAN = 510;
const IH_SD = Math.sqrt((4 * (256 * 256 - 1)) / 12);
const LOG_DT_MIN = Math.log(1e-3);
const LOG_DT_MAX = Math.log(1e-1);

function generate(rng: Rng, init: Init, out: Float32Array): void {
  const n = out.length;
  if (init.kind === 'normal') {
    const scale = init.std / IH_SD;
    const mean = init.mean;
    for (let i = 0; i < n; i++) {
      const x = rng.nextU32();
      const s = (x & 255) + ((x >>> 8) & 255) + ((x >>> 16) & 255) + (x >>> 24);
      out[i] = mean + (s - IH_MEAN) * scale;
    }
  } else if (init.kind === 'alog') {
    for (let i = 0; i < n; i++) out[i] = Math.log(1 + 15 * rng.next());
  } else {
    for (let i = 0; i < n; i++) {
      const dt = Math.exp(LOG_DT_MIN + rng.next() * (LOG_DT_MAX - LOG_DT_MIN));
      out[i] = dt + Math.log(-Math.expm1(-dt)); // softplus(out) = dt
    }
  }
}

const BLOCK = 1 << 16;
const blockF32 = new Float32Array(BLOCK);
const blockU32 = new Uint32Array(blockF32.buffer);

/** FNV-1a 64 of the UTF-8 name. */
function fnv1a64(s: string): bigint {
  let h = 0xcbf29ce484222325n;
  for (const b of Buffer.from(s, 'utf8')) h = BigInt.asUintN(64, (h ^ BigInt(b)) * 0x100000001b3n);
  return h;
}

function tensorSource(def: TensorDef, dtype: WriteDType, seed: number): TensorSource {
  const rngSeed = BigInt.asUintN(64, BigInt(seed) * 0x9e3779b97f4a7c15n) ^ fnv1a64(def.name);
  let rng = new Rng(rngSeed);
  let produced = 0;
  return {
    name: def.name, dtype, shape: def.shape,
    fill(dest: Uint8Array, byteOffset: number): void {
      if (byteOffset === 0) {
        rng = new Rng(rngSeed); // a fresh pass (e.g. the plan written twice) repeats the values
        produced = 0;
      }
      assert(byteOffset === produced, `tensor ${def.name}: pieces must be consecutive (${byteOffset} vs ${produced})`);
      produced += dest.byteLength;
      if (dtype === 'F32') {
        generate(rng, def.init, new Float32Array(dest.buffer, dest.byteOffset, dest.byteLength / 4));
        return;
      }
      assert(dtype === 'BF16', `make-model writes BF16 or F32, not ${dtype}`);
      const out = new Uint16Array(dest.buffer, dest.byteOffset, dest.byteLength / 2);
      for (let i0 = 0; i0 < out.length; i0 += BLOCK) {
        const n = Math.min(BLOCK, out.length - i0);
        generate(rng, def.init, blockF32.subarray(0, n));
        for (let i = 0; i < n; i++) {
          const u = blockU32[i]!;
          out[i0 + i] = (u + 0x7fff + ((u >>> 16) & 1)) >>> 16; // round to nearest even (finite values)
        }
      }
    },
  };
}

// ---------------------------------------------------------------------------------------
// Plan and write

function positiveInt(name: string, v: number | undefined): void {
  if (v !== undefined && !(Number.isSafeInteger(v) && v >= 1)) bad(`${name} must be a positive integer (got ${v})`);
}

const FP8_BLOCK = [128, 128] as const;

/** Linear-layer matrices of the text model (what FP8 releases store in e4m3). */
function isFp8Weight(d: TensorDef): boolean {
  return d.shape.length === 2 && d.name.endsWith('_proj.weight') && !d.name.startsWith('model.visual.');
}

/** Config and tensor list for the options (no file system access). */
export function planModel(opts: Omit<MakeModelOptions, 'out'>, tokens: SpecialTokens = {}): ModelPlan {
  const spec = Object.hasOwn(SHAPES, opts.shape) ? SHAPES[opts.shape] : undefined;
  if (!spec) bad(`unknown model shape "${opts.shape}" (known shapes: ${Object.keys(SHAPES).join(', ')})`);
  if (opts.dtype !== 'bf16' && opts.dtype !== 'f32' && opts.dtype !== 'fp8') bad(`dtype must be bf16, f32 or fp8 (got ${String(opts.dtype)})`);
  if (!Number.isSafeInteger(opts.seed)) bad(`seed must be an integer (got ${opts.seed})`);
  positiveInt('vocabSize', opts.vocabSize);
  positiveInt('layers', opts.layers);
  positiveInt('shardBytes', opts.shardBytes);
  const layers = opts.layers ?? spec.layers;
  const vocab = opts.vocabSize ?? spec.vocab;
  const dtype: WriteDType = opts.dtype === 'f32' ? 'F32' : 'BF16';
  if (opts.layout !== undefined && opts.layout !== 'release' && opts.layout !== 'flat') bad(`layout must be release or flat (got ${String(opts.layout)})`);
  const wrapper = opts.layout === 'release' ? releaseWrapper(spec.modelType) : null;
  const defs = tensorDefs(spec, layers, vocab, wrapper !== null);
  const sources = (d: TensorDef): TensorSource[] => (opts.dtype === 'fp8' && isFp8Weight(d)
    ? fp8Sources(() => tensorSource(d, 'BF16', opts.seed), FP8_BLOCK) : [tensorSource(d, dtype, opts.seed)]);
  const tensors = defs.flatMap(sources).sort((a, b) => (a.name < b.name ? -1 : 1));
  const params = defs.reduce((n, d) => n + d.shape.reduce((a, b) => a * b, 1), 0);
  const bytes = tensors.reduce((n, t) => n + tensorBytes(t), 0);
  const eos = [tokens.imEnd, tokens.endOfText].filter((x): x is number => x !== undefined);
  const generationConfig = {
    bos_token_id: tokens.endOfText, eos_token_id: eos.length > 0 ? eos : undefined, pad_token_id: tokens.endOfText, do_sample: false,
  };
  const text = configJson(spec, layers, vocab, opts.dtype, tokens);
  const noVisionTokens: VisionTokenIds = { visionStart: null, visionEnd: null, imagePad: null, videoPad: null };
  const config = wrapper ? releaseConfig(wrapper, text, spec.vision ?? STAND_IN_TOWER, tokens.vision ?? noVisionTokens) : text;
  if (opts.dtype === 'fp8') {
    config['quantization_config'] = { quant_method: 'fp8', fmt: 'e4m3', activation_scheme: 'dynamic', weight_block_size: [...FP8_BLOCK] };
  }
  return { spec, config, generationConfig, tensors, params, bytes };
}

/** Number of ids the tokenizer defines and its special ids. */
function readTokenizer(dir: string): { size: number; tokens: SpecialTokens; added: AddedToken[] } {
  const path = join(dir, 'tokenizer.json');
  if (!existsSync(path)) throw new DeltaserveError('bad_tokenizer', `no tokenizer.json in ${dir}`);
  let json: { model?: { vocab?: unknown }; added_tokens?: { id: number; content: string }[] };
  try {
    json = JSON.parse(readFileSync(path, 'utf8')) as typeof json;
  } catch (e) {
    throw new DeltaserveError('bad_tokenizer', `${path}: not valid JSON (${(e as Error).message})`);
  }
  const vocab = json.model?.vocab;
  let size = Array.isArray(vocab) ? vocab.length : 0;
  if (vocab && typeof vocab === 'object' && !Array.isArray(vocab)) {
    for (const id of Object.values(vocab)) if (typeof id === 'number') size = Math.max(size, id + 1);
  }
  const tokens: { endOfText?: number; imEnd?: number } = {};
  const added = json.added_tokens ?? [];
  for (const t of added) {
    size = Math.max(size, t.id + 1);
    if (t.content === '<|endoftext|>') tokens.endOfText = t.id;
    if (t.content === '<|im_end|>') tokens.imEnd = t.id;
  }
  return { size, tokens, added: added.map((t) => ({ id: t.id, content: t.content })) };
}

const TOKENIZER_FILES = ['tokenizer.json', 'tokenizer_config.json', 'chat_template.jinja'];
const isCheckpointFile = (f: string): boolean => f === INDEX_FILE || /^model(-\d{5}-of-\d{5})?\.safetensors(\.partial)?$/.test(f)
  || /^mmproj-.*\.gguf$/.test(f);

export interface MakeModelResult {
  readonly dir: string;
  /** Safetensors files written (names relative to dir). */
  readonly files: readonly string[];
  readonly params: number;
  readonly bytes: number;
}

/** Write the model directory `opts.out` (created if missing; an existing checkpoint there
 * is replaced). */
export async function makeModel(opts: MakeModelOptions): Promise<MakeModelResult> {
  const tok = opts.tokenizer !== undefined ? readTokenizer(opts.tokenizer) : undefined;
  const spec = Object.hasOwn(SHAPES, opts.shape) ? SHAPES[opts.shape] : undefined;
  const vocab = opts.vocabSize ?? spec?.vocab ?? 0;
  const release = opts.layout === 'release' && spec !== undefined && releaseWrapper(spec.modelType) !== null;
  const vision = tok && release ? planVisionTokens(tok.added, tok.size, vocab) : undefined;
  if (opts.mmproj !== undefined && !release) bad('mmproj needs a Qwen3.5 shape in the release layout (a model with a vision tower)');
  const plan = planModel(opts, tok && { ...tok.tokens, ...(vision ? { vision: vision.ids } : {}) });
  if (tok && tok.size > vocab) bad(`tokenizer in ${opts.tokenizer} has ${tok.size} ids but the model vocab is ${vocab}`);
  mkdirSync(opts.out, { recursive: true });
  for (const f of readdirSync(opts.out)) if (isCheckpointFile(f)) rmSync(join(opts.out, f));
  writeFileSync(join(opts.out, 'config.json'), `${JSON.stringify(plan.config, null, 2)}\n`);
  writeFileSync(join(opts.out, 'generation_config.json'), `${JSON.stringify(plan.generationConfig, null, 2)}\n`);
  if (plan.config['vision_config'] !== undefined) {
    writeFileSync(join(opts.out, 'preprocessor_config.json'), `${JSON.stringify(preprocessorConfigJson(), null, 2)}\n`);
  }
  if (opts.tokenizer !== undefined) {
    for (const f of TOKENIZER_FILES) {
      const src = join(opts.tokenizer, f);
      const dest = join(opts.out, f);
      if (!existsSync(src)) continue;
      // copy the bytes, not the mode: a read-only source must not make a rerun fail
      rmSync(dest, { force: true });
      writeFileSync(dest, readFileSync(src));
    }
    if (plan.config['text_config'] !== undefined) splitChatTemplate(opts.out);
    if (vision) writeVisionTokens(opts.out, vision.add);
  }
  const metadata = { deltaserve_shape: opts.shape, deltaserve_seed: String(opts.seed) };
  const bar = progressBar(`writing ${opts.out}`, plan.bytes);
  const write = { metadata, onBytes: (n: number) => bar.tick(n) };
  const shardBytes = opts.shardBytes ?? (plan.bytes > SHARD_THRESHOLD ? SHARD_THRESHOLD : undefined);
  let files: string[];
  if (shardBytes !== undefined) {
    files = writeShardedSafetensors(opts.out, plan.tensors, shardBytes, write);
  } else {
    writeSafetensors(join(opts.out, 'model.safetensors'), plan.tensors, metadata, write);
    files = ['model.safetensors'];
  }
  bar.done();
  if (opts.mmproj !== undefined) files.push(await writePlannedMmproj(opts.out, opts.shape, plan.config, plan.tensors, opts.mmproj));
  return { dir: opts.out, files, params: plan.params, bytes: plan.bytes };
}
