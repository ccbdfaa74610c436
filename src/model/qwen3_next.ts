// Qwen3-Next checkpoint layout: in_proj_qkvz and in_proj_ba are interleaved per key-head
// group. This is the only place that knows it: rows are regrouped here, at load time,
// into the Qwen3.5 channel order so every kernel sees one layout.
import type { ModelConfig } from './config.js';
import { type GdnWeights, type WeightReader, loadGdnCommon } from './weights.js';

/** Row indices that regroup in_proj_qkvz ([HK, 2dk + 2r·dv] per group g: q_g, k_g,
 * v_{g·r..g·r+r−1}, z_{g·r..}) into qkv (q all | k all | v all) and z (all heads). */
export function qkvzRowOrder(cfg: ModelConfig): { qkv: number[]; z: number[] } {
  const { linNumKeyHeads: hk, linNumValueHeads: hv, linKeyDim: dk, linValueDim: dv } = cfg;
  const r = hv / hk;
  const group = 2 * dk + 2 * r * dv;
  const range = (start: number, n: number): number[] => Array.from({ length: n }, (_, i) => start + i);
  const q: number[] = [];
  const k: number[] = [];
  const v: number[] = [];
  const z: number[] = [];
  for (let g = 0; g < hk; g++) {
    const base = g * group;
    q.push(...range(base, dk));
    k.push(...range(base + dk, dk));
    v.push(...range(base + 2 * dk, r * dv));
    z.push(...range(base + 2 * dk + r * dv, r * dv));
  }
  return { qkv: [...q, ...k, ...v], z };
}

/** Row indices that regroup in_proj_ba ([HK, 2r] per group: b then a) into b and a. */
export function baRowOrder(cfg: ModelConfig): { b: number[]; a: number[] } {
  const r = cfg.linNumValueHeads / cfg.linNumKeyHeads;
  const b: number[] = [];
  const a: number[] = [];
  for (let g = 0; g < cfg.linNumKeyHeads; g++) {
    for (let j = 0; j < r; j++) {
      b.push(g * 2 * r + j);
      a.push(g * 2 * r + r + j);
    }
  }
  return { b, a };
}

export function loadQwen3NextGdn(r: WeightReader, cfg: ModelConfig, p: string): GdnWeights {
  const h = cfg.hiddenSize;
  const { linNumKeyHeads: hk, linNumValueHeads: hv, linKeyDim: dk, linValueDim: dv } = cfg;
  const qkvzOrder = qkvzRowOrder(cfg);
  const baOrder = baRowOrder(cfg);
  const qkvz = r.rows(`${p}in_proj_qkvz.weight`, [hk * (2 * dk) + 2 * hv * dv, h]);
  const ba = r.rows(`${p}in_proj_ba.weight`, [2 * hv, h]);
  return {
    kind: 'linear',
    inProjQkv: r.gather(qkvz, qkvzOrder.qkv, h, `${p}in_proj_qkvz.weight`),
    inProjZ: r.gather(qkvz, qkvzOrder.z, h, `${p}in_proj_qkvz.weight`),
    inProjB: r.gather(ba, baOrder.b, h),
    inProjA: r.gather(ba, baOrder.a, h),
    ...loadGdnCommon(r, cfg, p),
  };
}
