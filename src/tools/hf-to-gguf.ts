// Hugging Face Qwen3.5 / Qwen3-Next checkpoint (qwen3_5 dense, qwen3_5_moe fused experts,
// qwen3_next per-expert) → the tensors and layout of a llama.cpp `qwen35` / `qwen35moe` /
// `qwen3next` GGUF, read row by row (no whole-model copy). The layout rules (the inverse of model/gguf-map.ts):
//  - names: blk.{i}.*, token_embd, output_norm, output (untied head); the MTP block is
//    block n_layer with nextn.{eh_proj, enorm, hnorm, shared_head_norm};
//  - zero-centred RMSNorm weights are stored with the +1 added (not linear_attn.norm);
//  - ssm_a = −exp(A_log); ssm_conv1d squeezed to [C, K]; 1-D tensors in F32;
//  - with HV > HK, value heads in tiled order (v0 of every key group, then v1, …) in the V
//    rows of attn_qkv and conv1d, attn_gate, ssm_beta/alpha, ssm_a, ssm_dt and the input
//    columns of ssm_out;
//  - experts.gate_up_proj [E, 2I, H] split into ffn_gate_exps / ffn_up_exps [E, I, H].
import type { Checkpoint } from '../checkpoint/safetensors.js';
import { bf16ToF32, f16ToF32 } from '../checkpoint/safetensors.js';
import type { ModelConfig } from '../model/config.js';
import { VISION_PREFIX, convDim } from '../model/config.js';
import { tiledValueHeads } from '../model/gguf-map.js';
import { qkvzRowOrder } from '../model/qwen3_next.js';
import { DeltaserveError } from '../util/errors.js';

/** One GGUF tensor of the conversion: `rows` × `cols` f32 values produced rows at a time. */
export interface ConvertedTensor {
  readonly name: string;
  /** PyTorch order (outermost first). */
  readonly shape: readonly number[];
  readonly rows: number;
  readonly cols: number;
  /** Stored as F32 whatever the target type (vectors, conv kernel, MoE router). */
  readonly keepF32: boolean;
  /** The HF tensor it comes from (for messages). */
  readonly source: string;
  /** Fill out[0 .. n·cols) with rows [r0, r0 + n) in GGUF order. */
  readRows(r0: number, n: number, out: Float32Array): void;
}

const LAYER_NAMES: Readonly<Record<string, string>> = {
  'input_layernorm.weight': 'attn_norm.weight', 'post_attention_layernorm.weight': 'post_attention_norm.weight',
  'self_attn.q_proj.weight': 'attn_q.weight', 'self_attn.k_proj.weight': 'attn_k.weight', 'self_attn.v_proj.weight': 'attn_v.weight',
  'self_attn.o_proj.weight': 'attn_output.weight', 'self_attn.q_norm.weight': 'attn_q_norm.weight', 'self_attn.k_norm.weight': 'attn_k_norm.weight',
  'mlp.gate_proj.weight': 'ffn_gate.weight', 'mlp.up_proj.weight': 'ffn_up.weight', 'mlp.down_proj.weight': 'ffn_down.weight',
  'linear_attn.in_proj_qkv.weight': 'attn_qkv.weight', 'linear_attn.in_proj_z.weight': 'attn_gate.weight',
  'linear_attn.in_proj_b.weight': 'ssm_beta.weight', 'linear_attn.in_proj_a.weight': 'ssm_alpha.weight',
  'linear_attn.conv1d.weight': 'ssm_conv1d.weight', 'linear_attn.A_log': 'ssm_a', 'linear_attn.dt_bias': 'ssm_dt.bias',
  'linear_attn.norm.weight': 'ssm_norm.weight', 'linear_attn.out_proj.weight': 'ssm_out.weight',
  'mlp.gate.weight': 'ffn_gate_inp.weight', 'mlp.experts.down_proj': 'ffn_down_exps.weight',
  'mlp.experts.gate_up_proj': 'ffn_gate_up_exps.weight',
  'mlp.shared_expert.gate_proj.weight': 'ffn_gate_shexp.weight', 'mlp.shared_expert.up_proj.weight': 'ffn_up_shexp.weight',
  'mlp.shared_expert.down_proj.weight': 'ffn_down_shexp.weight', 'mlp.shared_expert_gate.weight': 'ffn_gate_inp_shexp.weight',
};
const MTP_NAMES: Readonly<Record<string, string>> = {
  fc: 'nextn.eh_proj', pre_fc_norm_embedding: 'nextn.enorm', pre_fc_norm_hidden: 'nextn.hnorm', norm: 'nextn.shared_head_norm',
};

/** The GGUF name of HF tensor `hf` (weight prefix already removed), or null to skip it. */
function ggufName(hf: string, numLayers: number): string | null {
  if (hf === 'embed_tokens.weight') return 'token_embd.weight';
  if (hf === 'norm.weight') return 'output_norm.weight';
  if (hf === 'lm_head.weight') return 'output.weight';
  const layer = /^layers\.(\d+)\.(.+)$/.exec(hf);
  if (layer) return sub(`blk.${layer[1]}.`, layer[2]!, hf);
  const mtpLayer = /^mtp\.layers\.(\d+)\.(.+)$/.exec(hf);
  if (mtpLayer) return sub(`blk.${numLayers + Number(mtpLayer[1])}.`, mtpLayer[2]!, hf);
  const mtp = /^mtp\.([a-z_]+)\.(weight|bias)$/.exec(hf);
  if (mtp && MTP_NAMES[mtp[1]!]) return `blk.${numLayers}.${MTP_NAMES[mtp[1]!]}.${mtp[2]}`;
  throw new DeltaserveError('bad_checkpoint', `quantize: tensor ${hf} has no GGUF name (unknown tensor)`);
}

function sub(block: string, rest: string, hf: string): string {
  const g = LAYER_NAMES[rest];
  if (!g) throw new DeltaserveError('bad_checkpoint', `quantize: tensor ${hf} has no GGUF name (unknown layer tensor ${rest})`);
  return block + g;
}

/** Reads rows of one HF tensor as f32. */
class RowReader {
  private readonly item: number;
  private readonly bytes: Uint8Array;
  constructor(private readonly ck: Checkpoint, readonly name: string, readonly cols: number) {
    const dt = ck.info(name).dtype;
    if (dt !== 'BF16' && dt !== 'F16' && dt !== 'F32') throw new DeltaserveError('bad_checkpoint', `quantize: ${name} is ${dt}; expected BF16, F16 or F32`);
    this.item = dt === 'F32' ? 4 : 2;
    this.bytes = new Uint8Array(cols * this.item);
  }
  /** Source row r (of `cols` values) into out at o. */
  row(r: number, out: Float32Array, o: number): void {
    this.ck.readRangeInto(this.name, r * this.cols * this.item, this.bytes);
    const dt = this.ck.info(this.name).dtype;
    if (dt === 'F32') {
      out.set(new Float32Array(this.bytes.buffer, 0, this.cols), o);
    } else {
      const bits = new Uint16Array(this.bytes.buffer, 0, this.cols);
      const widen = dt === 'BF16' ? bf16ToF32 : f16ToF32;
      for (let i = 0; i < this.cols; i++) out[o + i] = widen(bits[i]!);
    }
  }
}

interface Plan {
  readonly rowOf?: (r: number) => number; // GGUF row → source row (default identity)
  readonly colOf?: Int32Array; // GGUF column → source column
  readonly map?: (v: number) => number; // value transform (f32 result)
}

function tensor(ck: Checkpoint, hfFull: string, name: string, shape: readonly number[], srcCols: number, keepF32: boolean, plan: Plan = {}): ConvertedTensor {
  const cols = shape[shape.length - 1]!;
  const rows = shape.slice(0, -1).reduce((a, b) => a * b, 1);
  const reader = new RowReader(ck, hfFull, srcCols);
  const scratch = new Float32Array(srcCols);
  return {
    name, shape, rows, cols, keepF32, source: hfFull,
    readRows(r0, n, out) {
      for (let i = 0; i < n; i++) {
        const src = plan.rowOf ? plan.rowOf(r0 + i) : r0 + i;
        if (!plan.colOf && srcCols === cols) reader.row(src, out, i * cols);
        else {
          reader.row(src, scratch, 0);
          for (let c = 0; c < cols; c++) out[i * cols + c] = scratch[plan.colOf ? plan.colOf[c]! : c]!;
        }
        if (plan.map) for (let c = 0; c < cols; c++) out[i * cols + c] = Math.fround(plan.map(out[i * cols + c]!));
      }
    },
  };
}

/** GGUF row → HF row for a tensor whose rows [first, …) hold value heads of `per` rows each,
 * grouped by key head in HF and tiled in GGUF. */
function tiledRows(cfg: ModelConfig, first: number, per: number): (r: number) => number {
  const from = tiledValueHeads(cfg.linNumKeyHeads, cfg.linNumValueHeads); // HF head h ← GGUF head from[h]
  const hfOf = new Int32Array(from.length);
  from.forEach((g, h) => (hfOf[g] = h));
  return (r) => (r < first ? r : first + hfOf[Math.floor((r - first) / per)]! * per + ((r - first) % per));
}

/** qwen3_next tensors with no one-to-one GGUF counterpart, as llama.cpp's converter lays
 * them out: in_proj_qkvz split into attn_qkv [q of every group; k …; v …] and attn_gate
 * [z …] (value heads stay grouped), in_proj_ba kept whole as ssm_ba, and per-expert
 * matrices stacked into ffn_{gate,up,down}_exps [E, rows, cols]. Null: not such a tensor;
 * an empty list: folded into the tensor of expert 0. */
function convertNextSpecial(ck: Checkpoint, cfg: ModelConfig, full: string, hf: string): ConvertedTensor[] | null {
  const block = /^(?:layers\.(\d+)|mtp\.layers\.(\d+))\.(.+)$/.exec(hf);
  if (!block) return null;
  const b = `blk.${block[1] !== undefined ? Number(block[1]) : cfg.numLayers + Number(block[2])}.`;
  const rest = block[3]!;
  const h = cfg.hiddenSize;
  if (rest === 'linear_attn.in_proj_qkvz.weight') {
    const order = qkvzRowOrder(cfg);
    return [
      tensor(ck, full, `${b}attn_qkv.weight`, [order.qkv.length, h], h, false, { rowOf: (r) => order.qkv[r]! }),
      tensor(ck, full, `${b}attn_gate.weight`, [order.z.length, h], h, false, { rowOf: (r) => order.z[r]! }),
    ];
  }
  if (rest === 'linear_attn.in_proj_ba.weight') return [tensor(ck, full, `${b}ssm_ba.weight`, [2 * cfg.linNumValueHeads, h], h, false)];
  const expert = /^mlp\.experts\.(\d+)\.(gate|up|down)_proj\.weight$/.exec(rest);
  if (!expert) return null;
  if (expert[1] !== '0') return [];
  const count = cfg.layerMlp[0]?.kind === 'moe' ? cfg.layerMlp[0].numExperts : 0;
  const sources = Array.from({ length: count }, (_, x) => full.replace(/experts\.0\./, `experts.${x}.`));
  return [stackedExperts(ck, sources, `${b}ffn_${expert[2]}_exps.weight`)];
}

/** The matrices `sources` (one per expert, equal shapes) as one [E, rows, cols] tensor. */
function stackedExperts(ck: Checkpoint, sources: readonly string[], name: string): ConvertedTensor {
  const [rows, cols] = ck.info(sources[0]!).shape as [number, number];
  const readers = sources.map((src) => {
    const shape = ck.info(src).shape;
    if (shape[0] !== rows || shape[1] !== cols) {
      throw new DeltaserveError('bad_checkpoint', `quantize: ${src} is [${shape.join(', ')}]; the other experts are [${rows}, ${cols}]`);
    }
    return new RowReader(ck, src, cols);
  });
  return {
    name, shape: [sources.length, rows, cols], rows: sources.length * rows, cols, keepF32: false, source: sources[0]!,
    readRows(r0, n, out) {
      for (let i = 0; i < n; i++) readers[Math.floor((r0 + i) / rows)]!.row((r0 + i) % rows, out, i * cols);
    },
  };
}

/** Every GGUF tensor of a qwen3_5 / qwen3_5_moe / qwen3_next checkpoint, in the checkpoint's order. */
export function convertTensors(ck: Checkpoint, cfg: ModelConfig): ConvertedTensor[] {
  const next = cfg.arch === 'qwen3_next';
  const tiled = !next && cfg.linNumValueHeads !== cfg.linNumKeyHeads;
  const qk = 2 * cfg.linNumKeyHeads * cfg.linKeyDim;
  const dv = cfg.linValueDim;
  const out: ConvertedTensor[] = [];
  for (const [full, info] of ck.tensors) {
    if (full.startsWith(VISION_PREFIX)) continue;
    const hf = full.startsWith(cfg.weightPrefix) ? full.slice(cfg.weightPrefix.length) : full;
    const special = next ? convertNextSpecial(ck, cfg, full, hf) : null;
    if (special) {
      out.push(...special);
      continue;
    }
    const name = ggufName(hf, cfg.numLayers);
    if (name === null) continue;
    const shape = info.shape;
    const cols = shape[shape.length - 1]!;
    const vector = shape.length === 1 || (shape.length === 2 && shape[0] === 1 && name.endsWith('_shexp.weight'));
    const linear = hf.includes('linear_attn.');
    const plan: { rowOf?: (r: number) => number; colOf?: Int32Array; map?: (v: number) => number } = {};
    if (tiled && linear) {
      if (hf.endsWith('in_proj_qkv.weight')) plan.rowOf = tiledRows(cfg, qk, dv);
      else if (hf.endsWith('in_proj_z.weight')) plan.rowOf = tiledRows(cfg, 0, dv);
      else if (/in_proj_[ab]\.weight$/.test(hf)) plan.rowOf = tiledRows(cfg, 0, 1);
      else if (hf.endsWith('conv1d.weight')) plan.rowOf = tiledRows(cfg, qk, dv);
      else if (hf.endsWith('out_proj.weight')) {
        const rowOf = tiledRows(cfg, 0, dv);
        plan.colOf = Int32Array.from({ length: cols }, (_, c) => rowOf(c));
      }
    }
    if (hf.endsWith('A_log')) plan.map = (v) => -Math.exp(v);
    else if (hf.endsWith('norm.weight') && !hf.endsWith('linear_attn.norm.weight')) plan.map = (v) => v + 1;
    if (vector) {
      const n = shape.reduce((a, b) => a * b, 1);
      const v = tensor(ck, full, name, [n], n, true, plan);
      // vectors of value heads (A_log, dt_bias) permute elements, not rows
      out.push(tiled && linear && (hf.endsWith('A_log') || hf.endsWith('dt_bias')) ? permutedVector(v, tiledRows(cfg, 0, 1)) : v);
    } else if (hf.endsWith('conv1d.weight')) {
      const c = convDim(cfg);
      out.push(tensor(ck, full, name, [c, cfg.convKernel], cfg.convKernel, true, plan));
    } else if (hf.endsWith('experts.gate_up_proj')) {
      const [e, twoI, h] = shape as [number, number, number];
      const i = twoI / 2;
      const half = (upper: number) => (r: number) => Math.floor(r / i) * twoI + upper * i + (r % i);
      out.push(tensor(ck, full, name.replace('gate_up', 'gate'), [e, i, h], h, false, { rowOf: half(0) }));
      out.push(tensor(ck, full, name.replace('gate_up', 'up'), [e, i, h], h, false, { rowOf: half(1) }));
    } else {
      out.push(tensor(ck, full, name, shape, cols, hf.endsWith('mlp.gate.weight'), plan));
    }
  }
  return out;
}

/** A 1-row tensor whose elements are reordered by `srcOf` (GGUF index → source index). */
function permutedVector(t: ConvertedTensor, srcOf: (i: number) => number): ConvertedTensor {
  const tmp = new Float32Array(t.cols);
  return {
    ...t,
    readRows(r0, n, out) {
      t.readRows(0, 1, tmp);
      for (let i = 0; i < t.cols; i++) out[i] = tmp[srcOf(i)]!;
    },
  };
}
