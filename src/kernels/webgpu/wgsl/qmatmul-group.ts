// Quantized matmuls of one input and one quant type in one dispatch (Kernels.matmulGroup:
// q/k/v, in_proj_qkv/z/b/a, gate/up): up to GROUP_SEGMENTS segments, each one weight part
// with its own output tensor, over the group's one activation quantization (QX, DX, SX).
// Workgroup `col` belongs to the segment whose column range holds it (wgsl/matmul-group.ts
// segmentOf); the body is quantTiledBody (wgsl/matmul.ts), written once, its weight reads
// (throughSegments) and store (put_out) going to the segment's own binding, its column and
// output fields the segment's — the loads, integer sums and f32 chain of the single-weight
// qmatmul, so every output element has the bits of its own matmul.
// params: PARAMS.qmatmul_group (params.ts). Bindings: 1 + s: OUT_s, 1 + S: QX, 2 + S: DX,
// 3 + S: SX, 4 + S + s: W_s (S = segments of the variant).
import type { QuantType } from '../../quant/formats.js';
import { paramConsts } from '../params.js';
import { BYTES, HEADER } from './common.js';
import { MATMUL_TILES, TM, quantSumsDecl, quantTiledBody, type QuantLayout } from './matmul.js';
import { GROUP_SEGMENTS, segmentOf, segmentPut, segmentReader } from './matmul-group.js';
import { PACKED_BLOCK_STATE, dot4Source, hasOffsetType, packedBlockFns } from './quant.js';

/** The weight readers' functions, renamed per segment (each reads its own binding). */
const WEIGHT_FNS = ['b8', 's8', 'f16at', 'u32at', 'word_at', 'spread4', 'scale_min_k4', 'packed_head', 'packed_word', 'packed_block', 'packed_q6'];

/** `text` reading segment s's weight binding W<s> through its own readers. */
export function forSegment(s: number, text: string): string {
  return text.replace(/\bW\b/g, `W${s}`).replace(new RegExp(`\\b(${WEIGHT_FNS.join('|')})\\(`, 'g'), `$1_${s}(`);
}

/** The readers a group's one body calls through its segment (seg_<name>(sg, …)). */
const SEGMENT_READERS: Record<string, { params: string; args: string; ret: string }> = {
  packed_word: { params: 'row: u32, j: u32, w: u32', args: 'row, j, w', ret: 'u32' },
  packed_head: { params: 'row: u32, j: u32', args: 'row, j', ret: 'PB' },
  packed_block: { params: 'row: u32, j: u32', args: 'row, j', ret: 'PB' },
  packed_q6: { params: 'row: u32, j: u32', args: 'row, j', ret: 'vec2<i32>' },
};

/** seg_<name>(sg, …) for each reader `text` calls (packed_word, packed_head, packed_block,
 * packed_q6): segment sg's own reader (forSegment's <name>_<s>, over its binding W<s>); and
 * `text` calling them. A group's body is then written once — only the weight reads (and the
 * store) branch on the workgroup's uniform segment; a body per segment multiplied the shader
 * and a driver's compile time by the segments. */
export function throughSegments(text: string, segments: number): { text: string; readers: string } {
  const names = Object.keys(SEGMENT_READERS).filter((n) => new RegExp(`\\b${n}\\(`).test(text));
  const readers = names.map((n) => {
    const r = SEGMENT_READERS[n]!;
    return segmentReader(n, r.params, r.args, r.ret, segments, (s) => `${n}_${s}`);
  }).join('\n');
  if (names.length === 0) return { text, readers: '' };
  return { text: text.replace(new RegExp(`\\b(${names.join('|')})\\(`, 'g'), 'seg_$1(sg, '), readers };
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
  // one body: the segment's column and output fields hoisted, its weight reads and store
  // through the segment (the segment is uniform: from workgroup_id)
  const store = /OUT\[o\] = (?:OUT\[o\] \+ )?acc;/;
  const tiled = quantTiledBody(type, accumulate, null, layout);
  if (!store.test(tiled)) throw new Error('quant matmul group: the tiled body\'s store is not where the group expects it');
  const { text: body, readers } = throughSegments(tiled.replace(store, 'put_out(sg, o, acc);')
    .replace(/pu\(P_(outOff|outStride|col0)\)/g, (_, f: string) => `o${f[0]!.toUpperCase()}${f.slice(1)}`), segments);
  const fields = Array.from({ length: segments }, (_, s) => `${s === 0 ? '' : 'else '}if (sg == ${s}u) {
    col = gcol - pu(P_seg${s}Start); oOutOff = pu(P_seg${s}OutOff); oOutStride = pu(P_seg${s}OutStride); oCol0 = pu(P_seg${s}Col0);
  }`).join(' ');
  const bodies = `var col = 0u;
  var oOutOff = 0u;
  var oOutStride = 0u;
  var oCol0 = 0u;
  ${fields}
${body}`;
  return `${HEADER}
${paramConsts('qmatmul_group')}
${quantGroupBindings(type, segments)}
${readers}
${segmentPut(segments, accumulate)}
${dot4Source(packedBuiltin)}
const TM = ${tm}u;
${quantSumsDecl(tm, layout)}
${offs ? `var<workgroup> offt: array<f32, ${tm * 64}>;` : ''}
${quantGroupEntry(segments, segmentOf(segments))}
  ${bodies}
}`;
}
