// The first frame of an animated WebP, as Pillow's seek(0) gives it (libwebp's animation
// decoder): the frame's bitstream (its ALPH and VP8 chunks, or its VP8L chunk) re-wrapped as a
// still WebP for the still decoder, then placed at its offset on a canvas of the file's size
// that starts fully transparent. Canvas pixels outside the frame stay transparent when the
// file declares alpha, else they are opaque black (Pillow reads such a file as RGB).
import { imageError } from './image-probe.js';

export interface WebpFirstFrame {
  /** A still WebP file holding the first frame alone. */
  readonly still: Uint8Array;
  readonly x: number;
  readonly y: number;
  readonly width: number;
  readonly height: number;
  readonly canvasWidth: number;
  readonly canvasHeight: number;
  /** The file's VP8X alpha flag. */
  readonly alpha: boolean;
}

const u24 = (b: Uint8Array, i: number): number => b[i]! | (b[i + 1]! << 8) | (b[i + 2]! << 16);
const u32 = (b: Uint8Array, i: number): number => (b[i]! | (b[i + 1]! << 8) | (b[i + 2]! << 16) | (b[i + 3]! << 24)) >>> 0;
const fourcc = (b: Uint8Array, i: number): string => String.fromCharCode(...b.subarray(i, i + 4));

interface Chunk { readonly id: string; readonly at: number; readonly size: number }

/** The RIFF chunks of b[from, to) (each: 4-byte id, 4-byte size, payload padded to even). */
function chunks(b: Uint8Array, from: number, to: number): Chunk[] {
  const out: Chunk[] = [];
  for (let i = from; i + 8 <= to;) {
    const size = u32(b, i + 4);
    out.push({ id: fourcc(b, i), at: i, size });
    i += 8 + size + (size & 1);
  }
  return out;
}

function riff(parts: readonly Uint8Array[]): Uint8Array {
  const body = parts.reduce((n, p) => n + p.length, 0);
  const out = new Uint8Array(12 + body);
  out.set([0x52, 0x49, 0x46, 0x46]); // RIFF
  new DataView(out.buffer).setUint32(4, 4 + body, true);
  out.set([0x57, 0x45, 0x42, 0x50], 8); // WEBP
  let at = 12;
  for (const p of parts) { out.set(p, at); at += p.length; }
  return out;
}

/** A VP8X chunk for a still of w×h with an alpha channel. */
function vp8x(w: number, h: number): Uint8Array {
  const c = new Uint8Array(18);
  c.set([0x56, 0x50, 0x38, 0x58, 10, 0, 0, 0, 0x10]); // "VP8X", size 10, flags: alpha
  c.set([(w - 1) & 255, ((w - 1) >> 8) & 255, ((w - 1) >> 16) & 255, (h - 1) & 255, ((h - 1) >> 8) & 255, ((h - 1) >> 16) & 255], 12);
  return c;
}

/** The first ANMF frame of an animated WebP (the caller has checked the VP8X animation flag). */
export function webpFirstFrame(b: Uint8Array, label: string): WebpFirstFrame {
  const top = chunks(b, 12, Math.min(b.length, 8 + u32(b, 4)));
  const head = top[0];
  const frame = top.find((c) => c.id === 'ANMF');
  if (!head || head.id !== 'VP8X' || !frame || frame.size < 16 || frame.at + 8 + frame.size > b.length) {
    throw imageError(label, 'corrupt animated WebP: no complete first frame (ANMF)');
  }
  const p = frame.at + 8;
  const [x, y, width, height] = [2 * u24(b, p), 2 * u24(b, p + 3), u24(b, p + 6) + 1, u24(b, p + 9) + 1];
  const [canvasWidth, canvasHeight] = [u24(b, head.at + 12) + 1, u24(b, head.at + 15) + 1];
  if (x + width > canvasWidth || y + height > canvasHeight) {
    throw imageError(label, `corrupt animated WebP: first frame ${width}×${height} at (${x}, ${y}) outside the ${canvasWidth}×${canvasHeight} canvas`);
  }
  const sub = chunks(b, p + 16, p + frame.size);
  const whole = (c: Chunk): Uint8Array => b.subarray(c.at, c.at + 8 + c.size + (c.size & 1));
  const alph = sub.find((c) => c.id === 'ALPH');
  const image = sub.find((c) => c.id === 'VP8 ' || c.id === 'VP8L');
  if (!image) throw imageError(label, 'corrupt animated WebP: the first frame has no VP8/VP8L bitstream');
  const still = alph && image.id === 'VP8 ' ? riff([vp8x(width, height), whole(alph), whole(image)]) : riff([whole(image)]);
  return { still, x, y, width, height, canvasWidth, canvasHeight, alpha: (b[head.at + 8]! & 0x10) !== 0 };
}

/** The decoded first frame (RGBA, width × height) placed on its canvas (RGBA). */
export function placeOnCanvas(f: WebpFirstFrame, rgba: ArrayLike<number>): { width: number; height: number; data: Uint8Array } {
  const out = new Uint8Array(f.canvasWidth * f.canvasHeight * 4);
  if (!f.alpha) for (let i = 3; i < out.length; i += 4) out[i] = 255;
  for (let r = 0; r < f.height; r++) {
    for (let c = 0; c < f.width * 4; c++) out[((f.y + r) * f.canvasWidth + f.x) * 4 + c] = rgba[r * f.width * 4 + c]!;
  }
  return { width: f.canvasWidth, height: f.canvasHeight, data: out };
}
