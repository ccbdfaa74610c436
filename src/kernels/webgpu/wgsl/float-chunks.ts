// The 16-byte-chunk loads of the float matmuls (wgsl/matmul-group.ts, FloatLoads): a weight
// row read as vec4<u32> chunks — E = 8 bf16 / 8 f16 (2 per u32, low half first) or 4 f32
// elements each — and the f32 inputs (x, the gate, the norm weight) read 4 at a time. Every
// reader returns the element values `wf` and the scalar reads give (the same bits); only the
// width of the load instructions differs.

export type FloatDType = 'f32' | 'bf16' | 'f16';

/** How a float matmul dispatch loads (chosen from K and the offsets, never from M):
 * 'vec4': weight chunks and x / gate as vec4<f32>; 'vec4w': weight chunks, x / gate as
 * scalars (an offset not a multiple of 4); 'element': one element a load (K not a multiple
 * of the chunk's E elements). */
export type FloatLoads = 'element' | 'vec4w' | 'vec4';

/** Elements of a 16-byte weight chunk. */
export function floatChunkElems(dtype: FloatDType): 4 | 8 {
  return dtype === 'f32' ? 4 : 8;
}

/** The loads a dispatch of a weight of K columns over x at element offset `xOff` (and a gate
 * at `gateOff`, if any) uses: chunks need K ≡ 0 (mod E) (each row starts a chunk: parts
 * start on whole rows of their own buffers); vec4<f32> inputs need 4-aligned offsets and
 * no output in x's or the gate's buffer (`outAliasesInput`: pipelines.ts would fold the f32
 * output's name into the vec4 input's). */
export function floatLoadsFor(dtype: FloatDType, k: number, xOff: number, gateOff: number | null, outAliasesInput = false): FloatLoads {
  if (k % floatChunkElems(dtype) !== 0) return 'element';
  return xOff % 4 === 0 && (gateOff === null || gateOff % 4 === 0) && !outAliasesInput ? 'vec4' : 'vec4w';
}

/** `W` (binding given) as 16-byte chunks and `wc(c)`: chunk c's E elements in order. */
export function floatChunkReader(dtype: FloatDType, binding: number): string {
  const e = floatChunkElems(dtype);
  const lanes = ['x', 'y', 'z', 'w'];
  const values = dtype === 'f32' ? lanes.map((l) => `bitcast<f32>(q.${l})`)
    : dtype === 'bf16' ? lanes.flatMap((l) => [`bitcast<f32>(q.${l} << 16u)`, `bitcast<f32>(q.${l} & 0xffff0000u)`])
    : lanes.flatMap((l) => [`unpack2x16float(q.${l}).x`, `unpack2x16float(q.${l}).y`]);
  return `@group(0) @binding(${binding}) var<storage, read_write> W: array<vec4<u32>>;
fn wc(c: u32) -> array<f32, ${e}> { let q = W[c]; return array<f32, ${e}>(${values.join(', ')}); }
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

/** The chunk loop of one segment (`wc`, `col`, `K`, `xb`, `rows`, `acc` in scope; `whole`:
 * the chunks from `wreg`): thread t, chunks c ≡ t (mod 64) in order, each chunk's E products
 * added to each row's sum in element order. `norm` / `gate`: the input element as the
 * element path forms it ((x·inv)·w', x·act(g)), component by component. */
export function chunkSumLoop(dtype: FloatDType, norm: boolean, gate: 'silu' | 'sigmoid' | null, whole: boolean): string {
  const e = floatChunkElems(dtype);
  const quads = e / 4;
  const comp = (j: number): string => ['x', 'y', 'z', 'w'][j % 4]!;
  const xAt = (j: number): string => {
    const x = `x${j >> 2}.${comp(j)}`;
    return norm ? `((${x} * inv[r]) * nw${j >> 2}.${comp(j)})` : gate ? `(${x} * ${gate}(g${j >> 2}.${comp(j)}))` : x;
  };
  const loadW = whole
    ? `let wb = (c / 64u) * ${e}u;
      let w = array<f32, ${e}>(${Array.from({ length: e }, (_, j) => `wreg[wb + ${j}u]`).join(', ')});`
    : 'let w = wc(col * kc + c);';
  const nws = norm ? Array.from({ length: quads }, (_, q) => `let nw${q} = select(NW[(k >> 2u) + ${q}u], 1.0 + NW[(k >> 2u) + ${q}u], pu(P_zeroCentered) == 1u);`).join('\n      ') : '';
  // the gate element of x element i: GB[gateOff + i - xOff] (the element path's index)
  const xs = [...(gate ? ['let go = pu(P_gateOff) + xo - pu(P_xOff);'] : []),
    ...Array.from({ length: quads }, (_, q) => `let x${q} = xq(xo + ${4 * q}u);${gate ? ` let g${q} = gq(go + ${4 * q}u);` : ''}`)].join('\n        ');
  const adds = Array.from({ length: e }, (_, j) => `a = a + w[${j}] * ${xAt(j)};`).join('\n        ');
  return `let kc = K / ${e}u;
    for (var c = t; c < kc; c += 64u) {
      ${loadW}
      let k = c * ${e}u;
      ${nws}
      for (var r = 0u; r < rows; r++) {
        let xo = xb + r * K + k;
        ${xs}
        var a = acc[r];
        ${adds}
        acc[r] = a;
      }
    }`;
}

/** `whole`: this thread's chunks c ≡ t (mod 64) of the column into wreg (E values each, at
 * (c / 64)·E). */
export function chunkWholeLoads(dtype: FloatDType): string {
  const e = floatChunkElems(dtype);
  return `let kc = K / ${e}u;
    for (var c = t; c < kc; c += 64u) {
      let w = wc(col * kc + c);
      let wb = (c / 64u) * ${e}u;
      ${Array.from({ length: e }, (_, j) => `wreg[wb + ${j}u] = w[${j}];`).join(' ')}
    }`;
}
