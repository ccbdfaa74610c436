// Qwen3.5 (dense and MoE) checkpoint layout: separate in_proj_qkv / in_proj_z /
// in_proj_b / in_proj_a, already in the canonical channel order (q all | k all | v all).
import type { ModelConfig } from './config.js';
import { convDim } from './config.js';
import { type GdnWeights, type WeightReader, loadGdnCommon } from './weights.js';

export function loadQwen35Gdn(r: WeightReader, cfg: ModelConfig, p: string): GdnWeights {
  const h = cfg.hiddenSize;
  const hv = cfg.linNumValueHeads;
  return {
    kind: 'linear',
    inProjQkv: r.linear(`${p}in_proj_qkv.weight`, [convDim(cfg), h]),
    inProjZ: r.linear(`${p}in_proj_z.weight`, [hv * cfg.linValueDim, h]),
    inProjB: r.linear(`${p}in_proj_b.weight`, [hv, h]),
    inProjA: r.linear(`${p}in_proj_a.weight`, [hv, h]),
    ...loadGdnCommon(r, cfg, p),
  };
}
