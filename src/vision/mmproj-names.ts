// llama.cpp's mmproj (clip) GGUF for the Qwen3-VL / Qwen3.5 tower (projector type
// "qwen3vl_merger"): metadata keys and tensor names, as llama.cpp's converter writes them and
// tools/mtmd/clip.cpp reads them. One definition for our writer and our loader.
//
// Name map (HF release name under model.visual. → GGUF):
//   patch_embed.proj.weight [D,C,2,P,P] → v.patch_embd.weight (temporal slice 0) and
//                                         v.patch_embd.weight.1 (slice 1), each [D,C,P,P]
//   patch_embed.proj.bias → v.patch_embd.bias;  pos_embed.weight → v.position_embd.weight
//   blocks.{l}.norm1/norm2 → v.blk.{l}.ln1/ln2;  attn.qkv → attn_qkv;  attn.proj → attn_out
//   blocks.{l}.mlp.linear_fc1/linear_fc2 → v.blk.{l}.ffn_up/ffn_down
//   merger.norm → v.post_ln;  merger.linear_fc1/linear_fc2 → mm.0/mm.2
//   deepstack_merger_list.{k}.norm/linear_fc1/linear_fc2 → v.deepstack.{block}.norm/fc1/fc2,
//     block = deepstack_visual_indexes[k] (the absolute block index)
import type { VisionConfig } from './config.js';

export const MMPROJ_PROJECTOR = 'qwen3vl_merger';

export const MMPROJ_KEYS = {
  architecture: 'general.architecture', // "clip"
  type: 'general.type', // "mmproj"
  name: 'general.name',
  fileType: 'general.file_type',
  hasVision: 'clip.has_vision_encoder',
  projector: 'clip.projector_type',
  useGelu: 'clip.use_gelu',
  imageSize: 'clip.vision.image_size',
  patchSize: 'clip.vision.patch_size',
  embedding: 'clip.vision.embedding_length',
  feedForward: 'clip.vision.feed_forward_length',
  blocks: 'clip.vision.block_count',
  projectionDim: 'clip.vision.projection_dim',
  heads: 'clip.vision.attention.head_count',
  layerNormEps: 'clip.vision.attention.layer_norm_epsilon',
  imageMean: 'clip.vision.image_mean',
  imageStd: 'clip.vision.image_std',
  mergeSize: 'clip.vision.spatial_merge_size',
  deepstack: 'clip.vision.is_deepstack_layers',
  minPixels: 'clip.vision.image_min_pixels',
  maxPixels: 'clip.vision.image_max_pixels',
} as const;

const BLOCK_PARTS: readonly [string, string][] = [
  ['norm1', 'ln1'], ['norm2', 'ln2'], ['attn.qkv', 'attn_qkv'], ['attn.proj', 'attn_out'],
  ['mlp.linear_fc1', 'ffn_up'], ['mlp.linear_fc2', 'ffn_down'],
];
const MERGER_PARTS: readonly [string, string][] = [['norm', 'norm'], ['linear_fc1', 'fc1'], ['linear_fc2', 'fc2']];

/** The GGUF name of a tower tensor (name without the model.visual. prefix), or null for the
 * patch-embedding weight, which splits in two (see above). */
export function mmprojName(cfg: VisionConfig, name: string): string | null {
  if (name === 'patch_embed.proj.weight') return null;
  if (name === 'patch_embed.proj.bias') return 'v.patch_embd.bias';
  if (name === 'pos_embed.weight') return 'v.position_embd.weight';
  const [, stem, suffix] = /^(.*)\.(weight|bias)$/.exec(name) ?? [];
  if (stem === undefined) throw new Error(`no mmproj name for vision tensor ${name}`);
  let m = /^blocks\.(\d+)\.(.+)$/.exec(stem);
  if (m) {
    const part = BLOCK_PARTS.find(([hf]) => hf === m![2]);
    if (part) return `v.blk.${m[1]}.${part[1]}.${suffix}`;
  }
  m = /^merger\.(.+)$/.exec(stem);
  if (m) {
    const gguf = { norm: 'v.post_ln', linear_fc1: 'mm.0', linear_fc2: 'mm.2' }[m[1]!];
    if (gguf) return `${gguf}.${suffix}`;
  }
  m = /^deepstack_merger_list\.(\d+)\.(.+)$/.exec(stem);
  if (m) {
    const block = cfg.deepstackVisualIndexes[Number(m[1])];
    const part = MERGER_PARTS.find(([hf]) => hf === m![2]);
    if (block !== undefined && part) return `v.deepstack.${block}.${part[1]}.${suffix}`;
  }
  throw new Error(`no mmproj name for vision tensor ${name}`);
}

export const PATCH_EMBED_NAMES = ['v.patch_embd.weight', 'v.patch_embd.weight.1'] as const;
