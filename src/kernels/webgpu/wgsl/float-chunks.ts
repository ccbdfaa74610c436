// The 4-element-unit loads of the float matmuls (wgsl/matmul-group.ts, FloatLoads): a weight
// row read as units of 4 elements — a vec2<u32> of bf16 / f16 (2 per u32, low half first) or
// a vec4<u32> of f32 — lane t of a warp reading unit t, so a warp-load is 32 consecutive
// units (256 bytes bf16 / f16, 512 f32), and the f32 inputs (x, the gate, the norm weight)
// read as the unit's vec4<f32>, 32 consecutive 16-byte pieces (512 bytes) a warp-load. A
// thread takes two units an iteration (both loads in flight). Every reader returns the
// element values `wf` and the scalar reads give (the same bits); only the width of the load
// instructions differs.

import { headInvDecls, rowHeadInvs } from './common.js';

export type FloatDType = 'f32' | 'bf16' | 'f16';

/** How a float matmul dispatch loads (chosen from K and the offsets, never from M):
 * 'vec4': weight units and x / gate as vec4<f32>; 'vec4w': weight units, x / gate as
 * scalars (an offset not a multiple of 4); 'element': one element a load (K not a multiple
 * of 4). */
export type FloatLoads = 'element' | 'vec4w' | 'vec4';

/** Elements of a weight unit: 4 (a vec2<u32> of bf16 / f16, a vec4<u32> of f32). */
export function floatChunkElems(_dtype: FloatDType): 4 {
  return 4;
}

/** The loads a dispatch of a weight of K columns over x at element offset `xOff` (and a gate
 * at `gateOff`, if any) uses: units need K ≡ 0 (mod 4) (each row starts a unit: parts
 * start on whole rows of their own buffers); vec4<f32> inputs need 4-aligned offsets and
 * no output in x's or the gate's buffer (`outAliasesInput`: pipelines.ts would fold the f32
 * output's name into the vec4 input's). */
export function floatLoadsFor(dtype: FloatDType, k: number, xOff: number, gateOff: number | null, outAliasesInput = false): FloatLoads {
  if (k % floatChunkElems(dtype) !== 0) return 'element';
  return xOff % 4 === 0 && (gateOff === null || gateOff % 4 === 0) && !outAliasesInput ? 'vec4' : 'vec4w';
}

/** `W` (binding given) as 4-element units and `wu(u)`: unit u's elements in order. */
export function floatChunkReader(dtype: FloatDType, binding: number): string {
  const value = dtype === 'f32' ? 'bitcast<vec4<f32>>(W[u])'
    : dtype === 'bf16' ? 'vec4<f32>(bitcast<f32>(q.x << 16u), bitcast<f32>(q.x & 0xffff0000u), bitcast<f32>(q.y << 16u), bitcast<f32>(q.y & 0xffff0000u))'
    : 'vec4<f32>(unpack2x16float(q.x), unpack2x16float(q.y))';
  return `@group(0) @binding(${binding}) var<storage, read_write> W: array<${dtype === 'f32' ? 'vec4<u32>' : 'vec2<u32>'}>;
fn wu(u: u32) -> vec4<f32> { ${dtype === 'f32' ? '' : 'let q = W[u]; '}return ${value}; }
`;
}

/** An f32 input array `name` (binding given) and its readers: `<fn>s(i)` one element,
 * `<fn>q(i)` elements i..i+3 (i ≡ 0 mod 4 where `vec`: the array is then of vec4<f32>). */
export function f32Input(name: string, fn: string, binding: number, vec: boolean): string {
  return vec ? `@group(0) @binding(${binding}) var<storage, read_write> ${name}: array<vec4<f32>>;
fn ${fn}s(i: u32) -> f32 { return ${name}[i >> 2u][i & 3u]; }
fn ${fn}q(i: u32) -> vec4<f32> { return ${name}[i >> 2u]; }`
    : `@group(0) @binding(${binding}) var<storage, read_write> ${name}: array<f32>;
fn ${fn}s(i: u32) -> f32 { return ${name}[i]; }
fn ${fn}q(i: u32) -> vec4<f32> { return vec4<f32>(${name}[i], ${name}[i + 1u], ${name}[i + 2u], ${name}[i + 3u]); }`;
}

/** The unit loop of one segment (`wu`, `K`, `xb`, `rows`, `acc` in scope; `row`: the
 * weight row (the column, or a stacked MoE expert's row); `whole`:
 * the units from `wreg`): thread t takes units u ≡ t (mod 64) in order, two an iteration
 * (u0 and u0 + 64: both weight loads in flight together), each unit's 4 products added to
 * each row's sum in element order. `norm` / `gate`: the input element as the element path
 * forms it ((x·inv)·w', x·act(g)), component by component. */
export function chunkSumLoop(_dtype: FloatDType, norm: boolean, gate: 'silu' | 'sigmoid' | null, whole: boolean, row = 'col'): string {
  const comps = ['x', 'y', 'z', 'w'];
  const xAt = (h: number, c: string): string =>
    norm ? `((x${h}.${c} * inv[r]) * nw${h}.${c})` : gate ? `(x${h}.${c} * ${gate}(g${h}.${c}))` : `x${h}.${c}`;
  const adds = (h: number): string => comps.map((c) => `a = a + w${h}.${c} * ${xAt(h, c)};`).join(' ');
  const load = (h: number): string => whole
    ? `vec4<f32>(wreg[(u${h} / 64u) * 4u], wreg[(u${h} / 64u) * 4u + 1u], wreg[(u${h} / 64u) * 4u + 2u], wreg[(u${h} / 64u) * 4u + 3u])`
    : `wu(${row} * ku + u${h})`;
  const nw = (h: number): string => norm ? `let nw${h} = select(NW[u${h}], 1.0 + NW[u${h}], pu(P_zeroCentered) == 1u);` : '';
  // the gate element of x element i: GB[gateOff + i - xOff] (the element path's index)
  const inputs = (h: number): string => `let x${h} = xq(xo + 4u * u${h});${gate ? ` let g${h} = gq(go + 4u * u${h});` : ''}`;
  return `let ku = K / 4u;
    for (var u0 = t; u0 < ku; u0 += 128u) {
      let u1 = u0 + 64u;
      let has1 = u1 < ku;
      let w0 = ${load(0)};
      var w1 = vec4<f32>(0.0);
      if (has1) { w1 = ${load(1)}; }
      ${norm ? `${nw(0)}
      var nw1 = vec4<f32>(0.0);
      if (has1) { nw1 = select(NW[u1], 1.0 + NW[u1], pu(P_zeroCentered) == 1u); }` : ''}
      ${rowSums(gate ? 'let go = pu(P_gateOff) + xo - pu(P_xOff);' : '', inputs, adds)}
    }`;
}

/** Per row r of the tile: the row's x offset `xo` (then `opening`), and the iteration's units
 * u0 (and u1 where has1) added to acc[r] — `inputs(h)` forms unit h's input, `adds(h)` its 4
 * products in element order. */
function rowSums(opening: string, inputs: (h: number) => string, adds: (h: number) => string): string {
  return `for (var r = 0u; r < rows; r++) {
        let xo = xb + r * K;
        ${opening}
        var a = acc[r];
        ${inputs(0)}
        ${adds(0)}
        if (has1) {
          ${inputs(1)}
          ${adds(1)}
        }
        acc[r] = a;
      }`;
}

/** The unit loop with the gated-norm input of out_proj (`heads` = HV; K = HV·dv, dv ≡ 0 mod
 * 4): input element k of row r is the gated RMSNorm of head h = ORD[k / dv], column c = k mod
 * dv — ((o·inv)·w_c)·silu(z), the gated norm kernel's expression (wgsl/gdn-gated.ts
 * gatedNormRow) with its inv (ginv[r·HV + h]) — read at h·dv + c of the un-normed rows (a
 * unit stays inside one head). Units, loads and sums otherwise as chunkSumLoop's. */
export function chunkSumLoopHeadNorm(row = 'col'): string {
  const comps = ['x', 'y', 'z', 'w'];
  const xAt = (h: number, c: string): string => `(((x${h}.${c} * gi${h}) * nw${h}.${c}) * silu(z${h}.${c}))`;
  const adds = (h: number): string => comps.map((c) => `a = a + w${h}.${c} * ${xAt(h, c)};`).join(' ');
  const inputs = (h: number): string => `let x${h} = xq(xo + s${h}); let z${h} = zq(zo + s${h}); let gi${h} = ginv[r * GH + s${h} / gdv];`;
  return `let ku = K / 4u;
    for (var u0 = t; u0 < ku; u0 += 128u) {
      let u1 = u0 + 64u;
      let has1 = u1 < ku;
      let w0 = wu(${row} * ku + u0);
      let s0 = head_src(4u * u0, gdv);
      let nw0 = NW[((4u * u0) % gdv) / 4u];
      var w1 = vec4<f32>(0.0);
      var s1 = 0u;
      var nw1 = vec4<f32>(0.0);
      if (has1) { w1 = wu(${row} * ku + u1); s1 = head_src(4u * u1, gdv); nw1 = NW[((4u * u1) % gdv) / 4u]; }
      ${rowSums('let zo = pu(P_gnZOff) + xo - pu(P_xOff);', inputs, adds)}
    }`;
}

/** The gated-norm input's bindings and helpers (`heads` = HV, `tm` rows a tile, bindings
 * from `binding`: NW (f32 [dv] as vec4), Z (the gate, as X), ORD (i32 [HV]: out_proj's head
 * order at gnOrderOff)), and ginv: per tile row r and head h, 1/√(mean(o²) + eps) summed as
 * gatedNormRow sums (common.ts rowHeadInvs: HEAD_TREES heads' trees side by side, the same
 * adds per head). */
export function headNormDecls(heads: number, tm: number, binding: number, vec: boolean): string {
  return `@group(0) @binding(${binding}) var<storage, read_write> NW: array<vec4<f32>>;
${f32Input('Z', 'z', binding + 1, vec)}
@group(0) @binding(${binding + 2}) var<storage, read> ORD: array<i32>;
const GH = ${heads}u;
${headInvDecls(heads, tm)}
fn head_src(k: u32, gdv: u32) -> u32 { return u32(ORD[pu(P_gnOrderOff) + k / gdv]) * gdv + k % gdv; }`;
}

/** WGSL: ginv of the tile's rows (headNormDecls; in scope: t, K, xb, rows, xs). */
export function headNormInvs(heads: number): string {
  return rowHeadInvs(heads, (o) => `xs(xb + r * K + ${o})`);
}

/** `whole`: this thread's units u ≡ t (mod 64) of weight row `row` into wreg (4 values each, at
 * (u / 64)·4). */
export function chunkWholeLoads(_dtype: FloatDType, row = 'col'): string {
  return `let ku = K / 4u;
    for (var u = t; u < ku; u += 64u) {
      let w = wu(${row} * ku + u);
      let wb = (u / 64u) * 4u;
      wreg[wb] = w.x; wreg[wb + 1u] = w.y; wreg[wb + 2u] = w.z; wreg[wb + 3u] = w.w;
    }`;
}

/** The float matmuls' entry point (wgsl/matmul-group.ts and matmul-columns.ts): 64 threads,
 * the subgroup builtins when `subgroups`, gcol (the workgroup's column) and K. */
export function floatMatmulEntry(subgroups: boolean): string {
  return `@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32${subgroups ? ', @builtin(subgroup_invocation_id) sgi: u32, @builtin(subgroup_size) sgs: u32' : ''}) {
  let gcol = group_id(wid, nwg);
  let K = pu(P_k);`;
}
