// `--quantize q8_0|q4_k`: quantize BF16/F16/F32 safetensors matmul weights as they load,
// tensor by tensor and a few MiB of rows at a time (no whole-model or whole-tensor f32
// copy), straight into backend memory as GGML blocks.
// What gets quantized (quantTypeFor):
//  - every linear projection (attention q/k/v/o, Gated DeltaNet in_proj_qkv/z and out_proj,
//    dense MLP and expert gate/up/down, MTP fc): the requested type (q4_k falls back to
//    q8_0 when a row is not a whole number of 256-element blocks);
//  - the embedding table / LM head: q8_0 in both modes (as GGML's Q4_K_M keeps the output
//    tensor at higher precision);
//  - kept as stored: norms, conv kernel, A_log, dt_bias (never matmul operands), the MoE
//    router and shared-expert gate, and the tiny per-head gate projections in_proj_a/b.
import type { Kernels, Weight } from '../kernels/types.js';
import type { QuantType } from '../kernels/quant/formats.js';
import { isQuantType } from '../kernels/quant/formats.js';
import { type RowQuantizer, type RowSource, refQuantizer } from '../kernels/quant/row-quantizer.js';
import type { Checkpoint } from './safetensors.js';
import { f16ToF32 } from './safetensors.js';
import { DeltaserveError } from '../util/errors.js';

export const QUANTIZE_MODES = ['q8_0', 'q4_k'] as const;
export type QuantizeMode = (typeof QUANTIZE_MODES)[number];

export function parseQuantizeMode(s: string): QuantizeMode {
  if ((QUANTIZE_MODES as readonly string[]).includes(s)) return s as QuantizeMode;
  throw new DeltaserveError('bad_request', `--quantize must be one of ${QUANTIZE_MODES.join(', ')} (got "${s}")`);
}

const KEEP = [/(^|\.)mlp\.gate\.weight$/, /shared_expert_gate\.weight$/, /in_proj_[ab]\.weight$/, /in_proj_ba\.weight$/];
const HEAD = [/(^|\.)lm_head\.weight$/, /embed_tokens\.weight$/];

/** The storage type tensor `name` (a matrix with rows of `cols`) gets under `mode`, or null
 * to keep it as stored. */
export function quantTypeFor(mode: QuantizeMode, name: string, cols: number): QuantType | null {
  if (KEEP.some((re) => re.test(name)) || cols % 32 !== 0) return null;
  if (HEAD.some((re) => re.test(name))) return 'q8_0';
  if (mode === 'q4_k' && cols % 256 === 0) return 'q4_k';
  return 'q8_0';
}

/** Rows [r0, r0 + rows) of tensor `name` (rows of `cols` elements, stored BF16/F16/F32)
 * quantized to `type` by `quantizer` (GGML's algorithms; BF16 is handed over as stored) in
 * a fresh backend weight (not packed: the caller packs). */
export function loadQuantized(ckpt: Checkpoint, kernels: Pick<Kernels, 'allocWeight'>, name: string, type: QuantType,
  r0: number, rows: number, cols: number, onBytes?: (n: number) => void, quantizer: RowQuantizer = refQuantizer): Weight {
  const info = ckpt.info(name);
  const dtype = info.dtype;
  if (isQuantType(dtype)) throw new DeltaserveError('internal', `${name} in ${info.file} is already ${dtype}; it is loaded as stored`);
  if (dtype === 'F8_E4M3') throw new DeltaserveError('internal', `${name} in ${info.file} is FP8: it is read through the BF16 view of checkpoint/fp8.ts`);
  const item = dtype === 'F32' ? 4 : 2;
  const { weight, bytes } = kernels.allocWeight(type, rows, cols);
  // F16 is widened to f32 on the way (through a band of raw bytes); BF16 and F32 are read
  // straight into the quantizer's buffer
  let raw = new Uint8Array(0);
  const source: RowSource = {
    kind: dtype === 'BF16' ? 'bf16' : 'f32',
    fill(r, n, into) {
      const at = (r0 + r) * cols * item;
      if (dtype !== 'F16') {
        ckpt.readRangeInto(name, at, new Uint8Array(into.buffer, into.byteOffset, n * cols * item), onBytes);
        return;
      }
      if (raw.length < n * cols * 2) raw = new Uint8Array(n * cols * 2);
      const src = raw.subarray(0, n * cols * 2);
      ckpt.readRangeInto(name, at, src, onBytes);
      const h = new Uint16Array(src.buffer, src.byteOffset, n * cols);
      for (let i = 0; i < h.length; i++) into[i] = f16ToF32(h[i]!);
    },
  };
  quantizer.quantizeFrom(type, source, rows, cols, bytes);
  return weight;
}

/** Run `load` with the backend's block quantizer (Kernels.startQuantizer) when `quantize`
 * is set (stopped afterwards), else with none. */
export async function withLoadQuantizer<R>(quantize: QuantizeMode | undefined, kernels: Pick<Kernels, 'startQuantizer'>,
  load: (quantizer?: RowQuantizer) => R): Promise<R> {
  if (!quantize) return load();
  const quantizer = await kernels.startQuantizer();
  try {
    return load(quantizer);
  } finally {
    quantizer.dispose();
  }
}
