// The release layout of Qwen3.5 checkpoints, as `make-model` writes it by default:
// `Qwen3_5ForConditionalGeneration` / `Qwen3_5MoeForConditionalGeneration`, the text model's
// config nested under `text_config`, a `vision_config`, a (here tiny, random) vision tower
// under `model.visual.*` that deltaserve skips at load, and the chat template in its own
// `chat_template.jinja` file. Qwen3-Next has no wrapper: its release layout is flat.
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** Prefix of vision-tower tensors in Qwen3.5 release checkpoints (skipped, text-only). */
import { VISION_PREFIX } from '../model/config.js';

export type ReleaseWrapper = 'qwen3_5' | 'qwen3_5_moe';

/** The wrapper model_type of a text model_type, or null when it has none (flat). */
export function releaseWrapper(textModelType: string): ReleaseWrapper | null {
  if (textModelType === 'qwen3_5_text') return 'qwen3_5';
  if (textModelType === 'qwen3_5_moe_text') return 'qwen3_5_moe';
  return null;
}

/** A deliberately small vision tower (depth 1, width 32): real tensor names and ranks, so
 * loaders meet `model.visual.*` tensors as in released files, without their size. */
const VISION = { depth: 1, hidden: 32, heads: 2, intermediate: 64, patch: 16, temporal: 2, merge: 2, inChannels: 3 } as const;

/** [name, shape] of the vision tower's tensors; `textHidden` is the merger's output width. */
export function visionTensorShapes(textHidden: number): [string, number[]][] {
  const v = VISION;
  const merged = v.hidden * v.merge * v.merge;
  const out: [string, number[]][] = [
    [`${VISION_PREFIX}patch_embed.proj.weight`, [v.hidden, v.inChannels, v.temporal, v.patch, v.patch]],
    [`${VISION_PREFIX}patch_embed.proj.bias`, [v.hidden]],
    [`${VISION_PREFIX}merger.norm.weight`, [v.hidden]],
    [`${VISION_PREFIX}merger.norm.bias`, [v.hidden]],
    [`${VISION_PREFIX}merger.linear_fc1.weight`, [merged, merged]],
    [`${VISION_PREFIX}merger.linear_fc1.bias`, [merged]],
    [`${VISION_PREFIX}merger.linear_fc2.weight`, [textHidden, merged]],
    [`${VISION_PREFIX}merger.linear_fc2.bias`, [textHidden]],
  ];
  for (let b = 0; b < v.depth; b++) {
    const p = `${VISION_PREFIX}blocks.${b}.`;
    out.push(
      [`${p}norm1.weight`, [v.hidden]], [`${p}norm1.bias`, [v.hidden]],
      [`${p}attn.qkv.weight`, [3 * v.hidden, v.hidden]], [`${p}attn.qkv.bias`, [3 * v.hidden]],
      [`${p}attn.proj.weight`, [v.hidden, v.hidden]], [`${p}attn.proj.bias`, [v.hidden]],
      [`${p}norm2.weight`, [v.hidden]], [`${p}norm2.bias`, [v.hidden]],
      [`${p}mlp.linear_fc1.weight`, [v.intermediate, v.hidden]], [`${p}mlp.linear_fc1.bias`, [v.intermediate]],
      [`${p}mlp.linear_fc2.weight`, [v.hidden, v.intermediate]], [`${p}mlp.linear_fc2.bias`, [v.hidden]],
    );
  }
  return out;
}

/** The release config.json around a text config (which keeps its own model_type). */
export function releaseConfig(wrapper: ReleaseWrapper, text: Record<string, unknown>): Record<string, unknown> {
  const v = VISION;
  const moe = wrapper === 'qwen3_5_moe';
  return {
    architectures: [moe ? 'Qwen3_5MoeForConditionalGeneration' : 'Qwen3_5ForConditionalGeneration'],
    model_type: wrapper,
    image_token_id: null, video_token_id: null, vision_start_token_id: null, vision_end_token_id: null,
    tie_word_embeddings: text['tie_word_embeddings'],
    text_config: { ...text, architectures: undefined },
    vision_config: {
      model_type: wrapper, depth: v.depth, hidden_size: v.hidden, num_heads: v.heads, intermediate_size: v.intermediate,
      in_channels: v.inChannels, patch_size: v.patch, temporal_patch_size: v.temporal, spatial_merge_size: v.merge,
      out_hidden_size: text['hidden_size'], hidden_act: 'gelu_pytorch_tanh',
    },
  };
}

/** Move a `chat_template` string out of tokenizer_config.json into chat_template.jinja
 * (as the Qwen3.5 releases ship it). No-op when there is no inline template. */
export function splitChatTemplate(dir: string): void {
  const path = join(dir, 'tokenizer_config.json');
  if (!existsSync(path)) return;
  const cfg = JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
  const t = cfg['chat_template'];
  if (typeof t !== 'string') return;
  delete cfg['chat_template'];
  rmSync(path, { force: true });
  writeFileSync(path, `${JSON.stringify(cfg, null, 2)}\n`);
  writeFileSync(join(dir, 'chat_template.jinja'), t);
}
