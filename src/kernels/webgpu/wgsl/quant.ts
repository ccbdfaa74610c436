// WGSL decoding of GGML blocks into the integer sub-block form of kernels/quant/dequant.ts
// (decodeSubBlock): sub-block j (32 elements) of row r is  w_l = scale · q_l + offset.
// `sub_block(rowByte, j)` fills the private array Q and returns {scale, offset, q6a, q6b}
// (Q6_K: Q holds the raw q − 32, and q6a / q6b are the int8 scales of its two 16-groups;
// the matmul folds them into Q, the embedding uses GGML's dequantisation order).
import type { QuantType } from '../../quant/formats.js';

const K4_SCALES = /* wgsl */ `
fn scale_min_k4(p: u32, j: u32) -> vec2<f32> {
  if (j < 4u) { return vec2<f32>(f32(b8(p + j) & 63u), f32(b8(p + j + 4u) & 63u)); }
  let sc = (b8(p + j + 4u) & 0xfu) | ((b8(p + j - 4u) >> 6u) << 4u);
  let m = (b8(p + j + 4u) >> 4u) | ((b8(p + j) >> 6u) << 4u);
  return vec2<f32>(f32(sc), f32(m));
}`;

const BODIES: Record<QuantType, string> = {
  q8_0: `let p = row + j * 34u;
  for (var l = 0u; l < 32u; l++) { Q[l] = s8(p + 2u + l); }
  return SB(f16at(p), 0.0, 0, 0);`,
  q4_0: `let p = row + j * 18u;
  for (var l = 0u; l < 16u; l++) { let b = b8(p + 2u + l); Q[l] = i32(b & 15u) - 8; Q[l + 16u] = i32(b >> 4u) - 8; }
  return SB(f16at(p), 0.0, 0, 0);`,
  q4_1: `let p = row + j * 20u;
  for (var l = 0u; l < 16u; l++) { let b = b8(p + 4u + l); Q[l] = i32(b & 15u); Q[l + 16u] = i32(b >> 4u); }
  return SB(f16at(p), f16at(p + 2u), 0, 0);`,
  q5_0: `let p = row + j * 22u;
  let qh = u32at(p + 2u);
  for (var l = 0u; l < 16u; l++) {
    let b = b8(p + 6u + l);
    Q[l] = i32((b & 15u) | (((qh >> l) & 1u) << 4u)) - 16;
    Q[l + 16u] = i32((b >> 4u) | (((qh >> (l + 16u)) & 1u) << 4u)) - 16;
  }
  return SB(f16at(p), 0.0, 0, 0);`,
  q5_1: `let p = row + j * 24u;
  let qh = u32at(p + 4u);
  for (var l = 0u; l < 16u; l++) {
    let b = b8(p + 8u + l);
    Q[l] = i32((b & 15u) | (((qh >> l) & 1u) << 4u));
    Q[l + 16u] = i32((b >> 4u) | (((qh >> (l + 16u)) & 1u) << 4u));
  }
  return SB(f16at(p), f16at(p + 2u), 0, 0);`,
  q4_k: `let p = row + (j / 8u) * 144u;
  let s = j % 8u;
  let sm = scale_min_k4(p + 4u, s);
  let qs = p + 16u + (s >> 1u) * 32u;
  for (var l = 0u; l < 32u; l++) { let b = b8(qs + l); Q[l] = i32(select(b & 15u, b >> 4u, (s & 1u) == 1u)); }
  return SB(f16at(p) * sm.x, -(f16at(p + 2u) * sm.y), 0, 0);`,
  q5_k: `let p = row + (j / 8u) * 176u;
  let s = j % 8u;
  let sm = scale_min_k4(p + 4u, s);
  let qs = p + 48u + (s >> 1u) * 32u;
  for (var l = 0u; l < 32u; l++) {
    let b = b8(qs + l);
    Q[l] = i32(select(b & 15u, b >> 4u, (s & 1u) == 1u) | (((b8(p + 16u + l) >> s) & 1u) << 4u));
  }
  return SB(f16at(p) * sm.x, -(f16at(p + 2u) * sm.y), 0, 0);`,
  q6_k: `let p = row + (j / 8u) * 210u;
  let e0 = (j % 8u) * 32u;
  let half = e0 >> 7u;
  let run = (e0 & 127u) >> 5u;
  for (var l = 0u; l < 32u; l++) {
    let ql = b8(p + half * 64u + l + (run & 1u) * 32u);
    let qh = b8(p + 128u + half * 32u + l);
    let lo = select(ql & 15u, ql >> 4u, run >= 2u);
    Q[l] = i32(lo | (((qh >> (2u * run)) & 3u) << 4u)) - 32;
  }
  return SB(f16at(p + 208u), 0.0, s8(p + 192u + (e0 >> 4u)), s8(p + 193u + (e0 >> 4u)));`,
};

/** WGSL: struct SB, private Q, `sub_block(row_byte, j)` for `type` (needs BYTES). */
export function subBlockDecoder(type: QuantType): string {
  return `struct SB { scale: f32, offset: f32, q6a: i32, q6b: i32 }
var<private> Q: array<i32, 32>;
${type === 'q4_k' || type === 'q5_k' ? K4_SCALES : ''}
fn sub_block(row: u32, j: u32) -> SB {
  ${BODIES[type]}
}
`;
}

/** Whether the sub-blocks carry an offset (a min) term. */
export function hasOffsetType(type: QuantType): boolean {
  return type === 'q4_1' || type === 'q5_1' || type === 'q4_k' || type === 'q5_k';
}

// ---- Packed form for the matmul: sub-block j as 8 words of 4 int8 lanes (element
// l = 4w + lane), so a dot product with the int8 activations is 8 dot4I8Packed. Lanes hold
// the raw unsigned quants (signed for Q8_0); the format's zero point `bias` comes back out
// exactly through the activation sums: Σ (q − bias)·x = Σ q·x − bias·Σ x. Q6_K returns
// its two 16-group int8 scales; the caller sums the halves separately.

const WORD_AT = /* wgsl */ `
fn word_at(off: u32) -> u32 {
  let a = off >> 2u;
  let sh = (off & 3u) * 8u;
  if (sh == 0u) { return W[a]; }
  return (W[a] >> sh) | (W[a + 1u] << (32u - sh));
}
// bits 0..3 of b to bit 4 of each byte lane
fn spread4(b: u32) -> u32 { return ((b & 1u) << 4u) | ((b & 2u) << 11u) | ((b & 4u) << 18u) | ((b & 8u) << 25u); }`;

/** Per type: `at` opens block j of the row (p, and what both readers need), `head` returns its
 * PB (scales, bias) and `word` its packed word w (0..7: elements 4w..4w+3). The lanes of the
 * tiled matmul read one word each (packed_word); packed_block = the head and all 8 words. */
interface PackedBody { readonly at: string; readonly head: string; readonly word: string }

const K4_AT = (bytes: number): string => `let p = row + (j / 8u) * ${bytes}u;
  let s = j % 8u;`;
const K4_HEAD = `let sm = scale_min_k4(p + 4u, s);
  return PB(f16at(p) * sm.x, -(f16at(p + 2u) * sm.y), 0, 0, 0);`;
const Q6_AT = `let p = row + (j / 8u) * 210u;
  let e0 = (j % 8u) * 32u;`;
/** Q4_0/Q4_1: word w & 3 of the nibbles, low (w < 4) or high (w ≥ 4) halves. */
const nibbleWord = (qs: number): string => `let v = word_at(p + ${qs}u + 4u * (w & 3u));
  return (v >> (4u * (w >> 2u))) & 0x0f0f0f0fu;`;
/** Q5_0/Q5_1: the nibbles and bit 4 from the 32-bit qh (element l's bit l). */
const q5Word = (qh: number, qs: number): string => `let v = word_at(p + ${qs}u + 4u * (w & 3u));
  return ((v >> (4u * (w >> 2u))) & 0x0f0f0f0fu) | spread4(u32at(p + ${qh}u) >> (4u * w));`;

const PACKED_BODIES: Record<QuantType, PackedBody> = {
  q8_0: { at: 'let p = row + j * 34u;', head: 'return PB(f16at(p), 0.0, 0, 0, 0);', word: 'return word_at(p + 2u + 4u * w);' },
  q4_0: { at: 'let p = row + j * 18u;', head: 'return PB(f16at(p), 0.0, 8, 0, 0);', word: nibbleWord(2) },
  q4_1: { at: 'let p = row + j * 20u;', head: 'return PB(f16at(p), f16at(p + 2u), 0, 0, 0);', word: nibbleWord(4) },
  q5_0: { at: 'let p = row + j * 22u;', head: 'return PB(f16at(p), 0.0, 16, 0, 0);', word: q5Word(2, 6) },
  q5_1: { at: 'let p = row + j * 24u;', head: 'return PB(f16at(p), f16at(p + 2u), 0, 0, 0);', word: q5Word(4, 8) },
  q4_k: { at: K4_AT(144), head: K4_HEAD, word: `let qs = p + 16u + (s >> 1u) * 32u;
  let sh = (s & 1u) * 4u;
  return (word_at(qs + 4u * w) >> sh) & 0x0f0f0f0fu;` },
  q5_k: { at: K4_AT(176), head: K4_HEAD, word: `let qs = p + 48u + (s >> 1u) * 32u;
  let sh = (s & 1u) * 4u;
  return ((word_at(qs + 4u * w) >> sh) & 0x0f0f0f0fu) | (((word_at(p + 16u + 4u * w) >> s) & 0x01010101u) << 4u);` },
  q6_k: { at: Q6_AT, head: 'return PB(f16at(p + 208u), 0.0, 32, s8(p + 192u + (e0 >> 4u)), s8(p + 193u + (e0 >> 4u)));', word: `let half = e0 >> 7u;
  let run = (e0 & 127u) >> 5u;
  let ql = p + half * 64u + (run & 1u) * 32u;
  let qhb = p + 128u + half * 32u;
  let sh = select(0u, 4u, run >= 2u);
  return ((word_at(ql + 4u * w) >> sh) & 0x0f0f0f0fu) | (((word_at(qhb + 4u * w) >> (2u * run)) & 0x03030303u) << 4u);` },
};

/** The format's zero point (PB.bias) as a TypeScript number: Σ (q − bias)·x. */
export function packedBias(type: QuantType): number {
  return type === 'q4_0' ? 8 : type === 'q5_0' ? 16 : type === 'q6_k' ? 32 : 0;
}

/** WGSL: struct PB {scale, offset, bias, q6a, q6b}, private QP, `packed_block(row_byte, j)`
 * (needs BYTES; Q4_K/Q5_K also the scale reader). */
export function packedBlockDecoder(type: QuantType): string {
  return `${PACKED_BLOCK_STATE}
${packedBlockFns(type)}`;
}

/** The decoder's declarations (struct PB, private QP), once per shader. */
export const PACKED_BLOCK_STATE = `struct PB { scale: f32, offset: f32, bias: i32, q6a: i32, q6b: i32 }
var<private> QP: array<u32, 8>;`;

/** The decoder's functions over the weight binding W (word_at, spread4, the Q4_K/Q5_K scale
 * reader, packed_head, packed_word, packed_block; they need BYTES). */
export function packedBlockFns(type: QuantType): string {
  const b = PACKED_BODIES[type];
  return `${WORD_AT}
${type === 'q4_k' || type === 'q5_k' ? K4_SCALES : ''}
fn packed_head(row: u32, j: u32) -> PB {
  ${b.at}
  ${b.head}
}
fn packed_word(row: u32, j: u32, w: u32) -> u32 {
  ${b.at}
  ${b.word}
}
fn packed_block(row: u32, j: u32) -> PB {
  for (var w = 0u; w < 8u; w++) { QP[w] = packed_word(row, j, w); }
  return packed_head(row, j);
}
${type === 'q6_k' ? `fn packed_q6(row: u32, j: u32) -> vec2<i32> {
  ${b.at}
  return vec2<i32>(s8(p + 192u + (e0 >> 4u)), s8(p + 193u + (e0 >> 4u)));
}` : ''}
`;
}

/** Σ of 4 int8 lane products: the builtin where the adapter has it, else by shifts. */
export function dot4Source(builtin: boolean): string {
  if (builtin) return 'fn dot4(a: u32, b: u32) -> i32 { return dot4I8Packed(a, b); }';
  return `fn lane(v: u32, i: u32) -> i32 { return (bitcast<i32>(v << (24u - 8u * i))) >> 24u; }
fn dot4(a: u32, b: u32) -> i32 { return lane(a, 0u) * lane(b, 0u) + lane(a, 1u) * lane(b, 1u) + lane(a, 2u) * lane(b, 2u) + lane(a, 3u) * lane(b, 3u); }`;
}
