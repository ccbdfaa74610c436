// The named shapes `deltaserve make-model` writes: the text stacks of the public Qwen3.5 /
// Qwen3-Next models (dimensions from their published config.json files), their vision towers,
// and the tiny shapes the tests use.
import type { VisionTowerSpec } from './release-layout.js';

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
