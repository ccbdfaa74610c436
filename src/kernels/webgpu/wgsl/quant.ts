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
