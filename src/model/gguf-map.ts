// GGUF tensor names → the Hugging Face names (and shapes) the loader asks for, with the
// layout transforms that make the weights equal to the safetensors checkpoint's:
// - dims: GGUF ne is reversed; checkpoint/gguf-file.ts already gives PyTorch order. conv1d [C, K] is
//   presented as [C, 1, K].
// - norms: converters store (1 + w) for every weight whose HF name ends in `norm.weight`
//   (except linear_attn.norm); we present w = (1+w) − 1 in f32 (exact when 1 + w ≥ 0.5), so
//   the kernel's 1 + w gives back the stored value bit for bit. MTP's enorm / hnorm
//   (pre_fc_norm_embedding / _hidden) depend on the converter version: see mtpInputNorm.
// - ssm_a = −exp(A_log): we present the A_log whose −exp rounds to ssm_a (see recoverALog).
// - value heads in tiled order (when HV > HK): tiled head t = i·HK + g holds grouped head
//   h = g·r + i. Rows are regrouped on read; ssm_out's input columns too for float types,
//   and for quantized ones the permutation is reported (TensorInfo.columnBlocks) so the model
//   permutes the activation instead.
// - MoE: ffn_{gate,up,down}_exps [E, rows, cols] are presented as per-expert matrices, each
//   a row range of the 3-D tensor read straight into backend memory.
// - qwen3next: grouped value heads; attn_qkv / attn_gate (or ssm_in whole) and ssm_ba.
import { DeltaserveError } from '../util/errors.js';
import type { ModelConfig } from './config.js';
import { convDim } from './config.js';
import { GgufCheckpoint, type GgufParts, type Located, type RowSegment, openGgufParts, rowMapped, vectorMapped } from '../checkpoint/gguf.js';
import { ggufModelConfig } from './gguf-config.js';
import { baRowOrder } from './qwen3_next.js';

function shapeStr(s: readonly number[]): string {
  return `[${s.join(', ')}]`;
}

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** f32 value rounded to the nearest bfloat16 (ties to even). */
function roundBf16(x: number): number {
  f32[0] = x;
  const bits = u32[0]!;
  u32[0] = ((bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16) << 16;
  return f32[0]!;
}

/** The next float32 above (dir = 1) or below (dir = −1) x. */
function nextF32(x: number, dir: 1 | -1): number {
  f32[0] = x;
  u32[0] = u32[0]! + (x >= 0 ? dir : -dir);
  return f32[0]!;
}

/** A_log from a stored ssm_a = −exp(A_log) rounded to f32 (by the converter, whose f32 exp
 * may be a few ulps off). Checkpoints store A_log in bf16 (or f32): prefer the bf16 value
 * whose −exp lands within BF16_MATCH_ULPS f32 steps of ssm_a (neighbouring bf16 values are
 * 2^16 f32 steps apart, so it is the original), else the f32 value whose −exp rounds to
 * ssm_a, else fround(log(−ssm_a)). The gate kernel then computes −exp(A_log) exactly as on
 * the original checkpoint (checked on the fixtures' safetensors twins). */
export function recoverALog(a: number): number {
  if (!(a < 0) || !Number.isFinite(a)) return Math.fround(Math.log(-a));
  const x0 = Math.log(-a);
  const value = (x: number): number => Math.fround(-Math.exp(x));
  const tolerance = BF16_MATCH_ULPS * Math.abs(nextF32(a, 1) - a);
  const b = roundBf16(x0);
  const ulp = bf16Ulp(b);
  let best: number | undefined;
  for (let i = -2; i <= 2; i++) {
    const c = roundBf16(b + i * ulp);
    const err = Math.abs(value(c) - a);
    if (err <= tolerance && (best === undefined || err < Math.abs(value(best) - a))) best = c;
  }
  if (best !== undefined) return best;
  const f = Math.fround(x0);
  let lo = f;
  let hi = f;
  for (let i = 0; i <= 8; i++) {
    if (value(hi) === a) return hi;
    if (value(lo) === a) return lo;
    lo = nextF32(lo, -1);
    hi = nextF32(hi, 1);
  }
  return f;
}
/** How close (in f32 steps) −exp of a bf16 A_log must come to ssm_a to be taken as the original. */
const BF16_MATCH_ULPS = 8;

function bf16Ulp(x: number): number {
  const e = Math.floor(Math.log2(Math.abs(x) || 2 ** -126));
  return 2 ** (e - 7);
}

/** w from stored 1 + w: exact in f32 when 1 + w ≥ 0.5, so the kernel's 1 + w restores the
 * stored value (below that, within one rounding). */
function minusOne(v: Float32Array): Float32Array {
  return v.map((x) => Math.fround(x - 1));
}

/** True when the HF name is a zero-centred norm that converters store as 1 + w. */
function storedPlusOne(hfName: string): boolean {
  return hfName.endsWith('norm.weight') && !hfName.endsWith('linear_attn.norm.weight');
}

/** Registers the virtual tensors of a GGUF model on a GgufCheckpoint. */
class Mapper {
  constructor(private readonly ck: GgufCheckpoint, private readonly g: GgufParts) {}

  /** The GGUF tensor, its shape checked; null (recorded as missing) when absent. */
  src(hf: string, gg: string, expected: readonly number[]): Located | null {
    const s = this.g.tensors.get(gg);
    if (!s) {
      this.ck.addMissing(hf, gg);
      return null;
    }
    const shape = s.t.shape;
    if (shape.length !== expected.length || shape.some((d, i) => d !== expected[i])) {
      throw new DeltaserveError('bad_checkpoint',
        `${s.file}: tensor ${gg} has shape ${shapeStr(shape)} (GGUF ne ${shapeStr([...shape].reverse())}), but the metadata implies ${shapeStr(expected)}`);
    }
    return s;
  }

  /** A matrix whose rows are stored in order (shape = the HF shape). */
  plain(hf: string, gg: string, stored: readonly number[], shape: readonly number[] = stored): void {
    const s = this.src(hf, gg, stored);
    if (!s) return;
    const rows = stored.length <= 1 ? 1 : stored.slice(0, -1).reduce((a, b) => a * b, 1);
    this.ck.add(rowMapped(hf, shape, [{ src: s, row: 0, n: rows }]));
  }

  /** Rows of `gg` as runs of blocks: logical block b = stored block from[b] (blockRows rows
   * each) after `headRows` rows kept in place. */
  blocks(hf: string, gg: string, stored: readonly number[], shape: readonly number[], headRows: number,
    blockRows: number, from: readonly number[]): void {
    const s = this.src(hf, gg, stored);
    if (!s) return;
    this.ck.add(rowMapped(hf, shape, blockSegments(s, headRows, blockRows, from)));
  }

  /** A float vector with an element permutation and/or a transform. */
  vector(hf: string, gg: string, n: number, from: readonly number[] | null, transform: (v: Float32Array) => Float32Array): void {
    const s = this.src(hf, gg, [n]);
    if (s) this.ck.add(vectorMapped(hf, [n], s, from, transform));
  }

  /** A norm weight [n]: minus one when the converter added one. */
  norm(hf: string, gg: string, n: number): void {
    this.vector(hf, gg, n, null, storedPlusOne(hf) ? minusOne : (v) => v);
  }

  /** MTP's pre_fc norms: converter versions differ (older ones store w, newer ones rename
   * the tensors before their `norm.weight` rule and store 1 + w), so the values decide: a
   * zero-centred w has mean near 0, a stored 1 + w near 1. */
  mtpInputNorm(hf: string, gg: string, n: number): void {
    this.vector(hf, gg, n, null, (v) => (v.reduce((a, x) => a + x, 0) / v.length > 0.5 ? minusOne(v) : v));
  }

  has(gg: string): boolean {
    return this.g.tensors.has(gg);
  }
  /** A matrix whose column blocks (blockCols wide) are permuted: logical block b is stored
   * block from[b] (nothing to do for the identity). */
  column(hf: string, gg: string, stored: readonly number[], blockCols: number, from: readonly number[]): void {
    const s = this.src(hf, gg, stored);
    const identity = from.every((f, i) => f === i);
    if (s) this.ck.add(rowMapped(hf, stored, [{ src: s, row: 0, n: stored[0]! }], identity ? undefined : { size: blockCols, from }));
  }
  expertRows(hf: string, gg: string, stored: readonly number[], e: number): void {
    const s = this.src(hf, gg, stored);
    if (s) this.ck.add(rowMapped(hf, stored.slice(1), [{ src: s, row: e * stored[1]!, n: stored[1]! }]));
  }
}

/** Segments for `headRows` rows in place, then blocks in the order `from`, merging runs. */
function blockSegments(s: Located, headRows: number, blockRows: number, from: readonly number[]): RowSegment[] {
  const segs: RowSegment[] = headRows > 0 ? [{ src: s, row: 0, n: headRows }] : [];
  for (const b of from) {
    const row = headRows + b * blockRows;
    const last = segs[segs.length - 1];
    if (last && last.row + last.n === row) segs[segs.length - 1] = { ...last, n: last.n + blockRows };
    else segs.push({ src: s, row, n: blockRows });
  }
  return segs;
}

/** from[h] = the tiled position of grouped value head h (identity when HV = HK). */
export function tiledValueHeads(hk: number, hv: number): number[] {
  const r = hv / hk;
  return Array.from({ length: hv }, (_, h) => (h % r) * hk + Math.floor(h / r));
}

function mapGdn(m: Mapper, cfg: ModelConfig, L: string, b: string): void {
  const h = cfg.hiddenSize;
  const { linNumKeyHeads: hk, linNumValueHeads: hv, linKeyDim: dk, linValueDim: dv, convKernel: kc } = cfg;
  const from = tiledValueHeads(hk, hv);
  const qk = 2 * hk * dk;
  const c = convDim(cfg);
  const p = `${L}linear_attn.`;
  m.blocks(`${p}in_proj_qkv.weight`, `${b}attn_qkv.weight`, [c, h], [c, h], qk, dv, from);
  m.blocks(`${p}in_proj_z.weight`, `${b}attn_gate.weight`, [hv * dv, h], [hv * dv, h], 0, dv, from);
  m.blocks(`${p}in_proj_b.weight`, `${b}ssm_beta.weight`, [hv, h], [hv, h], 0, 1, from);
  m.blocks(`${p}in_proj_a.weight`, `${b}ssm_alpha.weight`, [hv, h], [hv, h], 0, 1, from);
  m.blocks(`${p}conv1d.weight`, `${b}ssm_conv1d.weight`, [c, kc], [c, 1, kc], qk, dv, from);
  m.vector(`${p}A_log`, `${b}ssm_a`, hv, from, (v) => v.map(recoverALog));
  m.vector(`${p}dt_bias`, `${b}ssm_dt.bias`, hv, from, (v) => v);
  m.norm(`${p}norm.weight`, `${b}ssm_norm.weight`, dv);
  m.column(`${p}out_proj.weight`, `${b}ssm_out.weight`, [h, hv * dv], dv, from);
}

/** qwen3next: llama.cpp's converter splits in_proj_qkvz into attn_qkv / attn_gate (older
 * files keep it whole as ssm_in) and keeps in_proj_ba whole as ssm_ba; value heads stay in
 * grouped order. */
function mapGdnNext(m: Mapper, cfg: ModelConfig, L: string, b: string): void {
  const h = cfg.hiddenSize;
  const { linNumKeyHeads: hk, linNumValueHeads: hv, linKeyDim: dk, linValueDim: dv, convKernel: kc } = cfg;
  const c = convDim(cfg);
  const p = `${L}linear_attn.`;
  if (m.has(`${b}ssm_in.weight`)) {
    m.plain(`${p}in_proj_qkvz.weight`, `${b}ssm_in.weight`, [hk * 2 * dk + 2 * hv * dv, h]);
    m.plain(`${p}in_proj_ba.weight`, `${b}ssm_ba.weight`, [2 * hv, h]);
  } else {
    m.plain(`${p}in_proj_qkv.weight`, `${b}attn_qkv.weight`, [c, h]);
    m.plain(`${p}in_proj_z.weight`, `${b}attn_gate.weight`, [hv * dv, h]);
    const order = baRowOrder(cfg);
    m.blocks(`${p}in_proj_b.weight`, `${b}ssm_ba.weight`, [2 * hv, h], [hv, h], 0, 1, order.b);
    m.blocks(`${p}in_proj_a.weight`, `${b}ssm_ba.weight`, [2 * hv, h], [hv, h], 0, 1, order.a);
  }
  m.plain(`${p}conv1d.weight`, `${b}ssm_conv1d.weight`, [c, kc], [c, 1, kc]);
  m.vector(`${p}A_log`, `${b}ssm_a`, hv, null, (v) => v.map(recoverALog));
  m.vector(`${p}dt_bias`, `${b}ssm_dt.bias`, hv, null, (v) => v);
  m.norm(`${p}norm.weight`, `${b}ssm_norm.weight`, dv);
  m.plain(`${p}out_proj.weight`, `${b}ssm_out.weight`, [h, hv * dv]);
}

function mapAttention(m: Mapper, cfg: ModelConfig, L: string, b: string): void {
  const { hiddenSize: h, numHeads: nh, numKvHeads: nkv, headDim: hd } = cfg;
  const p = `${L}self_attn.`;
  m.plain(`${p}q_proj.weight`, `${b}attn_q.weight`, [nh * hd * 2, h]);
  m.plain(`${p}k_proj.weight`, `${b}attn_k.weight`, [nkv * hd, h]);
  m.plain(`${p}v_proj.weight`, `${b}attn_v.weight`, [nkv * hd, h]);
  m.plain(`${p}o_proj.weight`, `${b}attn_output.weight`, [h, nh * hd]);
  m.norm(`${p}q_norm.weight`, `${b}attn_q_norm.weight`, hd);
  m.norm(`${p}k_norm.weight`, `${b}attn_k_norm.weight`, hd);
}

function mapMlp(m: Mapper, cfg: ModelConfig, mlp: ModelConfig['mtpMlp'], L: string, b: string): void {
  const h = cfg.hiddenSize;
  const p = `${L}mlp.`;
  if (mlp.kind === 'dense') {
    const i = mlp.intermediateSize;
    m.plain(`${p}gate_proj.weight`, `${b}ffn_gate.weight`, [i, h]);
    m.plain(`${p}up_proj.weight`, `${b}ffn_up.weight`, [i, h]);
    m.plain(`${p}down_proj.weight`, `${b}ffn_down.weight`, [h, i]);
    return;
  }
  const { numExperts: e, expertIntermediateSize: ie, sharedIntermediateSize: is } = mlp;
  m.plain(`${p}gate.weight`, `${b}ffn_gate_inp.weight`, [e, h]);
  for (let x = 0; x < e; x++) {
    const q = `${p}experts.${x}.`;
    m.expertRows(`${q}gate_proj.weight`, `${b}ffn_gate_exps.weight`, [e, ie, h], x);
    m.expertRows(`${q}up_proj.weight`, `${b}ffn_up_exps.weight`, [e, ie, h], x);
    m.expertRows(`${q}down_proj.weight`, `${b}ffn_down_exps.weight`, [e, h, ie], x);
  }
  if (is > 0) {
    m.plain(`${p}shared_expert.gate_proj.weight`, `${b}ffn_gate_shexp.weight`, [is, h]);
    m.plain(`${p}shared_expert.up_proj.weight`, `${b}ffn_up_shexp.weight`, [is, h]);
    m.plain(`${p}shared_expert.down_proj.weight`, `${b}ffn_down_shexp.weight`, [h, is]);
    m.plain(`${p}shared_expert_gate.weight`, `${b}ffn_gate_inp_shexp.weight`, [h], [1, h]);
  }
}

function mapLayer(m: Mapper, cfg: ModelConfig, kind: 'linear' | 'full', mlp: ModelConfig['mtpMlp'], L: string, b: string): void {
  const h = cfg.hiddenSize;
  m.norm(`${L}input_layernorm.weight`, `${b}attn_norm.weight`, h);
  m.norm(`${L}post_attention_layernorm.weight`, `${b}post_attention_norm.weight`, h);
  if (kind === 'full') mapAttention(m, cfg, L, b);
  else if (cfg.arch === 'qwen3_next') mapGdnNext(m, cfg, L, b);
  else mapGdn(m, cfg, L, b);
  mapMlp(m, cfg, mlp, L, b);
}

/** Register every tensor of a qwen35 / qwen35moe / qwen3next model under its Hugging Face name. */
export function mapModel(ck: GgufCheckpoint, g: GgufParts, cfg: ModelConfig): void {
  const m = new Mapper(ck, g);
  const P = cfg.weightPrefix;
  const h = cfg.hiddenSize;
  const v = cfg.vocabSize;
  m.plain(`${P}embed_tokens.weight`, 'token_embd.weight', [v, h]);
  if (m.has('output.weight')) m.plain('lm_head.weight', 'output.weight', [v, h]);
  m.norm(`${P}norm.weight`, 'output_norm.weight', h);
  cfg.layerKinds.forEach((kind, i) => mapLayer(m, cfg, kind, cfg.layerMlp[i]!, `${P}layers.${i}.`, `blk.${i}.`));
  for (let i = 0; i < cfg.mtpLayers; i++) {
    const b = `blk.${cfg.numLayers + i}.`;
    if (i === 0) {
      m.plain('mtp.fc.weight', `${b}nextn.eh_proj.weight`, [h, 2 * h]);
      m.mtpInputNorm('mtp.pre_fc_norm_embedding.weight', `${b}nextn.enorm.weight`, h);
      m.mtpInputNorm('mtp.pre_fc_norm_hidden.weight', `${b}nextn.hnorm.weight`, h);
      m.norm('mtp.norm.weight', `${b}nextn.shared_head_norm.weight`, h);
    }
    mapLayer(m, cfg, 'full', cfg.mtpMlp, `mtp.layers.${i}.`, b);
  }
}

/** Open a GGUF model (a file, or the first part of a split file): its config from the
 * metadata and a checkpoint presenting its tensors under the Hugging Face names. */
export function openGgufModel(path: string): { config: ModelConfig; ckpt: GgufCheckpoint } {
  const g = openGgufParts(path);
  const ckpt = new GgufCheckpoint(path, g.parts, g.fds);
  try {
    const embd = g.tensors.get('token_embd.weight');
    if (!embd) throw new DeltaserveError('missing_tensor', `tensor token_embd.weight not found in GGUF ${path}`);
    const config = ggufModelConfig(g.first, embd.t.shape[0]!, new Set(g.tensors.keys()));
    mapModel(ckpt, g, config);
    return { config, ckpt };
  } catch (e) {
    ckpt.close();
    throw e;
  }
}
