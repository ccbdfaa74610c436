// Assemble ModelWeights from a checkpoint: the parts shared by every architecture
// (embedding, layers, final norm, head, MTP), with the Gated DeltaNet tensors loaded by
// the architecture's own function.
import type { RowQuantizer } from '../kernels/quant/row-quantizer.js';
import type { AnyKernels } from '../kernels/types.js';
import type { ModelConfig } from './config.js';
import { type Checkpoint } from '../checkpoint/safetensors.js';
import { loadQwen35Gdn } from './qwen3_5.js';
import { loadQwen3NextGdn } from './qwen3_next.js';
import {
  type GdnWeights, type LayerWeights, type ModelWeights, type MtpWeights,
  WeightReader, loadAttention, loadMlp,
} from './weights.js';
import type { MlpConfig } from './config.js';
import type { QuantizeMode } from '../checkpoint/quantize-load.js';

type GdnLoader = (r: WeightReader, cfg: ModelConfig, prefix: string) => GdnWeights;

export function loadModelWeights(ckpt: Checkpoint, cfg: ModelConfig, kernels: AnyKernels,
  onBytes?: (n: number) => void, quantize?: QuantizeMode, quantizer?: RowQuantizer): ModelWeights {
  const r = new WeightReader(ckpt, kernels, onBytes, quantize, quantizer);
  // Qwen3-Next checkpoints interleave in_proj_qkvz; its GGUF files may hold the Qwen3.5 split.
  const loadGdn: GdnLoader = (rd, c, pre) => (rd.has(`${pre}in_proj_qkvz.weight`)
    || (c.arch === 'qwen3_next' && !rd.has(`${pre}in_proj_qkv.weight`)) ? loadQwen3NextGdn : loadQwen35Gdn)(rd, c, pre);
  const p = cfg.weightPrefix;
  const h = cfg.hiddenSize;
  // Tied models have no lm_head tensor (some tied checkpoints still ship one); a tied
  // table serves as lm_head too, so it is packed for matmul (embed reads both layouts).
  const tied = cfg.tieWordEmbeddings && !r.has('lm_head.weight');
  const embed = r.table(`${p}embed_tokens.weight`, [cfg.vocabSize, h], tied);
  const layers = cfg.layerKinds.map((kind, i) => {
    const mlp = cfg.layerMlp[i]!;
    return loadLayer(r, cfg, `${p}layers.${i}.`, kind, mlp, loadGdn);
  });
  const lmHead = tied ? embed : r.linear('lm_head.weight', [cfg.vocabSize, h]);
  const mtp: MtpWeights[] = [];
  for (let i = 0; i < cfg.mtpLayers; i++) mtp.push(loadMtp(r, cfg, i, loadGdn));
  return { embed, lmHead, finalNorm: r.getF32(`${p}norm.weight`, [h]), layers, mtp };
}

function loadLayer(r: WeightReader, cfg: ModelConfig, p: string, kind: 'linear' | 'full', mlp: MlpConfig,
  loadGdn: GdnLoader): LayerWeights {
  const h = cfg.hiddenSize;
  return {
    inputNorm: r.getF32(`${p}input_layernorm.weight`, [h]),
    postNorm: r.getF32(`${p}post_attention_layernorm.weight`, [h]),
    mixer: kind === 'full' ? loadAttention(r, cfg, `${p}self_attn.`) : loadGdn(r, cfg, `${p}linear_attn.`),
    mlp: loadMlp(r, cfg, mlp, `${p}mlp.`),
  };
}

function loadMtp(r: WeightReader, cfg: ModelConfig, i: number, loadGdn: GdnLoader): MtpWeights {
  const h = cfg.hiddenSize;
  // MTP layers are numbered from 0 under `mtp.layers.`; shared fc/norms for one layer.
  return {
    fc: r.linear('mtp.fc.weight', [h, 2 * h]),
    normEmbedding: r.getF32('mtp.pre_fc_norm_embedding.weight', [h]),
    normHidden: r.getF32('mtp.pre_fc_norm_hidden.weight', [h]),
    norm: r.getF32('mtp.norm.weight', [h]),
    layer: loadLayer(r, cfg, `mtp.layers.${i}.`, 'full', cfg.mtpMlp, loadGdn),
  };
}
