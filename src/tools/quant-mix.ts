// Which storage type each tensor gets for a `deltaserve quantize --type` (llama.cpp's file
// types and its per-tensor rules, as its llama-quantize applies them to qwen35 models — the
// fixtures in ../shared/models/gguf are the check):
//  - vectors, the conv kernel and the MoE router stay F32;
//  - f32 / f16 / bf16 / q8_0 / q6_k: every other matrix gets the type;
//  - q4_0: the head (output.weight, or token_embd when the embeddings are tied) Q6_K;
//  - q4_k_m: the head Q6_K; attn_v and attn_qkv share a counter i over their n tensors, and
//    ffn_down* use the layer index i over n = block_count: Q6_K when i < n/8, i ≥ 7n/8 or
//    (i − n/8) mod 3 = 2 (integer division), else Q4_K; everything else Q4_K;
//  - a k-quant whose rows are not whole 256-element blocks falls back: Q4_K → Q5_0,
//    Q6_K → Q8_0.
import type { GgufTensorType } from '../checkpoint/gguf-file.js';
import { DeltaserveError } from '../util/errors.js';

export const FILE_TYPES = ['f32', 'f16', 'bf16', 'q8_0', 'q6_k', 'q4_k_m', 'q4_0'] as const;
export type FileType = (typeof FILE_TYPES)[number];

/** general.file_type (llama_ftype) of each file type. */
export const FTYPE_ID: Readonly<Record<FileType, number>> = { f32: 0, f16: 1, q4_0: 2, q8_0: 7, q4_k_m: 15, q6_k: 18, bf16: 32 };

export function parseFileType(s: string): FileType {
  if ((FILE_TYPES as readonly string[]).includes(s)) return s as FileType;
  throw new DeltaserveError('bad_request', `--type must be one of ${FILE_TYPES.join(', ')} (got "${s}")`);
}

export interface MixTensor {
  readonly name: string;
  readonly cols: number;
  readonly keepF32: boolean;
}

const FALLBACK: Partial<Record<GgufTensorType, GgufTensorType>> = { q4_k: 'q5_0', q6_k: 'q8_0' };
const BLOCK: Partial<Record<GgufTensorType, number>> = { q4_0: 32, q5_0: 32, q8_0: 32, q4_k: 256, q6_k: 256 };

function moreBits(i: number, n: number): boolean {
  const eighth = Math.floor(n / 8);
  return i < eighth || i >= Math.floor((7 * n) / 8) || (i - eighth) % 3 === 2;
}

/** The storage type of every tensor (same order), for file type `ft`. */
export function tensorTypes(ft: FileType, tensors: readonly MixTensor[], blockCount: number): GgufTensorType[] {
  const hasOutput = tensors.some((t) => t.name === 'output.weight');
  const head = hasOutput ? 'output.weight' : 'token_embd.weight';
  const nV = tensors.filter((t) => isAttnV(t.name)).length;
  let iV = 0;
  return tensors.map((t) => {
    if (t.keepF32) return 'F32';
    const want = wanted(ft, t.name, head, () => moreBits(iV++, nV), blockCount);
    const block = BLOCK[want];
    if (block !== undefined && t.cols % block !== 0) {
      const fb = FALLBACK[want];
      if (fb && t.cols % BLOCK[fb]! === 0) return fb;
      return 'F32';
    }
    return want;
  });
}

function isAttnV(name: string): boolean {
  return name.endsWith('.attn_v.weight') || name.endsWith('.attn_qkv.weight');
}

function wanted(ft: FileType, name: string, head: string, nextVMoreBits: () => boolean, blockCount: number): GgufTensorType {
  switch (ft) {
    case 'f32': return 'F32';
    case 'f16': return 'F16';
    case 'bf16': return 'BF16';
    case 'q8_0': case 'q6_k': return ft;
    case 'q4_0': return name === head ? 'q6_k' : 'q4_0';
    case 'q4_k_m': {
      if (name === head) return 'q6_k';
      if (isAttnV(name)) return nextVMoreBits() ? 'q6_k' : 'q4_k';
      const down = /^blk\.(\d+)\.ffn_down(_exps|_shexp)?\.weight$/.exec(name);
      if (down) return moreBits(Number(down[1]), blockCount) ? 'q6_k' : 'q4_k';
      return 'q4_k';
    }
  }
}
