// Structured model weights and the architecture-independent loading helpers.
// Checkpoint quirks (naming, interleaving, fused experts) live in one file per
// architecture: qwen3_5.ts and qwen3_next.ts.
import type { AnyKernels, Weight, WeightDType } from '../kernels/types.js';
import type { MlpConfig, ModelConfig } from './config.js';
import { convDim } from './config.js';
import { type Checkpoint, f16ToF32, storedRowBytes } from '../checkpoint/safetensors.js';
import { assertFiniteF16, loadWeight, loadWeightF32, matrixDTypeOf, weightDTypeOf } from '../checkpoint/load-weight.js';
import { DeltaserveError } from '../util/errors.js';
import { isQuantType, type QuantType } from '../kernels/quant/formats.js';
import { type QuantizeMode, loadQuantized, quantTypeFor } from '../checkpoint/quantize-load.js';
import { type RowQuantizer, type RowSource, refQuantizer } from '../kernels/quant/row-quantizer.js';
import { quantRowBytes } from '../kernels/quant/formats.js';

export interface AttnWeights {
  readonly kind: 'full';
  readonly qProj: Weight; // [nH·hd·2, H] per head: query (hd) then gate (hd); [nH·hd, H] without attn_output_gate
  readonly kProj: Weight; // [nKV·hd, H]
  readonly vProj: Weight; // [nKV·hd, H]
  readonly oProj: Weight; // [H, nH·hd]
  readonly qNorm: Weight; // [1, hd]
  readonly kNorm: Weight; // [1, hd]
}

export interface GdnWeights {
  readonly kind: 'linear';
  readonly inProjQkv: Weight; // [2·HK·dk + HV·dv, H] channel order: q all | k all | v all
  readonly inProjZ: Weight; // [HV·dv, H]
  readonly inProjB: Weight; // [HV, H]
  readonly inProjA: Weight; // [HV, H]
  readonly conv: Weight; // [convDim, K]
  readonly aLog: Weight; // [1, HV] f32
  readonly dtBias: Weight; // [1, HV] f32
  readonly norm: Weight; // [1, dv] (plain w)
  readonly outProj: Weight; // [H, HV·dv]
  /** Set when outProj's input columns are stored in another head order (quantized GGUF
   * ssm_out, whose columns cannot be regrouped): its column block j (dv columns) takes the
   * output of value head outProjHeadOrder[j], so the activation is permuted to match. */
  readonly outProjHeadOrder?: Int32Array;
}

export interface DenseMlpWeights {
  readonly kind: 'dense';
  readonly gate: Weight; // [I, H]
  readonly up: Weight; // [I, H]
  readonly down: Weight; // [H, I]
}

export interface ExpertWeights {
  readonly gate: Weight; // [Ie, H]
  readonly up: Weight; // [Ie, H]
  readonly down: Weight; // [H, Ie]
}

export interface MoeWeights {
  readonly kind: 'moe';
  readonly topK: number;
  readonly normTopkProb: boolean;
  readonly router: Weight; // [E, H]
  readonly experts: readonly ExpertWeights[];
  readonly shared: ExpertWeights | null;
  readonly sharedGate: Weight | null; // [1, H]
}

export type MlpWeights = DenseMlpWeights | MoeWeights;

export interface LayerWeights {
  readonly inputNorm: Weight; // [1, H]
  readonly postNorm: Weight; // [1, H]
  readonly mixer: AttnWeights | GdnWeights;
  readonly mlp: MlpWeights;
}

export interface MtpWeights {
  readonly fc: Weight; // [H, 2H]
  readonly normEmbedding: Weight; // [1, H]
  readonly normHidden: Weight; // [1, H]
  readonly norm: Weight; // [1, H]
  readonly layer: LayerWeights; // a full-attention decoder layer
}

export interface ModelWeights {
  readonly embed: Weight; // [V, H]
  readonly lmHead: Weight; // [V, H] (the embedding when tied)
  readonly finalNorm: Weight; // [1, H]
  readonly layers: readonly LayerWeights[];
  readonly mtp: readonly MtpWeights[];
}

/** Loads tensors by name with expected shapes; counts bytes for progress. */
export class WeightReader {
  constructor(
    readonly ckpt: Checkpoint,
    readonly kernels: AnyKernels,
    private readonly onBytes: (n: number) => void = () => {},
    /** `--quantize`: matmul weights become GGML blocks as they load (checkpoint/quantize-load.ts). */
    readonly quantize?: QuantizeMode,
    /** The block quantizer of --quantize (all give GGML's bytes; the wasm one is fastest). */
    private readonly quantizer: RowQuantizer = refQuantizer,
  ) {}

  /** The type tensor `name` is quantized to, or null (no --quantize, or a kept tensor). */
  private quantType(name: string, cols: number): ReturnType<typeof quantTypeFor> {
    // tensors a GGUF already stores quantized stay as they are
    if (!this.quantize || (this.ckpt.has(name) && isQuantType(this.ckpt.info(name).dtype))) return null;
    return quantTypeFor(this.quantize, name, cols);
  }

  has(name: string): boolean {
    return this.ckpt.has(name);
  }
  /** A tensor as stored (row-major), for weights that are not matmul operands (F16 widened
   * to f32: the vector kernels read bf16 / f32). */
  get(name: string, shape: readonly number[]): Weight {
    return loadWeight(this.ckpt, this.kernels, name, shape, this.onBytes);
  }
  /** A matmul / embedding operand as stored (row-major; F16 stays f16). */
  private matrix(name: string, shape: readonly number[]): Weight {
    return loadWeight(this.ckpt, this.kernels, name, shape, this.onBytes, true);
  }
  /** A linear layer's weight [out, in], packed for the backend's matmul. */
  linear(name: string, shape: readonly number[]): Weight {
    const type = shape.length === 2 ? this.quantType(name, shape[1]!) : null;
    if (type) {
      this.infoWithShape(name, shape);
      return this.kernels.packWeight(loadQuantized(this.ckpt, this.kernels, name, type, 0, shape[0]!, shape[1]!, this.onBytes, this.quantizer));
    }
    return this.kernels.packWeight(this.matrix(name, shape));
  }

  /** The embedding table [V, H]: as stored, or quantized under --quantize (embed reads
   * every type). Packed for matmul when it also serves as the (tied) LM head. */
  table(name: string, shape: readonly [number, number], packed: boolean): Weight {
    if (this.quantType(name, shape[1])) return this.linear(name, shape);
    const w = this.matrix(name, shape);
    return packed ? this.kernels.packWeight(w) : w;
  }
  getF32(name: string, shape: readonly number[]): Weight {
    return loadWeightF32(this.ckpt, this.kernels, name, shape);
  }

  /** The tensor's info, after checking it has exactly the shape `stored`. */
  private infoWithShape(name: string, stored: readonly number[]): ReturnType<Checkpoint['info']> {
    const info = this.ckpt.info(name);
    if (info.dtype === 'F8_E4M3') throw new DeltaserveError('bad_checkpoint', `tensor ${name} in ${info.file} is F8_E4M3 without block scales or quantization_config`);
    if (info.shape.length !== stored.length || info.shape.some((d, i) => d !== stored[i])) {
      throw new DeltaserveError('bad_checkpoint',
        `tensor ${name} in ${info.file} has shape [${info.shape.join(',')}], expected [${stored.join(',')}]`);
    }
    return info;
  }

  /** Read a 2-D tensor and return its rows as raw bytes in a backend dtype
   * (F16 is widened to f32), for checkpoints whose rows must be regrouped. */
  rows(name: string, shape: readonly [number, number], stored: readonly number[] = shape): { dtype: WeightDType; bytes: Uint8Array; rowBytes: number } {
    const info = this.infoWithShape(name, stored);
    const raw = this.ckpt.read(name);
    this.onBytes(raw.byteLength);
    if (info.dtype !== 'F16') return { dtype: weightDTypeOf(info), bytes: raw, rowBytes: storedRowBytes(info.dtype, shape[1]) };
    const src = new Uint16Array(raw.buffer, raw.byteOffset, raw.byteLength / 2);
    const dst = new Float32Array(src.length);
    for (let i = 0; i < src.length; i++) dst[i] = f16ToF32(src[i]!);
    return { dtype: 'f32', bytes: new Uint8Array(dst.buffer), rowBytes: shape[1] * 4 };
  }

  /** Rows [r0, r0 + n) of a stored tensor (shape `stored`, rows of `cols` elements) as a
   * packed linear weight, read straight from the file into backend memory (BF16/F16/F32). */
  rowSlice(name: string, stored: readonly number[], r0: number, n: number, cols: number): Weight {
    const info = this.infoWithShape(name, stored);
    const type = this.quantType(name, cols);
    if (type) return this.kernels.packWeight(loadQuantized(this.ckpt, this.kernels, name, type, r0, n, cols, this.onBytes, this.quantizer));
    const dtype: WeightDType = matrixDTypeOf(info);
    const { weight, bytes } = this.kernels.allocWeight(dtype, n, cols);
    this.ckpt.readRangeInto(name, r0 * storedRowBytes(info.dtype, cols), bytes, this.onBytes);
    if (dtype === 'f16') assertFiniteF16(bytes, name, info.file);
    return this.kernels.packWeight(weight);
  }

  /** A linear weight built from rows picked out of `src` (rowIndex[i] = source row of
   * row i), packed for the backend's matmul; quantized under --quantize when `name` (the
   * source tensor) is given and quantizable. */
  gather(src: { dtype: WeightDType; bytes: Uint8Array; rowBytes: number }, rowIndex: readonly number[], cols: number,
    name?: string): Weight {
    const type = name !== undefined ? this.quantType(name, cols) : null;
    if (type) {
      const { weight, bytes } = this.kernels.allocWeight(type, rowIndex.length, cols);
      this.quantizeGathered(src, rowIndex, cols, type, bytes);
      return this.kernels.packWeight(weight);
    }
    const { weight, bytes } = this.kernels.allocWeight(src.dtype, rowIndex.length, cols);
    rowIndex.forEach((r, i) => bytes.set(src.bytes.subarray(r * src.rowBytes, (r + 1) * src.rowBytes), i * src.rowBytes));
    return this.kernels.packWeight(weight);
  }

  /** Quantize rows rowIndex of src (f32 or bf16 rows) into dst, gathered band by band
   * into the quantizer's buffers. */
  private quantizeGathered(src: { dtype: WeightDType; bytes: Uint8Array; rowBytes: number }, rowIndex: readonly number[],
    cols: number, type: QuantType, dst: Uint8Array): void {
    const source: RowSource = {
      kind: src.dtype === 'f32' ? 'f32' : 'bf16',
      fill(r0, n, into) {
        const to = new Uint8Array(into.buffer, into.byteOffset, n * src.rowBytes);
        for (let i = 0; i < n; i++) {
          const r = rowIndex[r0 + i]!;
          to.set(src.bytes.subarray(r * src.rowBytes, (r + 1) * src.rowBytes), i * src.rowBytes);
        }
      },
    };
    this.quantizer.quantizeFrom(type, source, rowIndex.length, cols, dst);
  }
}

export function loadAttention(r: WeightReader, cfg: ModelConfig, p: string): AttnWeights {
  const { hiddenSize: h, numHeads, numKvHeads, headDim: hd } = cfg;
  return {
    kind: 'full',
    qProj: r.linear(`${p}q_proj.weight`, [numHeads * hd * (cfg.attnOutputGate !== false ? 2 : 1), h]),
    kProj: r.linear(`${p}k_proj.weight`, [numKvHeads * hd, h]),
    vProj: r.linear(`${p}v_proj.weight`, [numKvHeads * hd, h]),
    oProj: r.linear(`${p}o_proj.weight`, [h, numHeads * hd]),
    qNorm: r.getF32(`${p}q_norm.weight`, [hd]),
    kNorm: r.getF32(`${p}k_norm.weight`, [hd]),
  };
}

/** The Gated DeltaNet tensors both architectures share (conv, gates, norm, out_proj). */
export function loadGdnCommon(r: WeightReader, cfg: ModelConfig, p: string): Pick<GdnWeights, 'conv' | 'aLog' | 'dtBias' | 'norm' | 'outProj' | 'outProjHeadOrder'> {
  const hv = cfg.linNumValueHeads;
  const order = outProjHeadOrder(r, cfg, `${p}out_proj.weight`);
  const conv = r.get(`${p}conv1d.weight`, [convDim(cfg), 1, cfg.convKernel]);
  return {
    conv: { ...conv, rows: convDim(cfg), cols: cfg.convKernel },
    aLog: r.getF32(`${p}A_log`, [hv]),
    dtBias: r.getF32(`${p}dt_bias`, [hv]),
    norm: r.getF32(`${p}norm.weight`, [cfg.linValueDim]),
    outProj: r.linear(`${p}out_proj.weight`, [cfg.hiddenSize, hv * cfg.linValueDim]),
    ...(order ? { outProjHeadOrder: order } : {}),
  };
}

/** The head order of out_proj's stored input columns, when the checkpoint reports one. */
function outProjHeadOrder(r: WeightReader, cfg: ModelConfig, name: string): Int32Array | undefined {
  const blocks = r.has(name) ? r.ckpt.info(name).columnBlocks : undefined;
  if (!blocks) return undefined;
  const hv = cfg.linNumValueHeads;
  if (blocks.size !== cfg.linValueDim || blocks.order.length !== hv || [...blocks.order].sort((a, b) => a - b).some((h, i) => h !== i)) {
    throw new DeltaserveError('bad_checkpoint', `tensor ${name}: column order is not a permutation of ${hv} heads of ${cfg.linValueDim}`);
  }
  return Int32Array.from(blocks.order);
}

export function loadExpert(r: WeightReader, h: number, inter: number, p: string): ExpertWeights {
  return {
    gate: r.linear(`${p}gate_proj.weight`, [inter, h]),
    up: r.linear(`${p}up_proj.weight`, [inter, h]),
    down: r.linear(`${p}down_proj.weight`, [h, inter]),
  };
}

/** Dense MLP or MoE with per-expert tensors (Qwen3-Next layout); `fusedExperts` loads
 * Qwen3.5-MoE's fused `experts.gate_up_proj [E, 2I, H]` / `experts.down_proj [E, H, I]`. */
export function loadMlp(r: WeightReader, cfg: ModelConfig, mlp: MlpConfig, p: string): MlpWeights {
  const h = cfg.hiddenSize;
  if (mlp.kind === 'dense') return { kind: 'dense', ...loadExpert(r, h, mlp.intermediateSize, p) };
  const ie = mlp.expertIntermediateSize;
  const fused = r.has(`${p}experts.gate_up_proj`);
  const experts = fused ? loadFusedExperts(r, h, mlp.numExperts, ie, p)
    : Array.from({ length: mlp.numExperts }, (_, e) => loadExpert(r, h, ie, `${p}experts.${e}.`));
  const hasShared = mlp.sharedIntermediateSize > 0;
  return {
    kind: 'moe',
    topK: mlp.topK,
    normTopkProb: mlp.normTopkProb,
    router: r.linear(`${p}gate.weight`, [mlp.numExperts, h]),
    experts,
    shared: hasShared ? loadExpert(r, h, mlp.sharedIntermediateSize, `${p}shared_expert.`) : null,
    sharedGate: hasShared ? r.linear(`${p}shared_expert_gate.weight`, [1, h]) : null,
  };
}

function loadFusedExperts(r: WeightReader, h: number, e: number, ie: number, p: string): ExpertWeights[] {
  // gate_up_proj [E, 2·Ie, H]: per expert the first Ie rows are gate, the next Ie up.
  // Each expert's matrices become weights of their own (packed separately), read slice by
  // slice from the file: the fused tensors never sit whole in the JS heap.
  const gu = `${p}experts.gate_up_proj`;
  const dn = `${p}experts.down_proj`;
  return Array.from({ length: e }, (_, x) => ({
    gate: r.rowSlice(gu, [e, 2 * ie, h], x * 2 * ie, ie, h),
    up: r.rowSlice(gu, [e, 2 * ie, h], x * 2 * ie + ie, ie, h),
    down: r.rowSlice(dn, [e, h, ie], x * h, h, ie),
  }));
}
