// Quantized matmuls of one input and one quant type in one dispatch (Kernels.matmulGroup:
// q/k/v, in_proj_qkv/z/b/a, gate/up): up to GROUP_SEGMENTS segments, each one weight part
// with its own output tensor, over the group's one activation quantization (QX, DX, SX).
// Workgroup `col` belongs to the segment whose column range holds it (wgsl/matmul-group.ts
// segmentOf); the segment's body is quantTiledBody (wgsl/matmul.ts) with its own weight
// binding, output and column parameters — the loads, integer sums and f32 chain of the
// single-weight qmatmul, so every output element has the bits of its own matmul.
// params: PARAMS.qmatmul_group (params.ts). Bindings: 1 + s: OUT_s, 1 + S: QX, 2 + S: DX,
// 3 + S: SX, 4 + S + s: W_s (S = segments of the variant).
import type { QuantType } from '../../quant/formats.js';
import { paramConsts } from '../params.js';
import { BYTES, HEADER } from './common.js';
import { MATMUL_TILES, TM, quantSumsDecl, quantTiledBody, type QuantLayout } from './matmul.js';
import { GROUP_SEGMENTS, segmentOf } from './matmul-group.js';
import { PACKED_BLOCK_STATE, dot4Source, hasOffsetType, packedBlockFns } from './quant.js';

/** The weight readers' functions, renamed per segment (each reads its own binding). */
const WEIGHT_FNS = ['b8', 's8', 'f16at', 'u32at', 'word_at', 'spread4', 'scale_min_k4', 'packed_head', 'packed_word', 'packed_block', 'packed_q6'];

/** `text` reading segment s's weight binding W<s> through its own readers. */
export function forSegment(s: number, text: string): string {
  return text.replace(/\bW\b/g, `W${s}`).replace(new RegExp(`\\b(${WEIGHT_FNS.join('|')})\\(`, 'g'), `$1_${s}(`);
}

/** The group's bindings over quantized activations (wgsl/qmatmul-columns.ts's too): 1 + s
 * OUT_s, 1 + S QX, 2 + S DX, 3 + S SX, 4 + S + s W_s with its own readers (S = `segments`). */
export function quantGroupBindings(type: QuantType, segments: number): string {
  const ss = Array.from({ length: segments }, (_, s) => s);
  const outs = ss.map((s) => `@group(0) @binding(${1 + s}) var<storage, read_write> OUT${s}: array<f32>;`).join('\n');
  const weights = ss.map((s) => `@group(0) @binding(${4 + segments + s}) var<storage, read_write> W${s}: array<u32>;
${forSegment(s, `${BYTES}\n${packedBlockFns(type)}`)}`).join('\n');
  return `${outs}
@group(0) @binding(${1 + segments}) var<storage, read_write> QX: array<u32>;
@group(0) @binding(${2 + segments}) var<storage, read_write> DX: array<f32>;
@group(0) @binding(${3 + segments}) var<storage, read_write> SX: array<i32>;
${PACKED_BLOCK_STATE}
${weights}`;
}

/** The group's entry point (wgsl/qmatmul-columns.ts's too): gcol, K, nb, and sg the segment
 * `segmentOfText` picks for the workgroup (uniform), returning past the last segment. */
export function quantGroupEntry(segments: number, segmentOfText: string): string {
  return `@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let gcol = group_id(wid, nwg);
  let K = pu(P_k);
  let nb = K / 32u;
  var sg = ${segments}u;
  ${segmentOfText}
  if (sg == ${segments}u) { return; }`;
}

/** `accumulate`: out += the sum. `tm`: rows per tile. `layout`: quantTiledBody's. */
export function quantMatmulGroupShader(type: QuantType, segments: number, packedBuiltin: boolean, accumulate = false, tm = TM,
  layout: QuantLayout = 'lanes'): string {
  if (!(MATMUL_TILES as readonly number[]).includes(tm)) throw new RangeError(`quant matmul group: a tile of ${tm} rows`);
  if (!Number.isInteger(segments) || segments < 1 || segments > GROUP_SEGMENTS) throw new RangeError(`quant matmul group: ${segments} segments`);
  const offs = hasOffsetType(type);
  const body = quantTiledBody(type, accumulate, null, layout);
  const seg = (s: number, text: string): string => forSegment(s, text).replace(/\bOUT\b/g, `OUT${s}`)
    .replace(/\bP_(outOff|outStride|col0)\b/g, (_, f: string) => `P_seg${s}${f[0]!.toUpperCase()}${f.slice(1)}`);
  // the segment is uniform (from workgroup_id), so the body's barriers stay in uniform control flow
  const bodies = Array.from({ length: segments }, (_, s) => `${s === 0 ? '' : 'else '}if (sg == ${s}u) {
  let col = gcol - pu(P_seg${s}Start);
${seg(s, body)}  }`).join(' ');
  return `${HEADER}
${paramConsts('qmatmul_group')}
${quantGroupBindings(type, segments)}
${dot4Source(packedBuiltin)}
const TM = ${tm}u;
${quantSumsDecl(tm, layout)}
${offs ? `var<workgroup> offt: array<f32, ${tm * 64}>;` : ''}
${quantGroupEntry(segments, segmentOf(segments))}
  ${bodies}
}`;
}
